"""Certified auto-decisions: from people's unbiased verdicts, the confidence above which the judge agrees with them
at a target, with a stated probability; and the quality rate's interval from the audit sample (PPI++)."""

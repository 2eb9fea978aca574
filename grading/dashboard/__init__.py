"""The stakeholders' dashboard over the record: its figures per section (from the counters), re-grade progress,
labels from outside, and the fixed-rule audit sample that measures the judge against people."""

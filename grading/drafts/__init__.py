"""The draft gate: a draft saved (submit), graded (the checks, org memory, the judge, the merge: gate), and its
pipeline told of the verdict (webhooks)."""

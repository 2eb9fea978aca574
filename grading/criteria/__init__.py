"""Plans over a criteria version: what a change would re-grade and preview (impact), trials against the judge, and
a trial scored against people. The versions themselves and their worked examples are the record's
(grading/reviews/versions.py, examples.py)."""

"""Grading passes: which items are owed a grading, and the batches a pass hands to workers (the planner)."""

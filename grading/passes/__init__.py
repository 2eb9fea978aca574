"""Grading passes: which items are owed a grading (the planner), handing them to workers (enqueue), and whether
their tasks still exist (inflight)."""

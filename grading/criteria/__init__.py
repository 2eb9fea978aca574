"""Criteria versions: editing and publishing, what a change would re-grade (impact), and trials against the judge."""

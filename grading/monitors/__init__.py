"""Monitors: a figure over a rolling window on a slice of items, against a warning and an alert level; evaluated by
beat, each change of state told."""

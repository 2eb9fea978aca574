"""The audit trail for org admins: the org's events filtered and paged, their CSV export; and each item's own trail
on its pages (display.py)."""

"""Erasing items (docs/org-admins.md): one conversation, one draft, every item naming an end user, or
what a retention policy no longer keeps. `items.py` erases a batch of items and everything derived from them in
the caller's transaction; `runs.py` asks for erasures, works them in short batches that resume after a crash, and
runs the daily retention pass."""

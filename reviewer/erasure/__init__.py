"""The erasure page (/erasure/): org admins ask to erase one conversation, one draft or an end user's items, and see
the tombstones of past erasures."""

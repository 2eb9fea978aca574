"""The monitors' pages: each org's monitors with their state and history, the items behind each figure, and the
forms org admins and leads set them up with."""

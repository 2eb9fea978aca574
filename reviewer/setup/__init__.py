"""The queue's set-up on pages (/setup/): an org's service-level targets, changed by leads and org admins through
the services the `manage.py` commands use."""

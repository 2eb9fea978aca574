"""The org admins' pages: members and roles, API keys, the webhook signing secret and retention, for the orgs in
which a person holds the org-admin role."""

"""Single sign-on with an OpenID provider (OpenID Connect's authorization code flow, with PKCE), and the rules for
local passwords beside it. Off unless OIDC_ISSUER is set (docs/production.md, "Single sign-on").

provider.py talks to the provider through Authlib, which checks every token; people.py decides who a signed-in
person is in Tollgate and which memberships the provider's groups give them; views.py holds the two pages.
"""

from collections.abc import Iterator

import pytest

from tests.fakes.oidc_provider import CLIENT_ID, CLIENT_SECRET, OidcProvider

GROUP_RULES = (
    ("tollgate-ops", "northwind", "operator"),
    ("tollgate-admins", "northwind", "org_admin"),
    ("tollgate-admins", "northwind", "criteria_admin"),
)


@pytest.fixture(scope="module")
def oidc_provider() -> Iterator[OidcProvider]:
    """One real provider process for a test module (it starts in well under a second, and keeps no state that one
    test could leave for another but its accounts, which each test sets)."""
    provider = OidcProvider()
    yield provider
    provider.close()


@pytest.fixture
def single_sign_on(settings, oidc_provider, org) -> OidcProvider:
    """Tollgate configured for the loopback provider, its groups granting roles in the org `northwind`."""
    settings.OIDC_ISSUER = oidc_provider.issuer
    settings.OIDC_CLIENT_ID = CLIENT_ID
    settings.OIDC_CLIENT_SECRET = CLIENT_SECRET
    settings.OIDC_SCOPES = "openid email profile groups"
    settings.OIDC_PROVIDER_NAME = "Loopback ID"
    settings.OIDC_GROUP_ROLES = GROUP_RULES
    return oidc_provider

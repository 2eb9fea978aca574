"""Single sign-on in a real browser: the button, the provider's own login and consent pages, back to the queue, and
signing out at the provider too, with Tollgate's content security policy in force all along (Chromium holds a form's
redirects to the policy's form-action)."""

import copy
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from reviewer.models import Role, SignInIdentity
from reviewer.settings import csp_form_action
from tests.fakes.oidc_provider import CLIENT_ID, CLIENT_SECRET, OidcProvider

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def provider_for_the_live_server(live_server) -> Iterator[OidcProvider]:
    provider = OidcProvider(tollgate_url=live_server.url)
    yield provider
    provider.close()


def test_a_person_signs_in_with_the_provider_works_the_queue_and_signs_out_there_too(
    page, live_server, provider_for_the_live_server, settings, org
):
    provider = provider_for_the_live_server
    settings.OIDC_ISSUER, settings.OIDC_CLIENT_ID, settings.OIDC_CLIENT_SECRET = (
        provider.issuer,
        CLIENT_ID,
        CLIENT_SECRET,
    )
    settings.OIDC_SCOPES = "openid email profile groups"
    settings.OIDC_PROVIDER_NAME = "Loopback ID"
    settings.OIDC_GROUP_ROLES = (("tollgate-ops", org.slug, Role.OPERATOR.value),)
    # The policy as settings make it from OIDC_ISSUER at startup.
    policy = copy.deepcopy(settings.CONTENT_SECURITY_POLICY)
    policy["DIRECTIVES"]["form-action"] = csp_form_action(provider.issuer)
    settings.CONTENT_SECURITY_POLICY = policy
    provider.set_account("ada-0001", email="ada@example.com", email_verified=True, groups=["tollgate-ops"])

    tollgate_errors = []  # the provider's development pages fetch web fonts and a favicon they cannot have here
    page.on(
        "console",
        lambda message: (
            message.type == "error"
            and message.location["url"].startswith(live_server.url)
            and tollgate_errors.append(message.text)
        ),
    )
    page.goto("/queue/")
    page.get_by_role("button", name="Sign in with Loopback ID").click()
    page.locator("input[name=login]").fill("ada-0001")
    page.locator("input[name=password]").fill("any")
    page.get_by_role("button", name="Sign-in").click()
    page.get_by_role("button", name="Continue").click()  # the provider's consent page

    page.wait_for_url("**/queue/")
    assert page.locator("h1").inner_text() == "Review queue"
    assert "ada@example.com" in page.locator("header .who").inner_text()
    assert SignInIdentity.objects.get(subject="ada-0001").user.username == "ada@example.com"

    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(f"{provider.issuer}/session/end**")
    page.get_by_role("button", name="Yes, sign me out").click()
    page.wait_for_url(lambda url: urlsplit(url).path == "/login/")  # with the state Tollgate sent the provider
    assert page.get_by_role("button", name="Sign in with Loopback ID").is_visible()
    assert tollgate_errors == []

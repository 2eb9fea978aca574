"""Sign-in throttling keys on who is trying, from where: behind the documented TLS proxy "where" is the client
the proxy saw, not the proxy, so nobody can lock an operator out from elsewhere, nor dodge the lock.

The proxy (BEHIND_TLS_PROXY=1) connects from PROXY and appends the address it saw to X-Forwarded-For.
"""

import pytest
from django.urls import reverse

from tests.builders.people import PASSWORD

PROXY = "10.0.0.2"
DANA_AT_HOME = "198.51.100.7"
MALLORY = "203.0.113.66"


@pytest.fixture
def behind_proxy(settings):
    settings.BEHIND_TLS_PROXY = True


def sign_in(client, password: str, *, forwarded_for: str | None, remote: str = PROXY, username: str = "dana"):
    headers = {"REMOTE_ADDR": remote}
    if forwarded_for is not None:
        headers["HTTP_X_FORWARDED_FOR"] = forwarded_for
    response = client.post(reverse("login"), {"username": username, "password": password}, **headers)
    client.logout()
    return response.status_code


def fail_five_times(client, **where) -> None:
    for _ in range(5):  # AXES_FAILURE_LIMIT: the fifth failure locks
        sign_in(client, "wrong", **where)


def test_behind_the_proxy_failures_from_one_client_do_not_lock_the_user_out_from_another(
    client, operator, behind_proxy
):
    fail_five_times(client, forwarded_for=MALLORY)
    assert sign_in(client, PASSWORD, forwarded_for=MALLORY) == 429  # the one failing is locked out
    assert sign_in(client, PASSWORD, forwarded_for=DANA_AT_HOME) == 302  # the operator is not


def test_a_forged_forwarded_for_entry_neither_frames_the_operator_nor_dodges_the_lock(client, operator, behind_proxy):
    # Mallory writes Dana's address in the header herself; the proxy appends the address it really saw.
    for forged in ["198.51.100.7", "192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4"]:
        sign_in(client, "wrong", forwarded_for=f"{forged}, {MALLORY}")
    assert sign_in(client, PASSWORD, forwarded_for=f"192.0.2.5, {MALLORY}") == 429
    assert sign_in(client, PASSWORD, forwarded_for=DANA_AT_HOME) == 302


def test_a_lockout_is_for_that_username_only(client, operator, criteria_admin, behind_proxy):
    fail_five_times(client, forwarded_for=DANA_AT_HOME)
    assert sign_in(client, PASSWORD, forwarded_for=DANA_AT_HOME, username="casey") == 302


def test_without_the_proxy_a_forwarded_for_header_is_ignored(client, operator):
    for forged in ["192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4", "192.0.2.5"]:
        sign_in(client, "wrong", remote=MALLORY, forwarded_for=forged)
    assert sign_in(client, PASSWORD, remote=MALLORY, forwarded_for="192.0.2.6") == 429
    assert sign_in(client, PASSWORD, remote=DANA_AT_HOME, forwarded_for=MALLORY) == 302

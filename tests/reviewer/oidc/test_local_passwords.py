"""Local passwords turned off, for the whole deployment or for the people of some e-mail domains: a right password
no longer signs them in (nothing is written), everyone else's still does, and the throttling still counts."""

import pytest
from django.urls import reverse

from grading.models import AuditEvent
from tests.builders.people import PASSWORD, make_person


@pytest.fixture
def at_example(org):
    person = make_person("ellis", org)
    person.email = "Ellis@Example.com"
    person.save()
    return person


def password_sign_in(client, username: str, password: str = PASSWORD):
    return client.post(reverse("login"), {"username": username, "password": password})


def test_with_passwords_off_a_right_password_signs_nobody_in(client, single_sign_on, settings, operator):
    settings.LOCAL_PASSWORDS = False

    response = password_sign_in(client, "dana")

    assert response.status_code == 200
    assert b"Passwords are turned off here: sign in with Loopback ID" in response.content
    assert "_auth_user_id" not in client.session
    assert not AuditEvent.objects.exists()
    page = client.get(reverse("login")).content.decode()
    assert 'name="password"' not in page and "Sign in with Loopback ID" in page


def test_with_passwords_off_a_session_begun_with_a_password_ends(client, single_sign_on, settings, operator):
    assert password_sign_in(client, "dana").status_code == 302
    settings.LOCAL_PASSWORDS = False
    response = client.get(reverse("queue"))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


def test_passwords_off_for_a_domain_refuse_its_people_only(client, single_sign_on, settings, operator, at_example):
    settings.LOCAL_PASSWORDS_OFF_FOR_DOMAINS = ["example.com"]

    assert password_sign_in(client, "ellis").status_code == 200  # the account's address is at the domain
    assert b"Please enter a correct username and password" in password_sign_in(client, "ellis").content
    refused = password_sign_in(client, "someone@example.com")  # typed as an address: said so, whoever it is
    assert b"Passwords are turned off here" in refused.content
    assert "_auth_user_id" not in client.session
    assert not AuditEvent.objects.exists()

    assert password_sign_in(client, "dana").status_code == 302  # at no such domain
    assert AuditEvent.objects.get().actor == operator


def test_throttling_still_locks_out_password_guessing(client, single_sign_on, settings, operator, at_example):
    settings.LOCAL_PASSWORDS_OFF_FOR_DOMAINS = ["example.com"]
    for _ in range(5):  # AXES_FAILURE_LIMIT
        password_sign_in(client, "dana", "wrong")
    assert password_sign_in(client, "dana").status_code == 429

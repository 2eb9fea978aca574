"""People for tests: a user with a known password and roles in an org (the personas of tests/conftest.py)."""

import re

from django.contrib.auth import get_user_model

from grading.models import Org
from reviewer.models import Membership, Role

PASSWORD = "correct horse battery staple"


def make_person(username: str, org: Org | None = None, *roles: Role, email: str = ""):
    user = get_user_model().objects.create_user(username=username, password=PASSWORD, email=email)
    for role in roles:
        Membership.objects.create(user=user, org=org, role=role)
    return user


def persona_org(**fields) -> Org:
    """The suite's org (the `org` fixture), also for a world a module builds once."""
    return Org.objects.create(name="Northwind", slug="northwind", **fields)


def persona_operator(org: Org):
    """The suite's operator of `org` (the `operator` fixture)."""
    return make_person("dana", org, Role.OPERATOR)


def persona_criteria_admin(org: Org):
    """The suite's criteria admin of `org` (the `criteria_admin` fixture)."""
    return make_person("casey", org, Role.CRITERIA_ADMIN)


def make_unused_account(username: str, org: Org | None = None, *roles: Role, email: str = ""):
    """An account nobody has used: no password, never signed in, as org admins made them for an address before
    invitations (and as the Django admin still can)."""
    user = get_user_model().objects.create_user(username=username, password=None, email=email)
    for role in roles:
        Membership.objects.create(user=user, org=org, role=role)
    return user


def invitation_link(mailbox: list, address: str) -> str:
    """The path of the invitation link in the last mail to `address` (tests read the mailbox as the invitee would)."""
    to_them = [message for message in mailbox if address in message.to]
    assert to_them, f"no mail to {address}"
    found = re.search(r"https?://[^/\s]+(/org/invitation/\S+/)", to_them[-1].body)
    assert found, to_them[-1].body
    return found.group(1)

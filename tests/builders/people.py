"""People for tests: a user with a known password and roles in an org (the personas of tests/conftest.py)."""

from django.contrib.auth import get_user_model

from grading.models import Org
from reviewer.models import Membership, Role

PASSWORD = "correct horse battery staple"


def make_person(username: str, org: Org | None = None, *roles: Role):
    user = get_user_model().objects.create_user(username=username, password=PASSWORD)
    for role in roles:
        Membership.objects.create(user=user, org=org, role=role)
    return user

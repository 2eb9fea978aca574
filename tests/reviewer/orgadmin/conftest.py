"""Personas of the org admin's pages: an org admin of the org and one of another org."""

import pytest

from reviewer.models import Role
from tests.builders.people import make_person


@pytest.fixture
def org_admin(org):
    return make_person("olive", org, Role.ORG_ADMIN)


@pytest.fixture
def other_org_admin(other_org):
    return make_person("oscar", other_org, Role.ORG_ADMIN)

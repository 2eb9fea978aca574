"""A script reads what the set-up pages list, with the org's key: targets and rules in the order they decide, pools
with their members; another org's are not there."""

import pytest

from grading.api.keys import api_key_create
from grading.models import ServiceTarget
from reviewer.models import AssignmentRule, Pool, Role
from tests.builders.people import make_person

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(client, org):
    key = api_key_create(org=org, name="setup-script").plaintext
    return lambda path: client.get(f"/api/v1{path}", HTTP_AUTHORIZATION=f"Bearer {key}")


def test_it_lists_the_org_s_targets_pools_and_rules_in_the_order_they_decide(api, org, other_org):
    billing = Pool.objects.create(org=org, name="billing")
    billing.members.add(make_person("bo", org, Role.OPERATOR), make_person("al", org, Role.OPERATOR))
    ServiceTarget.objects.create(org=org, position=2, minutes=240)
    ServiceTarget.objects.create(org=org, position=1, kind="draft", reason="audit", minutes=60)
    AssignmentRule.objects.create(org=org, position=1, application="billing-assistant", pool=billing, hours=4)
    AssignmentRule.objects.create(org=org, position=2, kind="draft", person=make_person("cy", org, Role.OPERATOR))
    Pool.objects.create(org=other_org, name="theirs")
    ServiceTarget.objects.create(org=other_org, position=1, minutes=5)

    assert api("/setup/targets").json() == [
        {"position": 1, "kind": "draft", "application": None, "reason": "audit", "minutes": 60},
        {"position": 2, "kind": None, "application": None, "reason": None, "minutes": 240},
    ]
    assert api("/setup/pools").json() == [{"name": "billing", "members": ["al", "bo"]}]
    assert api("/setup/rules").json() == [
        {"position": 1, "kind": None, "application": "billing-assistant", "reason": None, "person": None,
         "pool": "billing", "hours": 4},
        {"position": 2, "kind": "draft", "application": None, "reason": None, "person": "cy", "pool": None,
         "hours": None},
    ]  # fmt: skip

"""A script reads what the set-up pages list, with the org's key: targets and rules in the order they decide, pools
with their members; another org's are not there. And it makes the changes the pages make, as the pages refuse and
audit them, with the org's key or the token of a person who sets the org up; and sets spend caps as the spend page."""

import pytest

from grading.api.keys import api_key_create
from grading.models import AuditEvent, ItemKind, ServiceTarget, SpendCap
from grading.reviews.versions import criteria_active
from reviewer.models import AssignmentRule, Membership, Pool, Role
from tests.builders.people import make_person
from tests.builders.tokens import api as token_api
from tests.builders.tokens import token_of

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


# --- the changes ------------------------------------------------------------------------------------------------


def _audited(org) -> list[tuple[str, str | None, str | None]]:
    """The org's trail of changes besides the credentials made for the test: action, the person, the key."""
    events = (
        AuditEvent.objects.filter(org=org)
        .exclude(action__in=["api_key.create", "personal_token.create"])
        .select_related("actor", "api_key")
        .order_by("pk")
    )
    return [(e.action, e.actor.get_username() if e.actor else None, e.api_key.name if e.api_key else None)
            for e in events]  # fmt: skip


def _setup_world(org):
    ann = make_person("ann", org, Role.OPERATOR)
    billing = Pool.objects.create(org=org, name="billing")
    billing.members.add(ann)
    return ann, billing


@pytest.mark.parametrize("caller", ["key", "org admin", "whole-org lead"])
def test_it_makes_each_set_up_change_the_pages_make_audited_with_the_key_or_the_person(client, org, caller):
    _setup_world(org)
    make_person("bo", org, Role.LEAD)
    if caller == "key":
        credential, by = api_key_create(org=org, name="setup-script").plaintext, (None, "setup-script")
    else:
        person = make_person("cy", org, Role.ORG_ADMIN if caller == "org admin" else Role.LEAD)
        credential, by = token_of(person, org), ("cy", None)

    def call(method, path, body=None, **query):
        response = token_api(client, credential, method, path, body, **query)
        assert response.status_code < 300, response.content
        return response.json() if response.content else None

    call("POST", "/setup/targets", {"kind": "draft", "minutes": 60})
    call("POST", "/setup/targets", {"minutes": 240, "ahead_of": 1})
    call("PATCH", "/setup/targets/2", {"minutes": 30})
    targets = call("POST", "/setup/targets/1/move", {"direction": "later"})
    assert [(t["position"], t["kind"], t["minutes"]) for t in targets] == [(1, "draft", 30), (2, None, 240)]
    assert call("DELETE", "/setup/targets/2") == [
        {"position": 1, "kind": "draft", "application": None, "reason": None, "minutes": 30}
    ]
    assert call("PUT", "/setup/pools/refunds", {"members": ["ann", "bo"]}) == {
        "name": "refunds",
        "members": ["ann", "bo"],
    }
    assert call("PATCH", "/setup/pools/refunds", {"name": "returns"}) == {"name": "returns", "members": ["ann", "bo"]}
    call("POST", "/setup/rules", {"kind": "draft", "pool": "returns", "hours": 4})
    call("PUT", "/setup/rules/2", {"kind": "draft", "person": "ann"})
    rules = call("POST", "/setup/rules/2/move", {"direction": "earlier"})
    assert [(r["position"], r["person"], r["pool"]) for r in rules] == [(1, "ann", None), (2, None, "returns")]
    call("DELETE", "/setup/rules/1")
    call("DELETE", "/setup/pools/returns")

    assert ServiceTarget.objects.filter(org=org).count() == 1
    assert not AssignmentRule.objects.filter(org=org).exists()
    assert list(Pool.objects.filter(org=org).values_list("name", flat=True)) == ["billing"]
    trail = _audited(org)
    assert {action for action, *_ in trail} == {
        "service_target.create", "service_target.move", "service_target.replace", "service_target.delete",
        "pool.create", "pool.rename", "pool.delete",
        "assignment_rule.create", "assignment_rule.move", "assignment_rule.delete",
    }  # fmt: skip
    assert {tuple(who) for _, *who in trail} == {by}


def test_a_refused_change_names_every_wrong_field_and_writes_nothing(client, org):
    _setup_world(org)
    key = api_key_create(org=org, name="setup-script").plaintext
    before = _audited(org)

    target = token_api(client, key, "POST", "/setup/targets", {"application": "nowhere", "minutes": 0})
    rule = token_api(client, key, "POST", "/setup/rules", {"kind": "draft", "application": "x", "hours": 0})
    pool = token_api(client, key, "PUT", "/setup/pools/refunds", {"members": ["ann", "nobody"]})

    assert target.status_code == rule.status_code == pool.status_code == 400
    assert {e["field"] for e in target.json()["errors"]} == {"application", "minutes"}
    assert {e["field"] for e in rule.json()["errors"]} == {"application", "hours", "person"}
    assert pool.json()["errors"] == [{"field": "members", "message": f"no one named nobody in {org.slug}"}]
    assert _audited(org) == before
    assert not ServiceTarget.objects.filter(org=org).exists()
    assert list(Pool.objects.filter(org=org).values_list("name", flat=True)) == ["billing"]

    # A change the set-up cannot take (a name already taken) is a 409 in the service's words, writing nothing.
    Pool.objects.create(org=org, name="refunds")
    taken = token_api(client, key, "PATCH", "/setup/pools/refunds", {"name": "billing"})
    assert taken.status_code == 409
    assert taken.json() == {"detail": f"{org.slug} has a pool 'billing' already: choose another name"}
    assert sorted(Pool.objects.filter(org=org).values_list("name", flat=True)) == ["billing", "refunds"]
    assert _audited(org) == before


def test_another_org_s_targets_rules_pools_and_people_are_not_there(client, org, other_org):
    theirs = make_person("their-op", other_org, Role.OPERATOR)
    Pool.objects.create(org=other_org, name="theirs").members.add(theirs)
    ServiceTarget.objects.create(org=other_org, position=1, minutes=5)
    AssignmentRule.objects.create(org=other_org, position=1, person=theirs)
    key = api_key_create(org=org, name="setup-script").plaintext

    for method, path, body in [
        ("PATCH", "/setup/targets/1", {"minutes": 9}),
        ("DELETE", "/setup/targets/1", None),
        ("DELETE", "/setup/rules/1", None),
        ("POST", "/setup/rules/1/move", {"direction": "later"}),
        ("PATCH", "/setup/pools/theirs", {"name": "ours"}),
        ("DELETE", "/setup/pools/theirs", None),
    ]:
        assert token_api(client, key, method, path, body).status_code == 404, (method, path)
    assert token_api(client, key, "PUT", "/setup/pools/x", {"members": ["their-op"]}).status_code == 400
    assert Pool.objects.get(org=other_org).name == "theirs"
    assert ServiceTarget.objects.get(org=other_org).minutes == 5
    assert AssignmentRule.objects.filter(org=other_org).count() == 1


def test_a_person_who_does_not_set_up_the_org_is_refused(client, org):
    ann, _ = _setup_world(org)
    part_lead = make_person("pat", org)
    Membership.objects.create(user=part_lead, org=org, role=Role.LEAD, applications=["billing"])

    for person in (ann, part_lead):
        token = token_of(person, org)
        assert token_api(client, token, "POST", "/setup/targets", {"minutes": 60}).status_code == 403
        assert token_api(client, token, "GET", "/setup/pools").status_code == 403
    assert not ServiceTarget.objects.filter(org=org).exists()


# --- spend caps -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("caller", ["key", "criteria admin"])
def test_it_sets_and_removes_spend_caps_audited_with_the_key_or_the_person(client, org, caller):
    version = criteria_active(org=org, kind=ItemKind.CONVERSATION)
    if caller == "key":
        credential, by = api_key_create(org=org, name="budget").plaintext, (None, "budget")
    else:
        credential, by = token_of(make_person("cy", org, Role.CRITERIA_ADMIN), org), ("cy", None)

    org_cap = token_api(client, credential, "PUT", "/spend/caps", {"period": "day", "tokens": 1000})
    version_cap = token_api(
        client, credential, "PUT", "/spend/caps", {"period": "week", "criteria_version": version.pk, "cost_micros": 5}
    )
    assert org_cap.status_code == version_cap.status_code == 200
    assert set(SpendCap.objects.filter(org=org).values_list("criteria_version", "period", "tokens", "cost_micros")) == {
        (None, "day", 1000, None), (version.pk, "week", None, 5)
    }  # fmt: skip
    cleared = token_api(client, credential, "DELETE", "/spend/caps", period="day")
    assert cleared.status_code == 204
    assert list(SpendCap.objects.filter(org=org).values_list("period", flat=True)) == ["week"]
    trail = _audited(org)
    assert [action for action, *_ in trail] == ["spend.cap_set", "spend.cap_set", "spend.cap_removed"]
    assert {tuple(who) for _, *who in trail} == {by}


def test_a_refused_spend_cap_writes_nothing(client, org, other_org):
    key = api_key_create(org=org, name="budget").plaintext
    theirs = criteria_active(org=other_org, kind=ItemKind.CONVERSATION)

    bad = token_api(client, key, "PUT", "/spend/caps", {"period": "month", "tokens": -1})
    nothing = token_api(client, key, "PUT", "/spend/caps", {"period": "day"})
    other = token_api(client, key, "PUT", "/spend/caps", {"period": "day", "criteria_version": theirs.pk, "tokens": 1})
    operator = token_api(
        client,
        token_of(make_person("op", org, Role.OPERATOR), org),
        "PUT",
        "/spend/caps",
        {"period": "day", "tokens": 1},
    )

    assert {e["field"] for e in bad.json()["errors"]} == {"period", "tokens"}
    assert (bad.status_code, nothing.status_code, other.status_code, operator.status_code) == (400, 400, 404, 403)
    assert not SpendCap.objects.exists()
    assert _audited(org) == []

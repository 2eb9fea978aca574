"""The set-up page's assignment rules: a lead (of the whole org) or an org admin adds one (the items it picks, a pool
or a person, for some hours) after the last and removes one; each change `manage.py assign rule`'s (audited, with
the person), each refusal at the top and at its field, as a 4xx that writes nothing."""

import pytest
from django.urls import reverse

from grading.models import AuditEvent
from reviewer.models import AssignmentRule, Membership, Pool, Role
from tests.builders.people import make_person
from tests.builders.queue_items import conversation_item

pytestmark = pytest.mark.django_db

PAGE = reverse("setup_rules")


@pytest.fixture
def lead(org):
    return make_person("lee", org, Role.LEAD)


@pytest.fixture
def billing(org):
    conversation_item(org, "cv-billing", application="billing")
    ann = make_person("ann", org, Role.OPERATOR)
    pool = Pool.objects.create(org=org, name="billing-team")
    pool.members.set([ann])
    return pool


def rules(org) -> list[tuple]:
    return list(
        AssignmentRule.objects.filter(org=org)
        .order_by("position")
        .values_list("position", "kind", "application", "reason", "pool__name", "person__username", "hours")
    )


def test_it_lets_a_lead_add_a_rule_for_a_pool_and_one_for_a_person(client_for, org, lead, billing):
    client = client_for(lead)
    response = client.post(
        PAGE, {"org": org.pk, "application": "billing", "reason": "unknown_check", "assignee": "pool:billing-team",
               "hours": "4"}
    )  # fmt: skip
    assert response.status_code == 302
    assert "billing · unknown_check  → pool billing-team  for 4 h" in client.get(response.url).content.decode()
    assert client.post(PAGE, {"org": org.pk, "kind": "draft", "assignee": f"person:{lead.pk}"}).status_code == 302
    assert rules(org) == [
        (1, "", "billing", "unknown_check", "billing-team", None, 4),
        (2, "draft", "", "", None, "lee", None),
    ]
    events = AuditEvent.objects.filter(action="assignment_rule.create")
    assert {event.actor_id for event in events} == {lead.pk}
    assert events.count() == 2


def test_it_lets_an_org_admin_remove_a_rule(client_for, org, billing):
    admin = make_person("olive", org, Role.ORG_ADMIN)
    AssignmentRule.objects.create(org=org, position=1, pool=billing)
    response = client_for(admin).post(reverse("setup_rule_remove"), {"org": org.pk, "position": 1})
    assert response.status_code == 302
    assert rules(org) == []
    assert AuditEvent.objects.get().actor_id == admin.pk


def test_it_warns_when_a_person_can_claim_only_part_of_what_the_rule_picks(client_for, org, lead, billing):
    pat = make_person("pat")
    Membership.objects.create(user=pat, org=org, role=Role.OPERATOR, applications=["billing"], drafts=False)
    client = client_for(lead)
    response = client.post(PAGE, {"org": org.pk, "assignee": f"person:{pat.pk}"})
    assert response.status_code == 302
    assert "they can claim only the items of this rule their reach covers" in client.get(response.url).content.decode()


@pytest.mark.parametrize(
    ("fields", "field", "says"),
    [
        ({"assignee": "pool:billing-team", "hours": "0"}, "hours", "hours must be from 1 to 8760"),
        ({"assignee": "pool:billing-team", "application": "biling"}, "application", "has no application named biling"),
        ({"assignee": "pool:billing-team", "kind": "draft", "application": "billing"}, "application", "drafts are"),
        ({"assignee": "pool:gone"}, "assignee", "no pool &#x27;gone&#x27; in northwind"),
        ({"assignee": "person:999999"}, "assignee", "Choose a pool or a person of the org."),
        ({"assignee": "someone"}, "assignee", "Choose a pool or a person of the org."),
        ({"assignee": "person:{sam}"}, "assignee", "not operator or lead in northwind: sam"),
        ({"assignee": "person:{pat}", "kind": "draft"}, "assignee", "pat cannot claim draft"),
        # The refusal's words end "their reach there is drafts only": it is still about the person.
        ({"assignee": "person:{dee}", "application": "billing"}, "assignee", "dee cannot claim any kind · billing"),
    ],
)
def test_it_refuses_a_bad_rule_at_the_top_and_at_its_field_writing_nothing(
    client_for, org, lead, billing, fields, field, says
):
    sam = make_person("sam", org, Role.STAKEHOLDER)
    pat = make_person("pat")
    Membership.objects.create(user=pat, org=org, role=Role.OPERATOR, applications=["billing"], drafts=False)
    dee = make_person("dee")
    Membership.objects.create(user=dee, org=org, role=Role.OPERATOR, applications=[], drafts=True)
    fields = {name: value.format(sam=sam.pk, pat=pat.pk, dee=dee.pk) for name, value in fields.items()}

    response = client_for(lead).post(PAGE, {"org": org.pk, **fields})

    assert response.status_code == 400
    page = response.content.decode()
    top = page[page.index('id="form-errors"') :]
    assert says in top[: top.index("</div>")]
    assert says in page[page.index(f'id="{field}-errors"') :][:400]
    assert rules(org) == []
    assert not AuditEvent.objects.exists()


def test_it_answers_another_orgs_rule_as_no_org_and_changes_nothing(client_for, org, other_org, lead):
    AssignmentRule.objects.create(org=other_org, position=1, person=lead)
    client = client_for(lead)
    assert client.post(PAGE, {"org": other_org.pk, "assignee": f"person:{lead.pk}"}).status_code == 404
    assert client.post(reverse("setup_rule_remove"), {"org": other_org.pk, "position": 1}).status_code == 404
    assert AssignmentRule.objects.count() == 1
    assert not AuditEvent.objects.exists()


# --- moving and replacing -----------------------------------------------------------------------------------------


def test_it_lets_a_lead_move_a_rule_earlier_and_later_audited(client_for, org, lead, billing):
    for position, hours in ((1, 1), (2, 2), (3, 3)):
        AssignmentRule.objects.create(org=org, position=position, pool=billing, hours=hours)
    client = client_for(lead)
    move = reverse("setup_rule_move")

    response = client.post(move, {"org": org.pk, "position": 3, "direction": "earlier"})

    assert response.status_code == 302
    assert "moved: northwind  2  any kind · any application · any reason  → pool billing-team  for 3 h (was at 3)" in (
        client.get(response.url).content.decode()
    )
    assert [hours for *_, hours in rules(org)] == [1, 3, 2]
    assert client.post(move, {"org": org.pk, "position": 1, "direction": "later"}).status_code == 302
    assert [hours for *_, hours in rules(org)] == [3, 1, 2]
    events = AuditEvent.objects.filter(action="assignment_rule.move").order_by("pk")
    assert [(event.detail["hours"], event.detail["was_position"], event.detail["position"]) for event in events] == [
        (3, 3, 2), (2, 2, 3), (1, 1, 2), (3, 2, 1)
    ]  # fmt: skip
    assert {event.actor_id for event in events} == {lead.pk}


def test_it_keeps_the_last_rule_last_and_refuses_to_move_a_rule_that_is_gone(client_for, org, lead, billing):
    AssignmentRule.objects.create(org=org, position=1, pool=billing)
    client = client_for(lead)
    move = reverse("setup_rule_move")
    kept = client.post(move, {"org": org.pk, "position": 1, "direction": "later"}, follow=True)
    assert "is the last rule" in kept.content.decode()
    gone = client.post(move, {"org": org.pk, "position": 2, "direction": "earlier"})
    assert gone.status_code == 409
    assert "no assignment rule at position 2 in northwind; nothing moved" in gone.content.decode()
    assert rules(org) == [(1, "", "", "", "billing-team", None, None)]
    assert not AuditEvent.objects.exists()


def test_it_replaces_a_rule_in_place_as_the_command_does(client_for, org, lead, billing):
    AssignmentRule.objects.create(org=org, position=1, pool=billing, hours=4)
    AssignmentRule.objects.create(org=org, position=2, kind="draft", person=lead)
    before = AssignmentRule.objects.get(position=1).pk
    client = client_for(lead)

    response = client.post(
        PAGE, {"org": org.pk, "application": "billing", "assignee": f"person:{lead.pk}", "hours": "2", "replaces": "1"}
    )

    assert response.status_code == 302
    assert rules(org) == [(1, "", "billing", "", None, "lee", 2), (2, "draft", "", "", None, "lee", None)]
    assert AssignmentRule.objects.get(position=1).pk == before
    event = AuditEvent.objects.get()
    assert (event.action, event.actor_id) == ("assignment_rule.replace", lead.pk)
    assert event.detail["was"]["pool"] == "billing-team"


def test_it_refuses_a_bad_replacement_at_its_field_and_keeps_the_rule(client_for, org, lead, billing):
    AssignmentRule.objects.create(org=org, position=1, pool=billing, hours=4)
    response = client_for(lead).post(
        PAGE, {"org": org.pk, "assignee": "pool:billing-team", "hours": "0", "replaces": "1"}
    )
    assert response.status_code == 400
    page = response.content.decode()
    assert "hours must be from 1 to 8760" in page[page.index('id="hours-errors"') :][:200]
    assert 'value="1" selected' in page  # the place chosen is kept
    assert rules(org) == [(1, "", "", "", "billing-team", None, 4)]
    assert not AuditEvent.objects.exists()

"""The set-up page's service-level targets: a lead (of the whole org) or an org admin adds them last or ahead of
another, moves and removes them, each change the command's (audited with the person, re-dating the waiting items),
each refusal at the top and at its field, as a 4xx that writes nothing."""

from datetime import timedelta

import pytest
from django.urls import reverse

from grading.models import AuditEvent, ServiceTarget
from reviewer.models import Membership, Role
from tests.builders.people import make_person
from tests.builders.queue_items import conversation_item, draft_item

pytestmark = pytest.mark.django_db

PAGE = reverse("setup_targets")


@pytest.fixture
def lead(org):
    return make_person("lee", org, Role.LEAD)


def rows(org) -> list[tuple]:
    return list(
        ServiceTarget.objects.filter(org=org)
        .order_by("position")
        .values_list("position", "kind", "application", "reason", "minutes")
    )


def add(client, org, **fields):
    return client.post(PAGE, {"org": org.pk, "unit": "minutes", **fields})


def test_it_lets_a_lead_add_a_target_ahead_of_another_in_one_step(client_for, org, lead):
    waiting = draft_item(org, "waiting")
    client = client_for(lead)
    assert add(client, org, within="10", unit="hours").status_code == 302
    assert add(client, org, kind="conversation", within="90").status_code == 302

    response = add(client, org, kind="draft", within="30", ahead_of="1")

    assert response.status_code == 302
    assert rows(org) == [(1, "draft", "", "", 30), (2, "", "", "", 600), (3, "conversation", "", "", 90)]
    waiting.refresh_from_db()
    assert waiting.due_at == waiting.routed_at + timedelta(minutes=30)
    page = client.get(response.url).content.decode()
    assert "created: northwind  1  draft · any application · any reason  within 30 min" in page
    assert page.index(f'id="target-{org.pk}-1"') < page.index(f'id="target-{org.pk}-2"')
    events = AuditEvent.objects.filter(action__startswith="service_target.").order_by("pk")
    assert {event.actor_id for event in events} == {lead.pk}
    assert [event.action for event in events][-3:] == [
        "service_target.move", "service_target.move", "service_target.create"
    ]  # fmt: skip


def test_it_lets_an_org_admin_move_a_target_earlier_and_later_and_remove_it(client_for, org):
    admin = make_person("olive", org, Role.ORG_ADMIN)
    client = client_for(admin)
    add(client, org, within="60")
    add(client, org, kind="draft", within="30")
    waiting = draft_item(org, "waiting")

    moved = client.post(reverse("setup_target_move"), {"org": org.pk, "position": 2, "direction": "earlier"})

    assert moved.status_code == 302
    assert rows(org) == [(1, "draft", "", "", 30), (2, "", "", "", 60)]
    waiting.refresh_from_db()
    assert waiting.due_at == waiting.routed_at + timedelta(minutes=30)
    client.post(reverse("setup_target_move"), {"org": org.pk, "position": 1, "direction": "later"})
    assert rows(org) == [(1, "", "", "", 60), (2, "draft", "", "", 30)]
    moves = AuditEvent.objects.filter(action="service_target.move").order_by("pk")
    assert [(event.detail["position"], event.detail["was_position"]) for event in moves] == [
        (1, 2), (2, 1),  # the one moved, then its neighbour
        (2, 1), (1, 2),
    ]  # fmt: skip
    assert {event.actor_id for event in moves} == {admin.pk}

    assert client.post(reverse("setup_target_remove"), {"org": org.pk, "position": 1}).status_code == 302
    assert rows(org) == [(2, "draft", "", "", 30)]
    assert AuditEvent.objects.get(action="service_target.delete").actor_id == admin.pk


def test_it_keeps_the_first_target_first_when_asked_to_move_it_earlier(client_for, org, lead):
    client = client_for(lead)
    add(client, org, within="60")
    response = client.post(reverse("setup_target_move"), {"org": org.pk, "position": 1, "direction": "earlier"})
    assert response.status_code == 302
    assert "is the first target" in client.get(response.url).content.decode()
    assert not AuditEvent.objects.filter(action="service_target.move").exists()


@pytest.mark.parametrize(
    ("fields", "field", "says"),
    [
        ({"within": "0"}, "within", "minutes must be from 1 to 525600"),
        ({"within": "8761", "unit": "hours"}, "within", "hours must be from 1 to 8760"),
        ({"within": "soon"}, "within", "Enter a whole number."),
        ({"within": ""}, "within", "This field is required."),
        ({"within": "30", "kind": "email"}, "kind", "Select a valid choice."),
        ({"within": "30", "reason": "hunch"}, "reason", "Select a valid choice."),
        ({"within": "30", "application": "biling"}, "application", "Northwind has no application named biling"),
        ({"within": "30", "kind": "draft", "application": "billing"}, "application", "drafts are filed under no"),
        ({"within": "30", "ahead_of": "7"}, "ahead_of", "no target at position 7 in northwind; nothing added"),
    ],
)
def test_it_refuses_a_bad_target_at_the_top_and_at_its_field_writing_nothing(
    client_for, org, lead, fields, field, says
):
    conversation_item(org, "cv-billing", application="billing")
    client = client_for(lead)
    add(client, org, within="600")
    before = list(AuditEvent.objects.values_list("pk", flat=True))

    response = add(client, org, **fields)

    assert response.status_code in (400, 409)
    page = response.content.decode()
    assert 'id="form-errors"' in page
    top = page[page.index('id="form-errors"') :]
    assert says in top[: top.index("</div>")]
    assert says in page[page.index(f'id="{field}-errors"') :][:400]
    assert rows(org) == [(1, "", "", "", 600)]
    assert list(AuditEvent.objects.values_list("pk", flat=True)) == before


def test_it_keeps_what_was_typed_when_it_refuses(client_for, org, lead):
    response = add(client_for(lead), org, kind="conversation", within="0", unit="hours")
    page = response.content.decode()
    assert response.status_code == 400
    assert '<option value="conversation" selected>' in page
    assert '<option value="hours" selected>' in page


def test_it_answers_another_orgs_target_as_no_org_and_changes_nothing(client_for, org, other_org, lead):
    theirs = ServiceTarget.objects.create(org=other_org, position=1, minutes=60)
    client = client_for(lead)
    assert add(client, other_org, within="30").status_code == 404
    assert client.post(reverse("setup_target_remove"), {"org": other_org.pk, "position": 1}).status_code == 404
    assert change(client, other_org, position="1", within="5").status_code == 404
    moved = client.post(reverse("setup_target_move"), {"org": other_org.pk, "position": 1, "direction": "later"})
    assert moved.status_code == 404
    assert list(ServiceTarget.objects.values_list("pk", flat=True)) == [theirs.pk]
    assert not AuditEvent.objects.exists()


def test_it_refuses_a_lead_of_part_of_the_org_and_shows_them_no_link(client_for, org):
    part = make_person("pat")
    Membership.objects.create(user=part, org=org, role=Role.LEAD, applications=["billing"], drafts=False)
    client = client_for(part)
    assert client.get(PAGE).status_code == 403
    assert add(client, org, within="30").status_code == 403
    assert not ServiceTarget.objects.exists()
    assert reverse("setup_targets") not in client.get(reverse("queue")).content.decode()


def test_it_is_linked_from_the_queue_and_the_org_pages(client_for, org, lead):
    assert 'id="queue-setup-link"' in client_for(lead).get(reverse("queue")).content.decode()
    admin = make_person("olive", org, Role.ORG_ADMIN)
    assert reverse("setup_targets") in client_for(admin).get(reverse("orgadmin_members")).content.decode()


def test_it_answers_a_hand_made_move_with_a_plain_400(client_for, org, lead):
    ServiceTarget.objects.create(org=org, position=1, minutes=60)
    response = client_for(lead).post(reverse("setup_target_move"), {"org": org.pk, "position": 1, "direction": "up"})
    assert response.status_code == 400
    assert "direction" in response.content.decode()
    assert rows(org) == [(1, "", "", "", 60)]


def change(client, org, **fields):
    return client.post(reverse("setup_target_change"), {"org": org.pk, "unit": "minutes", **fields})


def test_it_gives_a_target_another_duration_in_place_and_re_dates_the_waiting_items(client_for, org, lead):
    client = client_for(lead)
    add(client, org, kind="draft", within="60")
    kept = ServiceTarget.objects.get()
    waiting = draft_item(org, "waiting")

    assert change(client, org, position="1", within="2", unit="hours").status_code == 302

    assert rows(org) == [(1, "draft", "", "", 120)]
    assert ServiceTarget.objects.get().pk == kept.pk
    waiting.refresh_from_db()
    assert waiting.due_at == waiting.routed_at + timedelta(hours=2)
    event = AuditEvent.objects.get(action="service_target.replace")
    assert (event.actor_id, event.detail["minutes"], event.detail["was"]["minutes"]) == (lead.pk, 120, 60)


@pytest.mark.parametrize(
    ("within", "says"), [("0", "minutes must be from 1 to 525600"), ("soon", "Enter a whole number.")]
)
def test_it_refuses_a_bad_duration_at_the_top_and_on_the_targets_row(client_for, org, lead, within, says):
    client = client_for(lead)
    add(client, org, within="60")
    before = list(AuditEvent.objects.values_list("pk", flat=True))

    response = change(client, org, position="1", within=within)

    assert response.status_code == 400
    page = response.content.decode()
    top = page[page.index('id="form-errors"') :]
    assert says in top[: top.index("</div>")]
    assert says in page[page.index('id="change-1-errors"') :][:200]
    assert rows(org) == [(1, "", "", "", 60)]
    assert list(AuditEvent.objects.values_list("pk", flat=True)) == before


def test_it_refuses_to_change_a_target_that_is_gone(client_for, org, lead):
    response = change(client_for(lead), org, position="3", within="30")
    assert response.status_code == 409
    assert "no target at position 3 in northwind; nothing changed" in response.content.decode()
    assert not AuditEvent.objects.exists()

"""The set-up page's escalation: a lead (of the whole org) or an org admin starts it, changes whom it mails and when
it warns, and stops it; each change `manage.py escalation`'s (audited, with the person), each refusal at the top
and at its field, as a 4xx that writes nothing."""

import pytest
from django.urls import reverse

from grading.models import AuditEvent, ServiceTarget
from reviewer.models import Escalation, Role
from tests.builders.people import make_person

pytestmark = pytest.mark.django_db

PAGE = reverse("setup_escalation")


@pytest.fixture
def lead(org):
    return make_person("lee", org, Role.LEAD)


def settings(org) -> tuple | None:
    escalation = Escalation.objects.filter(org=org).first()
    if escalation is None:
        return None
    return (escalation.warn_minutes, escalation.to_assignees, escalation.to_leads, escalation.webhook_url)


def test_it_lets_a_lead_start_escalating_then_change_it_keeping_the_webhook(client_for, org, lead):
    ServiceTarget.objects.create(org=org, position=1, minutes=60)
    client = client_for(lead)
    started = client.post(PAGE, {"org": org.pk, "warn_minutes": "15", "to_assignees": "on", "to_leads": "on"})
    assert started.status_code == 302
    assert settings(org) == (15, True, True, "")
    page = client.get(started.url).content.decode()
    assert "created: northwind  warn 15 min before due · to assignees, leads" in page

    Escalation.objects.filter(org=org).update(webhook_url="https://hooks.example.com/tollgate")
    assert client.post(PAGE, {"org": org.pk, "warn_minutes": "0", "to_leads": "on"}).status_code == 302
    assert settings(org) == (0, False, True, "https://hooks.example.com/tollgate")
    events = list(AuditEvent.objects.order_by("pk"))
    assert [(event.action, event.actor_id) for event in events] == [
        ("escalation.create", lead.pk), ("escalation.update", lead.pk)
    ]  # fmt: skip


def test_it_warns_that_nobody_is_told_while_the_org_has_no_targets(client_for, org, lead):
    client = client_for(lead)
    response = client.post(PAGE, {"org": org.pk, "warn_minutes": "0", "to_leads": "on"})
    assert "has no service-level targets" in client.get(response.url).content.decode()


def test_it_lets_an_org_admin_stop_escalating(client_for, org):
    admin = make_person("olive", org, Role.ORG_ADMIN)
    client = client_for(admin)
    client.post(PAGE, {"org": org.pk, "warn_minutes": "5", "to_leads": "on"})
    assert client.post(reverse("setup_escalation_remove"), {"org": org.pk}).status_code == 302
    assert settings(org) is None
    assert AuditEvent.objects.filter(action="escalation.delete", actor=admin).exists()
    again = client.post(reverse("setup_escalation_remove"), {"org": org.pk})
    assert again.status_code == 409
    assert "no escalation in northwind; nothing removed" in again.content.decode()


@pytest.mark.parametrize(
    ("fields", "field", "says"),
    [
        ({"warn_minutes": "10081", "to_leads": "on"}, "warn_minutes", "warn-minutes must be from 0 to 10080"),
        ({"warn_minutes": "-1", "to_leads": "on"}, "warn_minutes", "warn-minutes must be from 0 to 10080"),
        ({"warn_minutes": "soon", "to_leads": "on"}, "warn_minutes", "Enter a whole number."),
        ({"warn_minutes": "5"}, "escalation", "this escalation would tell nobody"),
    ],
)
def test_it_refuses_a_bad_escalation_at_the_top_and_at_its_field_writing_nothing(
    client_for, org, lead, fields, field, says
):
    response = client_for(lead).post(PAGE, {"org": org.pk, **fields})
    assert response.status_code == 400
    page = response.content.decode()
    top = page[page.index('id="form-errors"') :]
    assert says in top[: top.index("</div>")]
    assert says in page[page.index(f'id="{field}-errors"') :][:400]
    assert settings(org) is None
    assert not AuditEvent.objects.exists()


def test_it_answers_another_orgs_escalation_as_no_org_and_changes_nothing(client_for, org, other_org, lead):
    client = client_for(lead)
    assert client.post(PAGE, {"org": other_org.pk, "warn_minutes": "5", "to_leads": "on"}).status_code == 404
    assert client.post(reverse("setup_escalation_remove"), {"org": other_org.pk}).status_code == 404
    assert settings(other_org) is None

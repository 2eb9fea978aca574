"""Retention settings from the browser: days per kind, or forever (no policy), audited; bad figures refused."""

import pytest

from grading.models import AuditEvent, RetentionPolicy

pytestmark = pytest.mark.django_db


def test_it_sets_changes_and_removes_a_retention_period_audited(client_for, org_admin, org):
    client = client_for(org_admin)
    assert client.post("/org/retention/", {"org": org.pk, "kind": "conversation", "days": "30"}).status_code == 302
    policy = RetentionPolicy.objects.get(org=org, kind="conversation")
    assert (policy.days, policy.updated_by) == (30, org_admin)
    assert not RetentionPolicy.objects.filter(kind="draft").exists()
    page = client.get("/org/retention/").content.decode()
    assert "30 days" in page and "forever" in page and "runs daily" in page

    client.post("/org/retention/", {"org": org.pk, "kind": "conversation", "days": "90"})
    client.post("/org/retention/", {"org": org.pk, "kind": "conversation", "days": "90"})  # no change: no event
    client.post("/org/retention/", {"org": org.pk, "kind": "conversation", "days": ""})
    assert not RetentionPolicy.objects.exists()
    events = AuditEvent.objects.filter(org=org).order_by("pk")
    assert [(event.action, event.detail) for event in events] == [
        ("retention.set", {"kind": "conversation", "days": 30, "was": None}),
        ("retention.set", {"kind": "conversation", "days": 90, "was": 30}),
        ("retention.remove", {"kind": "conversation", "days": None, "was": 90}),
    ]
    assert {event.actor for event in events} == {org_admin}


@pytest.mark.parametrize(
    "fields",
    [{"days": "0"}, {"days": "-3"}, {"days": "36501"}, {"days": "a month"}, {"kind": "review"}, {"kind": ""}],
)
def test_a_bad_retention_is_a_form_error_and_changes_nothing(client_for, org_admin, org, fields):
    RetentionPolicy.objects.create(org=org, kind="draft", days=7, updated_at="2026-01-01T00:00Z")
    response = client_for(org_admin).post("/org/retention/", {"org": org.pk, "kind": "draft", "days": "1"} | fields)
    assert response.status_code == 400
    assert b"Nothing was changed" in response.content
    assert RetentionPolicy.objects.get(org=org).days == 7
    assert not AuditEvent.objects.exists()


def test_another_orgs_retention_cannot_be_set(client_for, org_admin, other_org):
    response = client_for(org_admin).post("/org/retention/", {"org": other_org.pk, "kind": "draft", "days": "1"})
    assert response.status_code == 404
    assert not RetentionPolicy.objects.exists()

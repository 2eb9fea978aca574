"""Rotating the webhook signing secret from the browser: the new secret is shown once, the old one signs beside it
for the overlap chosen (grading/delivery/signing.py; deliveries: tests/grading/delivery/test_signing.py), and the audit
trail says it happened without either secret."""

import json

import pytest
from django.utils import timezone

from grading.models import AuditEvent, Org

pytestmark = pytest.mark.django_db


def test_rotating_shows_the_new_secret_once_and_keeps_the_old_one_for_the_overlap(client_for, org_admin, org):
    old = org.webhook_secret
    client = client_for(org_admin)
    before = timezone.now()
    response = client.post("/org/webhook/", {"org": org.pk, "overlap_hours": "48"})
    assert response.status_code == 200
    org.refresh_from_db()
    assert org.webhook_secret != old and org.webhook_secret in response.content.decode()
    assert org.webhook_secret_previous == old
    hours = (org.webhook_secret_previous_until - before).total_seconds() / 3600
    assert 48 <= hours < 48.1
    page = client.get("/org/webhook/").content.decode()
    assert org.webhook_secret not in page and old not in page
    assert "The previous secret signs too until" in page

    event = AuditEvent.objects.get(action="webhook_secret.rotate")
    assert event.actor == org_admin and event.org == org
    assert event.detail["overlap_hours"] == 48
    assert org.webhook_secret not in json.dumps(event.detail) and old not in json.dumps(event.detail)


def test_no_overlap_ends_the_old_secret_at_once(client_for, org_admin, org):
    assert client_for(org_admin).post("/org/webhook/", {"org": org.pk, "overlap_hours": "0"}).status_code == 200
    org.refresh_from_db()
    assert (org.webhook_secret_previous, org.webhook_secret_previous_until) == ("", None)


@pytest.mark.parametrize("overlap", ["", "-1", "169", "a day", "1.5"])
def test_an_overlap_out_of_bounds_is_a_form_error_and_changes_nothing(client_for, org_admin, org, overlap):
    old = org.webhook_secret
    response = client_for(org_admin).post("/org/webhook/", {"org": org.pk, "overlap_hours": overlap})
    assert response.status_code == 400
    assert b"Nothing was changed" in response.content
    assert Org.objects.get(pk=org.pk).webhook_secret == old
    assert not AuditEvent.objects.exists()


def test_another_orgs_secret_cannot_be_rotated(client_for, org_admin, other_org):
    old = other_org.webhook_secret
    assert client_for(org_admin).post("/org/webhook/", {"org": other_org.pk, "overlap_hours": "1"}).status_code == 404
    assert Org.objects.get(pk=other_org.pk).webhook_secret == old

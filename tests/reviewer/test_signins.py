"""A sign-in is an audit event of every org the person belongs to: each such org reads it on its audit page, in its
CSV and over the API, and no other org does."""

import csv
import io

import pytest
from django.test import Client
from django.urls import reverse

from grading.api.keys import api_key_create
from grading.models import AuditEvent, Org
from reviewer.models import Membership, Role
from tests.builders.people import PASSWORD, make_person

pytestmark = pytest.mark.django_db


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def api_events(org: Org, **query) -> list[dict]:
    key = api_key_create(org=org, name="siem").plaintext
    response = Client().get("/api/v1/audit-events", query, HTTP_AUTHORIZATION=f"Bearer {key}")
    assert response.status_code == 200
    return response.json()["events"]


def test_it_shows_a_password_sign_in_to_each_org_the_person_belongs_to_and_no_other(client, org, other_org, operator):
    Membership.objects.create(user=operator, org=other_org, role=Role.STAKEHOLDER)
    elsewhere = Org.objects.create(name="Initech", slug="initech")
    admin = signed_in(make_person("olga", org, Role.ORG_ADMIN))

    assert client.post(reverse("login"), {"username": "dana", "password": PASSWORD}).status_code == 302

    rows = admin.get(reverse("audit"), {"action": "user.login"}).context["rows"]
    assert [(row.what, row.who, row.details) for row in rows] == [("signed in", "dana", [("by", "password")])]
    exported = list(csv.DictReader(io.StringIO(b"".join(admin.get(reverse("audit_csv")).streaming_content).decode())))
    assert [(row["action"], row["actor"]) for row in exported if row["action"] == "user.login"] == [
        ("user.login", "dana")
    ]
    theirs = api_events(other_org, action="user.login")
    assert [(event["action"], event["actor"], event["detail"]) for event in theirs] == [
        ("user.login", "dana", {"via": "password"})
    ]
    assert api_events(elsewhere, action="user.login") == []
    assert AuditEvent.objects.filter(action="user.login").count() == 2  # one per org


def test_a_person_of_no_org_signing_in_is_still_recorded_for_whoever_runs_tollgate(client, roleless):
    assert client.post(reverse("login"), {"username": "riley", "password": PASSWORD}).status_code == 302

    event = AuditEvent.objects.get(action="user.login")
    assert (event.org, event.actor, event.detail) == (None, roleless, {"via": "password"})

"""The sets API: an org's key builds, lists, reads, runs and deletes its own sets; another org's are not there;
bad input is a 400 naming the field and writes nothing."""

import json

import pytest

from grading.api.keys import api_key_create
from grading.models import AuditEvent, RegressionRun, RegressionSet
from tests.builders.queue_items import conversation_item
from tests.builders.tokens import token_of

pytestmark = pytest.mark.django_db

BODY = {"name": "refunds", "kind": "conversation", "source": "decisions", "ids": ["cv-1"]}


def call(client, key: str, method: str, path: str, body: dict | None = None):
    extra = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
    if body is None:
        return client.generic(method, f"/api/v1{path}", **extra)
    return client.generic(method, f"/api/v1{path}", json.dumps(body), "application/json", **extra)


@pytest.fixture
def keys(org, other_org):
    conversation_item(org, "cv-1")
    return api_key_create(org=org, name="ci").plaintext, api_key_create(org=other_org, name="theirs").plaintext


def test_it_builds_lists_reads_runs_and_deletes_a_set(client, keys):
    mine, _ = keys
    built = call(client, mine, "POST", "/sets", BODY)
    assert built.status_code == 201, built.content
    assert (built.json()["items"], built.json()["skipped"]) == (0, 1)
    assert call(client, mine, "POST", "/sets", BODY).status_code == 200  # a retried build builds nothing twice
    assert [s["name"] for s in call(client, mine, "GET", "/sets").json()] == ["refunds"]
    run = call(client, mine, "POST", "/sets/refunds/runs", {"version": 1, "min_agreement": 0.9})
    assert run.status_code == 202, run.content
    read = call(client, mine, "GET", f"/sets/refunds/runs/{run.json()['id']}").json()
    assert read["state"] == "done" and read["items"] == 0
    assert call(client, mine, "GET", "/sets/refunds").json()["last_run"]["id"] == run.json()["id"]
    assert call(client, mine, "DELETE", "/sets/refunds").status_code == 204
    assert not RegressionSet.objects.exists() and not RegressionRun.objects.exists()


def test_another_orgs_set_is_not_there(client, keys):
    mine, theirs = keys
    call(client, mine, "POST", "/sets", BODY)
    run_id = call(client, mine, "POST", "/sets/refunds/runs", {"version": 1}).json()["id"]
    assert call(client, theirs, "GET", "/sets").json() == []
    assert call(client, theirs, "GET", "/sets/refunds").status_code == 404
    assert call(client, theirs, "GET", f"/sets/refunds/runs/{run_id}").status_code == 404
    assert call(client, theirs, "POST", "/sets/refunds/runs", {"version": 1}).status_code == 404
    call(client, theirs, "DELETE", "/sets/refunds")
    assert RegressionSet.objects.filter(name="refunds").exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({**BODY, "name": "Has Spaces"}, "name"),
        ({**BODY, "ids": ["cv-404"]}, "ids"),
        ({**BODY, "filter": {"since": "2026-W99"}, "ids": None}, "filter.since"),
        ({**BODY, "kind": "poem"}, "kind"),
    ],
)
def test_bad_input_is_a_400_naming_the_field_and_builds_nothing(client, keys, body, field):
    mine, _ = keys
    response = call(client, mine, "POST", "/sets", {k: v for k, v in body.items() if v is not None})
    assert response.status_code == 400
    assert field in [error["field"] for error in response.json()["errors"]]
    assert not RegressionSet.objects.exists()


def test_a_run_under_a_version_the_org_lacks_is_a_400_naming_version(client, keys):
    mine, _ = keys
    call(client, mine, "POST", "/sets", BODY)
    response = call(client, mine, "POST", "/sets/refunds/runs", {"version": 7, "min_agreement": 0.9})
    assert response.status_code == 400 and response.json()["errors"][0]["field"] == "version"
    assert call(client, mine, "POST", "/sets/refunds/runs", {"version": 1, "min_agreement": 2}).status_code == 400
    assert not RegressionRun.objects.exists()


def test_a_criteria_admins_token_builds_runs_and_deletes_a_set_under_their_name(client, org, criteria_admin):
    conversation_item(org, "cv-1")
    token = token_of(criteria_admin, org)
    assert call(client, token, "POST", "/sets", BODY).status_code == 201
    run = call(client, token, "POST", "/sets/refunds/runs", {"version": 1})
    assert run.status_code == 202, run.content
    assert call(client, token, "GET", f"/sets/refunds/runs/{run.json()['id']}").json()["state"] == "done"
    assert RegressionRun.objects.get().started_by == criteria_admin
    assert RegressionSet.objects.get().created_by == criteria_admin
    assert call(client, token, "DELETE", "/sets/refunds").status_code == 204
    events = AuditEvent.objects.filter(action__startswith="set.").order_by("pk")
    assert [(e.action, e.actor, e.api_key) for e in events] == [
        ("set.build", criteria_admin, None), ("set.run", criteria_admin, None), ("set.delete", criteria_admin, None)
    ]  # fmt: skip

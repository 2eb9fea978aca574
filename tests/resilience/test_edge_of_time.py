"""Times, weeks and names at the edges (issue 37, defects 3 and 9): each bad value is a 400 naming the field (a page
says so in words) and changes nothing; none is stored where every later read of it would fail."""

import importlib
import json
from datetime import UTC, date, datetime

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse

from grading.api.keys import api_key_create
from grading.models import Article, AuditEvent
from reviewer.models import Assignment, Pool, Role
from tests.builders.people import make_person
from tests.builders.queue_items import conversation_item

pytestmark = pytest.mark.django_db


@pytest.fixture
def key_client(org) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {api_key_create(org=org, name='pipeline').plaintext}")


@pytest.fixture
def waiting(org):
    """A conversation waiting in the queue, ann (an operator) who can work it, and the billing pool."""
    make_person("ann", org, Role.OPERATOR)
    Pool.objects.create(org=org, name="billing")
    return conversation_item(org, "cv-1")


def put_assignment(client: Client, body: dict):
    return client.put("/api/v1/conversations/cv-1/assignment", json.dumps(body), content_type="application/json")


def fields_named(response) -> list[str]:
    return [problem["field"] for problem in response.json()["errors"]]


# --- defect 3: one assignment that broke the queue for everyone -------------------------------------------------


def test_it_refuses_an_assignment_ending_past_the_year_9999_in_utc_and_the_queue_stays_readable(
    org, waiting, key_client, client_for
):
    lead = make_person("lee", org, Role.LEAD)
    response = put_assignment(key_client, {"person": "ann", "until": "9999-12-31T23:59:59-14:00"})
    assert response.status_code == 400 and fields_named(response) == ["until"]
    assert not Assignment.objects.exists() and not AuditEvent.objects.filter(action__startswith="assignment").exists()
    assert key_client.get("/api/v1/conversations/cv-1/assignment").status_code == 200
    page = client_for(lead)
    assert page.get(reverse("queue")).status_code == 200
    assert page.get(reverse("review_detail", args=[waiting.pk])).status_code == 200


def test_the_migration_repairs_an_assignment_stored_past_the_year_9999_and_it_can_be_read_and_undone(
    org, waiting, key_client, client_for
):
    lead = make_person("lee", org, Role.LEAD)
    assert put_assignment(key_client, {"person": "ann"}).status_code == 200
    with connection.cursor() as cursor:  # what an earlier version let in
        cursor.execute("UPDATE reviewer_assignment SET until = '9999-12-31 23:59:59-14:00'")
    with pytest.raises(Exception, match="year"):
        key_client.get("/api/v1/conversations/cv-1/assignment")
    migration = importlib.import_module("reviewer.migrations.0011_assignment_times")
    with connection.cursor() as cursor:
        cursor.execute(migration.REPAIR_ASSIGNMENT_TIMES)
    assert Assignment.objects.get().until == datetime.max.replace(tzinfo=UTC)
    read = key_client.get("/api/v1/conversations/cv-1/assignment")
    assert read.status_code == 200 and read.json()["to"] == "ann"  # still reserved: its end never comes
    page = client_for(lead)
    assert page.get(reverse("queue")).status_code == 200
    assert page.get(reverse("review_detail", args=[waiting.pk])).status_code == 200
    assert key_client.delete("/api/v1/conversations/cv-1/assignment").json()["to"] is None
    assert not Assignment.objects.exists()


# --- defect 9: 500s on bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"person": "ann\x00"}, "person"),
        ({"person": "\ud800ann"}, "person"),
        ({"pool": "bill\x00ing"}, "pool"),
        ({"pool": "billing\udfff"}, "pool"),
        ({"person": "ann", "until": "2999-01-01T09:00:00"}, "until"),
    ],
)
def test_it_refuses_an_assignment_naming_nul_a_lone_surrogate_or_a_time_without_a_zone(
    waiting, key_client, body, field
):
    response = put_assignment(key_client, body)
    assert response.status_code == 400 and fields_named(response) == [field]
    assert not Assignment.objects.exists()


REFUSED_SCOPES = [("to", "9999-W52"), ("from", "10000-W01"), ("application", "\x00")]


@pytest.mark.parametrize(("field", "value"), REFUSED_SCOPES)
@pytest.mark.parametrize("path", ["/api/v1/dashboard", "/api/v1/queue/service"])
def test_the_figures_over_the_api_refuse_a_week_past_9999_or_a_nul_naming_the_field(key_client, path, field, value):
    response = key_client.get(path, {field: value})
    assert response.status_code == 400 and fields_named(response) == [f"query.{field}"]


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("to", "9999-W52", "is not an ISO week from 0001-W01 to 9999-W51"),
        ("application", "\x00", "contains a NUL character"),
    ],
)
@pytest.mark.parametrize("page", ["dashboard", "dashboard_reviews", "dashboard_export"])
def test_the_dashboard_pages_say_which_filter_they_cannot_read(client_for, stakeholder, page, field, value, said):
    response = client_for(stakeholder).get(reverse(page), {field: value})
    assert response.status_code == 400
    assert f"<b>{field}</b>: " in response.content.decode() and said in response.content.decode()


@pytest.mark.parametrize("field", ["reason", "finding"])
def test_the_lists_behind_the_numbers_refuse_a_nul_in_a_code_they_filter_by(client_for, stakeholder, field):
    response = client_for(stakeholder).get(reverse("dashboard_reviews"), {field: "band\x00"})
    assert response.status_code == 400 and f"<b>{field}</b>: contains a NUL character" in response.content.decode()


@pytest.mark.parametrize("path", ["/api/v1/dashboard", "/api/v1/queue/service"])
def test_the_figures_up_to_the_first_week_there_is_start_at_it(key_client, path):
    """The default range is the eight weeks up to `to`: up to 0001-W01, the one week there is."""
    answer = key_client.get(path, {"to": "0001-W01"})
    assert answer.status_code == 200 and (answer.json()["from"], answer.json()["to"]) == ("0001-W01", "0001-W01")


def test_the_dashboard_page_up_to_the_first_week_there_is_shows_it(client_for, stakeholder):
    response = client_for(stakeholder).get(reverse("dashboard"), {"to": "0001-W01"})
    assert response.status_code == 200 and response.context["scope"].weeks == [date(1, 1, 1)]


@pytest.fixture
def org_admin_client(org, client_for) -> Client:
    return client_for(make_person("olga", org, Role.ORG_ADMIN))


def test_the_audit_page_and_its_csv_refuse_a_day_past_the_last_one_they_can_read(org_admin_client):
    page = org_admin_client.get(reverse("audit"), {"until": "9999-12-31"})
    assert page.status_code == 400
    said = "<b>until</b>: must be within the years 1 to 9999 in UTC (its last day is 9999-12-30)"
    assert said in page.content.decode()
    csv = org_admin_client.get(reverse("audit_csv"), {"until": "9999-12-31"})
    assert csv.status_code == 400 and csv.content.decode().startswith("until: must be within the years 1 to 9999")
    assert org_admin_client.get(reverse("audit"), {"until": "9999-12-30", "since": "0001-01-01"}).status_code == 200


def test_the_audit_api_refuses_a_day_past_the_last_one_it_can_read(key_client):
    response = key_client.get("/api/v1/audit-events", {"until": "9999-12-31"})
    assert response.status_code == 400 and fields_named(response) == ["query.until"]


def test_it_refuses_an_article_whose_title_is_only_whitespace_naming_the_field(key_client):
    response = key_client.post(
        "/api/v1/articles", json.dumps({"slug": "a", "title": " "}), content_type="application/json"
    )
    assert response.status_code == 400 and fields_named(response) == ["title"]
    assert not Article.objects.exists()

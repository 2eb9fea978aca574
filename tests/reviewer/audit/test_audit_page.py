"""The audit page: an org admin reads their org's events (and nobody else does), filtered by person, key, action,
object, item and time, newest first, paged by keyset so no event is skipped or repeated, even among events of the
same instant and while new ones are written; the CSV export holds the same events, safe to open in a spreadsheet."""

import csv
import io
import json
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qsl, urlsplit

import pytest
from django.urls import reverse
from django.utils import timezone

from grading.api.keys import api_key_create
from grading.models import AuditEvent
from grading.models.audit import audit_record
from reviewer.models import Membership, Role
from reviewer.queue.services import claim_decline, claim_take
from tests.builders.audit_events import events_at
from tests.builders.people import make_person
from tests.builders.queue_items import draft_item

pytestmark = pytest.mark.django_db

NOON = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def org_admin(org):
    return make_person("olga", org, Role.ORG_ADMIN)


def page(client, **query):
    response = client.get(reverse("audit"), query)
    return response, [row.event.pk for row in response.context["rows"]] if response.status_code == 200 else []


def csv_rows(client, **query) -> list[dict]:
    response = client.get(reverse("audit_csv"), query)
    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))


def test_an_org_admin_reads_what_happened_in_the_org_newest_first_with_people_and_keys_named(
    client_for, org, org_admin, operator
):
    review = draft_item(org)
    claim_take(user=operator, review_id=review.pk)
    claim_decline(user=operator, review_id=review.pk, reason="<b>not my area</b>")
    key = api_key_create(org=org, name="billing pipeline", created_by=org_admin)

    response, shown = page(client_for(org_admin))
    assert response.status_code == 200
    newest = list(AuditEvent.objects.filter(org=org).order_by("-at", "-pk").values_list("pk", flat=True))
    assert shown == newest
    whats = [(row.what, row.who) for row in response.context["rows"]]
    assert whats == [("API key created", "olga"), ("declined", "dana"), ("claimed", "dana")]
    html = response.content.decode()
    assert "&lt;b&gt;not my area&lt;/b&gt;" in html and "<b>not my area</b>" not in html  # details are text
    decline = response.context["rows"][1]
    assert decline.item == f"draft {review.draft.external_id} (#{review.draft_id})"
    assert f"item_kind=draft&amp;item_id={review.draft_id}" in html
    assert key.api_key.prefix in html  # the key filter names the org's keys


def test_only_org_admins_may_look_and_only_at_their_own_orgs(client, client_for, org, other_org, org_admin, operator):
    audit_record(action="secret.thing", org=other_org, detail={"where": "globex"})
    assert client.get(reverse("audit")).status_code == 302  # to sign in
    assert client_for(operator).get(reverse("audit")).status_code == 403
    admin = client_for(org_admin)
    response, shown = page(admin)
    assert shown == [] and b"globex" not in response.content
    assert admin.get(reverse("audit"), {"org": other_org.slug}).status_code == 404
    assert admin.get(reverse("audit_csv"), {"org": other_org.slug}).status_code == 404
    assert csv_rows(admin) == []


def test_an_admin_of_two_orgs_chooses_which_one_they_read(client_for, org, other_org, org_admin):
    Membership.objects.create(user=org_admin, org=other_org, role=Role.ORG_ADMIN)
    audit_record(action="at.globex", org=other_org)
    audit_record(action="at.northwind", org=org)
    admin = client_for(org_admin)
    assert [row.event.action for row in page(admin, org=other_org.slug)[0].context["rows"]] == ["at.globex"]
    assert [row.event.action for row in page(admin, org=org.slug)[0].context["rows"]] == ["at.northwind"]


def test_each_filter_keeps_only_its_events(client_for, org, org_admin, operator):
    review = draft_item(org)
    other = draft_item(org, "another-draft")
    key = api_key_create(org=org, name="writer").api_key
    by_dana = audit_record(action="claim.create", org=org, actor=operator, target=review, item=review)
    declined = audit_record(action="claim.decline", org=org, actor=operator, item=other)
    by_key = audit_record(action="label.create", org=org, api_key=key, item=review.draft)
    long_ago = audit_record(action="claim.create", org=org, actor=org_admin)
    month_ago = timezone.now() - timedelta(days=30)
    AuditEvent.objects.filter(pk=long_ago.pk).update(at=month_ago)
    admin = client_for(org_admin)

    def kept(**query) -> set[int]:
        response, shown = page(admin, **query)
        assert response.status_code == 200, response.content
        return set(shown) & {by_dana.pk, declined.pk, by_key.pk, long_ago.pk}

    assert kept(actor="dana") == {by_dana.pk, declined.pk}
    assert kept(api_key=str(key.pk)) == {by_key.pk}
    assert kept(action="claim") == {by_dana.pk, declined.pk, long_ago.pk}  # a family: every claim.*
    assert kept(action="claim.decline") == {declined.pk}
    assert kept(action="clai") == set()  # a family is a whole name, not any prefix
    assert kept(object_type="grading.review", object_id=str(review.pk)) == {by_dana.pk}
    assert kept(item_kind="draft", item_id=str(review.draft_id)) == {by_dana.pk, by_key.pk}
    assert kept(until=month_ago.date().isoformat()) == {long_ago.pk}  # a date: through that whole day
    assert kept(since=(month_ago + timedelta(days=1)).isoformat()) == {by_dana.pk, declined.pk, by_key.pk}
    assert kept(since=month_ago.isoformat()) == {by_dana.pk, declined.pk, by_key.pk, long_ago.pk}  # inclusive
    assert kept(actor="dana", action="claim.create", item_kind="draft", item_id=str(review.draft_id)) == {by_dana.pk}


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"item_id": "12x", "item_kind": "draft"}, "item_id"),
        ({"item_id": "12"}, "item_kind"),
        ({"item_kind": "tweet", "item_id": "1"}, "item_kind"),
        ({"api_key": "-1"}, "api_key"),
        ({"since": "last tuesday"}, "since"),
        ({"since": "2026-02-30"}, "since"),
        ({"since": "2026-12-02", "until": "2026-12-01"}, "until"),
        ({"actor": "ann\x00"}, "actor"),
        ({"action": "a" * 65}, "action"),
        ({"before": "yesterday"}, "before"),
        ({"before": "9999999999999999999.1"}, "before"),
    ],
)
def test_a_filter_that_cannot_be_read_is_a_400_naming_it(client_for, org, org_admin, query, field):
    audit_record(action="claim.create", org=org)
    response = client_for(org_admin).get(reverse("audit"), query)
    assert response.status_code == 400
    assert response.context["error"].field == field
    assert b'id="audit-events"' not in response.content
    if field != "before":
        assert client_for(org_admin).get(reverse("audit_csv"), query).status_code == 400


def test_older_pages_skip_and_repeat_nothing_across_equal_times_and_while_events_are_written(
    client_for, org, org_admin
):
    # Three instants, 45 events each, the newest instant made first (its ids the lowest): every page boundary falls
    # inside a tie, and the order by time is not the order of the ids.
    instants = [events_at(org, NOON + timedelta(minutes=minutes), 45) for minutes in (2, 1, 0)]
    admin = client_for(org_admin)
    seen: list[int] = []
    response, shown = page(admin)
    while True:
        seen += shown
        audit_record(action="written.meanwhile", org=org)  # newer than every page: never shifts the older ones
        older = response.context["older_url"]
        if not older:
            break
        response, shown = page(admin, **dict(parse_qsl(urlsplit(older).query)))
        assert response.status_code == 200
    assert seen == [pk for made in instants for pk in sorted((event.pk for event in made), reverse=True)]
    assert len(set(seen)) == len(seen) == 135


def test_the_csv_holds_the_filtered_events_and_no_cell_runs_as_a_formula(client_for, org, org_admin):
    hostile = make_person('=HYPERLINK("http://evil")', org, Role.OPERATOR)
    review = draft_item(org)
    audit_record(
        action="claim.decline", org=org, actor=hostile, target=review, item=review, detail={"reason": "+1-2@x"}
    )
    audit_record(action="other.thing", org=org, detail={"n": "-5"})
    rows = csv_rows(client_for(org_admin), action="claim")
    assert len(rows) == 1
    (row,) = rows
    assert row["actor"] == '\'=HYPERLINK("http://evil")'
    assert row["action"] == "claim.decline" and row["item_kind"] == "draft" and row["item_id"] == str(review.draft_id)
    assert row["object_type"] == "grading.review" and row["object_id"] == str(review.pk)
    assert json.loads(row["detail"]) == {"reason": "+1-2@x"}
    everything = csv_rows(client_for(org_admin))
    assert [r["action"] for r in everything] == ["other.thing", "claim.decline"]  # newest first, as the page
    for cells in everything:
        assert not any(value.startswith(("=", "+", "-", "@", "\t", "\r")) for value in cells.values())


def test_the_page_reads_in_words_and_its_filters_are_choices_not_codes(client_for, org, org_admin, operator):
    review = draft_item(org)
    claim_take(user=operator, review_id=review.pk)
    claim_decline(user=operator, review_id=review.pk, reason="not my area")
    client = client_for(org_admin)
    response, shown = page(client, action="claim")  # a family: every claim event
    assert {row.what for row in response.context["rows"]} == {"claimed", "declined"}
    html = response.content.decode()
    assert '<option value="claim" selected>any claim event</option>' in html
    assert '<option value="claim.decline">declined (claim.decline)</option>' in html
    assert '<option value="grading.criteriaversion">criteria version</option>' in html
    assert '<input name="action"' not in html and '<input name="object_type"' not in html
    assert "claim <span" in html.split('id="audit-events"')[1]  # the object in words, its id beside it

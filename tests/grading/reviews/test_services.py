"""The record's writer tells a draft's pipeline of a person's verdict: every decision is written in one place
(grading/reviews/services.py), whoever writes it (one person's, the answers' when they agree, an adjudication), so
the webhook is sent from there, after the decision commits."""

import pytest
from django.utils import timezone

from grading.delivery import enqueue
from grading.models import ItemKind
from grading.reviews.services import NotWaiting, PersonVerdict, answer_record, decision_record
from reviewer.models import Role
from tests.builders.people import make_person
from tests.builders.queue_items import conversation_item, draft_item, slots_ask

pytestmark = pytest.mark.django_db
HOOK = "https://pipeline.example/hook"


@pytest.fixture
def told(monkeypatch) -> list[dict]:
    """The webhook deliveries sent to the workers (grading/delivery/enqueue.py), in order."""
    sent: list[dict] = []
    monkeypatch.setattr(enqueue, "webhook_delivery", lambda **delivery: sent.append(delivery))
    return sent


def test_answers_that_agree_on_a_draft_tell_its_pipeline_once_the_verdict_is_committed(
    org, told, django_capture_on_commit_callbacks
):
    slots_ask(org, ItemKind.DRAFT, 2)
    review = draft_item(org, callback_url=HOOK)
    ann, bob = (make_person(name, org, Role.OPERATOR) for name in ("ann", "bob"))
    with django_capture_on_commit_callbacks(execute=True):
        answer_record(
            review_id=review.pk, person=ann, answered_at=timezone.now(), verdict=PersonVerdict(outcome="approve")
        )
    assert told == []  # one answer of two is no verdict: nothing to tell yet
    with django_capture_on_commit_callbacks(execute=True):
        answered = answer_record(
            review_id=review.pk, person=bob, answered_at=timezone.now(), verdict=PersonVerdict(outcome="approve")
        )
        assert answered.decision.basis == "agreed" and told == []  # nothing leaves before the commit
    assert told == [{"review_id": review.pk, "event": enqueue.HUMAN_DECISION}]


def test_a_decision_written_by_any_caller_tells_the_pipeline_once(
    org, operator, told, django_capture_on_commit_callbacks
):
    review = draft_item(org, callback_url=HOOK)
    with django_capture_on_commit_callbacks(execute=True):
        decision_record(
            review_id=review.pk,
            decided_by=operator,
            decided_at=timezone.now(),
            verdict=PersonVerdict(outcome="approve"),
        )
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(NotWaiting):
        again = PersonVerdict(outcome="reject", note="A second decision is refused, and tells nobody.")
        decision_record(review_id=review.pk, decided_by=operator, decided_at=timezone.now(), verdict=again)
    assert told == [{"review_id": review.pk, "event": enqueue.HUMAN_DECISION}]


def test_nobody_is_told_of_a_decision_on_a_draft_without_a_callback_url_or_on_a_conversation(
    org, operator, told, django_capture_on_commit_callbacks
):
    checks = {"grounded": "pass", "complete": "pass", "usable": "pass"}
    with django_capture_on_commit_callbacks(execute=True):
        for review, verdict in ((draft_item(org), PersonVerdict(outcome="approve")),
                                (conversation_item(org), PersonVerdict(checks=checks, note="Supported."))):  # fmt: skip
            decision_record(review_id=review.pk, decided_by=operator, decided_at=timezone.now(), verdict=verdict)
    assert told == []

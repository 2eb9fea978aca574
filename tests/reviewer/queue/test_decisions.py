"""Decisions: bound to the review they were made on, accepted only from the lease holder while that review counts."""

import threading
from datetime import timedelta

import pytest
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from grading.models import AuditEvent, Decision, MemoryItem, Review
from grading.reviews.services import PersonVerdict
from reviewer.models import Claim, Role
from reviewer.queue.display import queue_page
from reviewer.queue.services import Refused, claim_take, decision_create
from tests.builders.people import make_person
from tests.builders.queue_items import continue_conversation, conversation_item, draft_item, resubmit

HTMX_ACTIONS = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "actions"}


def decide_url(review: Review) -> str:
    return reverse("review_decide", args=[review.pk])


def held_by(user, review: Review, *, minutes_ago: int = 0) -> Claim:
    now = timezone.now() - timedelta(minutes=minutes_ago)
    return claim_take(user=user, review_id=review.pk, now=now)


def assert_nothing_written(claim: Claim) -> None:
    assert not Decision.objects.exists()
    assert not AuditEvent.objects.filter(action="decision.create").exists()
    before = (claim.ended_at, claim.end, claim.expires_at)
    claim.refresh_from_db()
    assert (claim.ended_at, claim.end, claim.expires_at) == before


def test_the_holder_approves_a_draft_and_it_leaves_the_queue(client_for, operator, org):
    review = draft_item(org)
    claim = held_by(operator, review)
    client = client_for(operator)
    response = client.post(decide_url(review), {"outcome": "approve", "fingerprint": review.fingerprint})
    assert response.status_code == 302 and response["Location"] == reverse("queue")
    decision = Decision.objects.get()
    assert (decision.review, decision.outcome, decision.decided_by) == (review, "approve", operator)
    assert Review.objects.get(pk=review.pk).state == "decided"
    claim.refresh_from_db()
    assert claim.end == Claim.End.DECIDED
    event = AuditEvent.objects.get(action="decision.create")
    assert event.detail["outcome"] == "approve" and event.detail["fingerprint"] == review.fingerprint
    assert event.detail["claim"] == claim.pk
    html = client.get(reverse("queue")).content.decode()
    assert "Decided: approve" in html and review.draft.slug not in html.split('id="queue-list"')[1]


def test_deciding_and_claiming_the_next_item_reads_the_persons_memberships_once(client_for, operator, org):
    review = draft_item(org, "decided-first")
    draft_item(org, "claimed-next")
    held_by(operator, review)
    client = client_for(operator)
    with CaptureQueriesContext(connection) as queries:
        response = client.post(decide_url(review), {"outcome": "approve", "fingerprint": review.fingerprint})
    assert response.status_code == 302 and response["Location"] != reverse("queue")
    assert sum('FROM "reviewer_membership"' in query["sql"] for query in queries.captured_queries) == 1


def test_rejecting_or_sending_back_needs_a_note(client_for, operator, org):
    review = draft_item(org)
    claim = held_by(operator, review)
    for outcome in ("reject", "send_back"):
        response = client_for(operator).post(
            decide_url(review), {"outcome": outcome, "fingerprint": review.fingerprint}, **HTMX_ACTIONS
        )
        assert response.status_code == 422
        assert "A note is required to" in response.content.decode()
    assert_nothing_written(claim)


def test_sending_back_with_a_note_kept_as_an_org_learning(client_for, operator, org):
    review = draft_item(org)
    held_by(operator, review)
    note = "Lead with the customer's numbers, not ours."
    response = client_for(operator).post(
        decide_url(review),
        {"outcome": "send_back", "fingerprint": review.fingerprint, "note": note, "keep_as_learning": "on"},
    )
    assert response.status_code == 302
    decision = Decision.objects.get()
    assert decision.outcome == "send_back" and decision.note == note
    learning = MemoryItem.objects.get(source=MemoryItem.Source.OPERATOR_DECISION)
    assert (learning.org, learning.kind, learning.text) == (org, "learning", note)
    assert decision.learning == learning


def test_a_conversation_gets_a_human_verdict_per_check_with_a_note(client_for, operator, org):
    review = conversation_item(org)
    held_by(operator, review)
    data = {"grounded": "pass", "complete": "fail", "usable": "pass", "note": "The refund amount is never confirmed."}
    response = client_for(operator).post(decide_url(review), data | {"fingerprint": review.fingerprint})
    assert response.status_code == 302
    decision = Decision.objects.get()
    assert decision.checks == {"grounded": "pass", "complete": "fail", "usable": "pass"}
    assert decision.outcome == "fail" and decision.review.kind == "conversation"


def test_a_conversation_verdict_without_a_note_is_refused(client_for, operator, org):
    review = conversation_item(org)
    claim = held_by(operator, review)
    data = {"grounded": "pass", "complete": "pass", "usable": "pass", "fingerprint": review.fingerprint}
    assert client_for(operator).post(decide_url(review), data).status_code == 422
    assert_nothing_written(claim)


def test_a_decision_after_the_lease_expired_is_refused(client_for, operator, org):
    review = draft_item(org)
    claim = held_by(operator, review, minutes_ago=16)
    response = client_for(operator).post(
        decide_url(review), {"outcome": "approve", "fingerprint": review.fingerprint}, **HTMX_ACTIONS
    )
    assert response.status_code == 409
    assert "Your lease expired" in response.content.decode()
    assert_nothing_written(claim)


def test_a_decision_by_someone_who_does_not_hold_the_item_is_refused(client_for, operator, org):
    review = draft_item(org)
    claim = held_by(make_person("sam-op", org, Role.OPERATOR), review)
    response = client_for(operator).post(decide_url(review), {"outcome": "approve", "fingerprint": review.fingerprint})
    assert response.status_code == 409
    assert "Taken by someone else: sam-op holds this item" in response.content.decode()
    assert_nothing_written(claim)


def test_a_decision_on_an_unclaimed_item_is_refused(operator, org):
    review = draft_item(org)
    with pytest.raises(Refused, match="claim it first"):
        decision_create(
            user=operator, review_id=review.pk, fingerprint=review.fingerprint, verdict=PersonVerdict(outcome="approve")
        )
    assert not Decision.objects.exists()


def test_a_decision_after_the_draft_changed_is_refused_and_says_why(client_for, operator, org):
    review = draft_item(org)
    claim = held_by(operator, review)
    resubmit(review)
    response = client_for(operator).post(decide_url(review), {"outcome": "approve", "fingerprint": review.fingerprint})
    assert response.status_code == 409
    html = response.content.decode()
    assert "The item changed since you opened it" in html and "resubmitted the draft" in html
    assert_nothing_written(claim)


def test_a_decision_after_the_conversation_changed_is_refused(client_for, operator, org):
    review = conversation_item(org)
    claim = held_by(operator, review)
    continue_conversation(review)
    data = {"grounded": "pass", "complete": "pass", "usable": "pass", "note": "fine"}
    response = client_for(operator).post(decide_url(review), data | {"fingerprint": review.fingerprint})
    assert response.status_code == 409 and "The conversation changed" in response.content.decode()
    assert_nothing_written(claim)


def test_a_decision_made_on_other_evidence_than_the_review_is_refused(operator, org):
    review = draft_item(org)
    claim = held_by(operator, review)
    with pytest.raises(Refused, match="changed since you opened it"):
        decision_create(
            user=operator, review_id=review.pk, fingerprint="fp1:other", verdict=PersonVerdict(outcome="approve")
        )
    assert_nothing_written(claim)


def test_deciding_twice_is_refused(operator, org):
    review = draft_item(org)
    held_by(operator, review)
    decide = {"user": operator, "review_id": review.pk, "fingerprint": review.fingerprint}
    decision_create(**decide, verdict=PersonVerdict(outcome="approve"))
    with pytest.raises(Refused, match="already decided"):
        decision_create(**decide, verdict=PersonVerdict(outcome="reject", note="changed my mind"))
    assert Decision.objects.get().outcome == "approve"


@pytest.mark.django_db(transaction=True)
def test_two_decisions_racing_on_one_item_exactly_one_wins(operator, org):
    review = draft_item(org)
    held_by(operator, review)
    start = threading.Barrier(2)
    results: list[str] = []

    def decide(outcome: str) -> None:
        try:
            start.wait()
            verdict = PersonVerdict(outcome=outcome, note="racing")
            decision_create(user=operator, review_id=review.pk, fingerprint=review.fingerprint, verdict=verdict)
            results.append("won")
        except Refused as refusal:
            results.append(refusal.code)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=decide, args=(outcome,)) for outcome in ("approve", "reject")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(results) == ["decided", "won"]
    assert Decision.objects.count() == 1
    assert AuditEvent.objects.filter(action="decision.create").count() == 1


def test_a_draft_decision_tells_the_pipeline_after_commit(
    operator, org, monkeypatch, django_capture_on_commit_callbacks
):
    from grading.delivery import enqueue

    sent = []
    monkeypatch.setattr(enqueue, "webhook_delivery", lambda **kwargs: sent.append(kwargs))
    review = draft_item(org, callback_url="https://pipeline.example/hook")
    held_by(operator, review)
    with django_capture_on_commit_callbacks(execute=True):
        decision_create(
            user=operator, review_id=review.pk, fingerprint=review.fingerprint, verdict=PersonVerdict(outcome="approve")
        )
        assert sent == []  # nothing leaves before the decision is committed
    assert sent == [{"review_id": review.pk, "event": enqueue.HUMAN_DECISION}]


def test_decided_items_leave_the_queue_and_never_hide_a_waiting_one(operator, org):
    old = [draft_item(org, f"old-{n}", minutes_ago=60 - n) for n in range(3)]
    waiting = draft_item(org, "waiting", minutes_ago=30)
    recent = draft_item(org, "recent", minutes_ago=1)
    for review in (old[0], old[1], recent):
        held_by(operator, review)
        decision_create(
            user=operator, review_id=review.pk, fingerprint=review.fingerprint, verdict=PersonVerdict(outcome="approve")
        )
    assert [row.review_id for row in queue_page(user=operator).rows] == [old[2].pk, waiting.pk]

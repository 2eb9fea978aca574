"""What "still counts" means for both kinds of queue item: a resubmitted draft, a conversation the user came back
to and superseded criteria stop an item counting; only reviews routed to humans are queued."""

from datetime import timedelta

import pytest
from django.utils import timezone

from grading.models import ItemKind, Review, Route
from grading.reviews.services import ReviewOutcome, ScoreIdentity, review_record
from grading.reviews.versions import criteria_active, criteria_new_version, criteria_publish
from reviewer.queue.display import stale_reason
from tests.builders.queue_items import DRAFT_BODY, JUDGE, continue_conversation, conversation_item, draft_item, resubmit

# --- what "still counts" means ----------------------------------------------------------------------------------


def still_counts(review: Review) -> bool:
    return Review.objects.counting().filter(pk=review.pk).exists()


def shown(review: Review) -> Review:
    """The review as an item page loads it: with its item, criteria and state."""
    return Review.objects.with_state().select_related("criteria_version", "draft", "conversation").get(pk=review.pk)


def test_it_counts_a_fresh_review_of_either_kind(org):
    draft, conversation = draft_item(org), conversation_item(org)
    assert still_counts(draft) and still_counts(conversation)
    assert set(Review.objects.counting().values_list("pk", flat=True)) == {draft.pk, conversation.pk}
    assert set(Review.objects.waiting().values_list("pk", flat=True)) == {draft.pk, conversation.pk}


def test_it_stops_counting_a_draft_review_when_the_draft_is_resubmitted(org):
    review = draft_item(org)
    resubmit(review)
    assert not still_counts(review)
    assert shown(review).state_now == "stale"
    assert "resubmitted" in stale_reason(shown(review))
    assert not Review.objects.waiting().exists()


def test_it_counts_again_when_the_draft_comes_back_to_the_content_it_read(org):
    review = draft_item(org)
    resubmit(review)
    resubmit(review, body=DRAFT_BODY)
    assert still_counts(review) and shown(review).state_now == "waiting"


def test_it_stops_counting_a_conversation_review_when_the_user_comes_back(org):
    review = conversation_item(org)
    continue_conversation(review)
    assert not still_counts(review)
    assert "conversation changed" in stale_reason(shown(review))


def test_it_stops_counting_reviews_under_superseded_criteria(org, criteria_admin):
    review = draft_item(org)
    criteria_publish(version=criteria_new_version(org=org, kind=ItemKind.DRAFT), actor=criteria_admin)
    assert not still_counts(review)
    assert shown(review).state_now == "stale"
    assert "criteria version was published" in stale_reason(shown(review))


@pytest.mark.parametrize("route", [Route.PASS, Route.FAIL, Route.NOT_SCORABLE, Route.ERROR, Route.HUMAN])
def test_only_reviews_routed_to_humans_are_queued(org, route):
    draft = draft_item(org).draft
    identity = ScoreIdentity(
        fingerprint=draft.fingerprint,
        criteria_version=criteria_active(org=org, kind=ItemKind.DRAFT),
        judge=JUDGE,
        judge_key="another-judge",
        memory_snapshot="",
    )
    outcome = ReviewOutcome(route=route, reason="band")
    review = review_record(subject=draft, identity=identity, outcome=outcome, started_at=timezone.now())
    assert review.state == ("waiting" if route == Route.HUMAN else "current")
    assert list(Review.objects.waiting()) == ([review] if route == Route.HUMAN else [])


def test_the_item_page_says_a_conversation_waits_for_a_calls_messages_and_when_that_is_overdue(
    client, org, operator, settings
):
    review = conversation_item(org)
    conversation = review.conversation
    client.force_login(operator)
    assert b'id="content-awaited"' not in client.get(f"/queue/items/{review.pk}/").content

    settings.OTLP_CONTENT_WAIT_MINUTES = 10
    conversation.content_awaited_since = timezone.now() - timedelta(minutes=3)
    conversation.save(update_fields=["content_awaited_since"])
    page = client.get(f"/queue/items/{review.pk}/").content.decode()
    assert "sent as OTLP log records, have been awaited since" in page and "graded once they come" in page

    conversation.content_awaited_since = timezone.now() - timedelta(minutes=11)
    conversation.save(update_fields=["content_awaited_since"])
    page = client.get(f"/queue/items/{review.pk}/").content.decode()
    assert "longer than OTLP_CONTENT_WAIT_MINUTES (10): they may never come" in page

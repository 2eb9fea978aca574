"""Celery tasks: thin, take ids, call one service. Judge retries live in the judge client.

The grading tasks store no result: nothing reads one (the review is the result, in the database), and storing
it cost a Redis write per review and a result subscription per task in the process that sent it. A caller that
wants to wait on one asks for it: `apply_async(..., ignore_result=False)`.
"""

from celery import shared_task
from django.conf import settings

from grading import enqueue, gate, planner, reviews, webhooks
from grading.models import Conversation, Draft, GradingRun, Review


@shared_task(name=enqueue.GRADE_CONVERSATION, ignore_result=True)
def grade_conversation(conversation_id: int) -> int | None:
    review = reviews.conversation_grade(conversation_id=conversation_id)
    Conversation.objects.filter(pk=conversation_id).update(queued_at=None)
    return review.pk if review else None


@shared_task(name=enqueue.GRADING_PASS)
def grading_pass() -> int:
    return len(planner.grading_pass(trigger=GradingRun.Trigger.BEAT).enqueued_ids)


@shared_task(name=enqueue.GRADE_DRAFT, ignore_result=True)
def grade_draft(draft_id: int) -> int | None:
    review = gate.draft_grade(draft_id=draft_id)
    Draft.objects.filter(pk=draft_id).update(queued_at=None)
    return review.pk if review else None


@shared_task(name=enqueue.DELIVER_WEBHOOK, bind=True, max_retries=None)
def deliver_webhook(self, review_id: int, event: str, attempt: int = 1) -> bool:
    """One try per run, on the `webhooks` queue; a try that may succeed later is retried up to WEBHOOK_MAX_ATTEMPTS."""
    review = Review.objects.select_related("draft__org").filter(pk=review_id).first()
    if review is None or review.draft is None or not review.draft.callback_url:
        return False
    tried = webhooks.webhook_deliver(review=review, event=event, attempt=attempt)
    if tried.retry_in is None or attempt >= settings.WEBHOOK_MAX_ATTEMPTS:
        return tried.delivery.delivered
    raise self.retry(args=(review_id, event, attempt + 1), countdown=tried.retry_in)

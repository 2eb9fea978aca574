"""Celery tasks: thin, take ids, call one service. Judge retries live in the judge client."""

from celery import shared_task

from grading import planner, reviews
from grading.models import Conversation, GradingRun


@shared_task(name="grading.tasks.grade_conversation")
def grade_conversation(conversation_id: int) -> int | None:
    review = reviews.conversation_grade(conversation_id=conversation_id)
    Conversation.objects.filter(pk=conversation_id).update(queued_at=None)
    return review.pk if review else None


@shared_task(name="grading.tasks.grading_pass")
def grading_pass() -> int:
    return len(planner.grading_pass(trigger=GradingRun.Trigger.BEAT).enqueued_ids)

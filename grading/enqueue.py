"""Handing work to the workers. Tasks are sent by name, so the modules that decide what to send (the services,
the planner, webhooks) never import the task module that calls back into them. Call these after commit
(`transaction.on_commit`), so a worker never reads rows that are not there yet."""

from collections.abc import Iterable

from celery import current_app

GRADE_CONVERSATION = "grading.tasks.grade_conversation"
GRADE_DRAFT = "grading.tasks.grade_draft"
GRADING_PASS = "grading.tasks.grading_pass"  # noqa: S105 - a task name
DELIVER_WEBHOOK = "grading.tasks.deliver_webhook"


def grading_of_conversations(conversation_ids: Iterable[int]) -> None:
    for conversation_id in conversation_ids:
        current_app.send_task(GRADE_CONVERSATION, args=[conversation_id])


def grading_of_drafts(draft_ids: Iterable[int]) -> None:
    for draft_id in draft_ids:
        current_app.send_task(GRADE_DRAFT, args=[draft_id])


def webhook_delivery(*, review_id: int, event: str) -> None:
    current_app.send_task(DELIVER_WEBHOOK, args=[review_id, event])

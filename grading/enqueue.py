"""Handing work to the workers. Tasks are named here and looked up by name, so the modules that decide what to
send (the services, the planner, webhooks, the evaluation export) never import the task modules that call back
into them. A signature by name behaves as `task.delay` would (routing, eager mode). Call these after commit
(`transaction.on_commit`), so a worker never reads rows that are not there yet."""

from collections.abc import Iterable

from celery import current_app

GRADE_CONVERSATION = "grading.tasks.grade_conversation"
GRADE_DRAFT = "grading.tasks.grade_draft"
GRADE_CRITERIA_TRIAL = "grading.tasks.grade_criteria_trial_item"  # on the judge queue, as grade_* are
GRADING_PASS = "grading.tasks.grading_pass"  # noqa: S105 - a task name
DELIVER_WEBHOOK = "grading.tasks.deliver_webhook"
EXPORT_EVALUATIONS = "grading.otlp.tasks.export_evaluations"
REBUILD_ROLLUPS = "grading.tasks.rebuild_rollups"


def grading_of_conversations(conversation_ids: Iterable[int]) -> None:
    for conversation_id in conversation_ids:
        _send(GRADE_CONVERSATION, conversation_id)


def grading_of_drafts(draft_ids: Iterable[int]) -> None:
    for draft_id in draft_ids:
        _send(GRADE_DRAFT, draft_id)


def criteria_trial(*, trial_id: int, items: int) -> None:
    for index in range(items):
        _send(GRADE_CRITERIA_TRIAL, trial_id, index)


def webhook_delivery(*, review_id: int, event: str) -> None:
    _send(DELIVER_WEBHOOK, review_id, event)


def evaluations_export(*, review_id: int, event: str) -> None:
    _send(EXPORT_EVALUATIONS, review_id, event)


def rollups_rebuild(org_ids: Iterable[int]) -> None:
    for org_id in org_ids:
        _send(REBUILD_ROLLUPS, org_id)


def _send(name: str, *args: object) -> None:
    current_app.signature(name, args=args).apply_async()

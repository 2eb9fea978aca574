"""Celery tasks: thin, take ids, call one service. Judge retries live in the judge client.

A grading task grades a few items of one kind, one after another (a grading pass sends them in batches of
GRADING_BATCH_SIZE, so Celery's cost per task is shared; a submitted draft goes alone). It holds its items'
grading locks while it works (grading/reviews/inflight.py) and is retried when the database fails under it (a dropped
connection, a failover): each review is written in one transaction, so a retry starts from nothing half-written,
and finds the reviews whose write did commit.
"""

import gc
import logging

from celery import shared_task
from celery.signals import worker_process_shutdown, worker_ready, worker_shutdown
from django.conf import settings
from django.db import InterfaceError, OperationalError

from grading.certify import services as certify
from grading.conversations.grader import conversation_grade
from grading.criteria.trials import trial_item_grade
from grading.delivery import enqueue
from grading.drafts.gate import draft_grade
from grading.drafts.webhooks import retry_delay, webhook_deliver
from grading.erasure import runs as erasures
from grading.models import GradingRun, ItemKind, MonitorEvaluation, Org, Review
from grading.monitors.evaluate import monitors_evaluate as monitors_evaluate_all
from grading.monitors.notices import notice_send
from grading.otlp.pending import pending_expire
from grading.passes import planner
from grading.reviews import inflight
from grading.reviews.rollups import orgs_with_items, rollups_rebuild
from grading.reviews.services import pass_probabilities_backfill
from grading.sets.runs import set_run_batch

logger = logging.getLogger(__name__)


@worker_shutdown.connect
@worker_process_shutdown.connect
def _close_lock_session(**_) -> None:
    # The process's grading locks end with it anyway; closing says so at once instead of at the socket's timeout.
    inflight.lock_session_close()


@worker_ready.connect
def _freeze_startup_heap(**_) -> None:
    # What a worker imported and built before its first task lives as long as the process: kept out of the cyclic
    # collector's reach, a full collection no longer walks all of it whenever a grading thread allocates (decoding
    # a judge's reply, building rows).
    gc.collect()  # garbage frozen would never be collected
    gc.freeze()


_DATABASE_TROUBLE = (OperationalError, InterfaceError)
_GRADING_RETRIES = {
    "autoretry_for": _DATABASE_TROUBLE,
    "retry_backoff": 1,
    "retry_backoff_max": 30,
    "retry_jitter": True,
    "max_retries": 5,
}


@shared_task(name=enqueue.GRADE_CONVERSATION, bind=True, **_GRADING_RETRIES)
def grade_conversation(self, conversation_ids: list[int] | int) -> list[int | None]:
    def grade(conversation_id: int) -> Review | None:
        return conversation_grade(conversation_id=conversation_id, ticket=self.request.id)

    return _pks(inflight.grade_each(ItemKind.CONVERSATION, _batch(conversation_ids), grade, task_id=self.request.id))


@shared_task(name=enqueue.GRADE_DRAFT, bind=True, **_GRADING_RETRIES)
def grade_draft(self, draft_ids: list[int] | int) -> list[int | None]:
    def grade(draft_id: int) -> Review | None:
        return draft_grade(draft_id=draft_id, ticket=self.request.id)

    return _pks(inflight.grade_each(ItemKind.DRAFT, _batch(draft_ids), grade, task_id=self.request.id))


def _pks(graded: list[Review | None]) -> list[int | None]:
    return [review.pk if review else None for review in graded]


def _batch(item_ids: list[int] | int) -> list[int]:
    # A message queued before grading tasks carried batches names one item: still graded after an upgrade.
    return [item_ids] if isinstance(item_ids, int) else item_ids


@shared_task(name=enqueue.GRADING_PASS)
def grading_pass(trigger: str = GradingRun.Trigger.BEAT) -> int:
    # Beat sends no argument; a pass sent by a change (a spend cap raised) is a manual one, not this hour's beat.
    return len(planner.grading_pass(trigger=trigger).enqueued_ids)


@shared_task(name=enqueue.GRADING_RECOVER)
def grading_recover() -> int:
    return sum(len(ids) for ids in planner.grading_recover().values())


@shared_task(name=enqueue.REBUILD_ALL_ROLLUPS)
def rebuild_all_rollups() -> int:
    org_ids = orgs_with_items()
    enqueue.rollups_rebuild(org_ids)
    return len(org_ids)


@shared_task(name=enqueue.REBUILD_ROLLUPS)
def rebuild_rollups(org_id: int) -> int | None:
    if not Org.objects.filter(pk=org_id).exists():
        return None
    rebuild = rollups_rebuild(org_id=org_id, incremental=True)  # None: another rebuild of the org booked first
    pass_probabilities_backfill(org_id=org_id)  # after: it books its own counters, and cannot hold the rebuild up
    return rebuild.drifted if rebuild else None


@shared_task(name=enqueue.CERTIFICATES_REFRESH)
def certificates_refresh(org_id: int | None = None) -> int:
    return certify.certificates_refresh(org_id=org_id)


@shared_task(name=enqueue.GRADE_CRITERIA_TRIAL)
def grade_criteria_trial_item(trial_id: int, index: int) -> int | None:
    review = trial_item_grade(trial_id=trial_id, index=index)
    return review.pk if review else None


@shared_task(name=enqueue.GRADE_SET_RUN, **_GRADING_RETRIES)
def grade_set_run_items(run_id: int, item_ids: list[int]) -> int:
    return set_run_batch(run_id=run_id, item_ids=item_ids)


@shared_task(name=enqueue.ERASURE_RUN, **_GRADING_RETRIES)
def erasure_run(erasure_id: int) -> int | None:
    # A batch is one transaction, so a retry after a database error starts from the last batch committed.
    erasure = erasures.erasure_run(erasure_id=erasure_id)
    return erasure.pk if erasure else None


@shared_task(name="grading.tasks.retention_pass")
def retention_pass() -> int:
    # OTLP model calls still waiting for their other part expire by a setting of their own, not by a policy.
    pending_expire()
    return len(erasures.retention_pass())


@shared_task(name=enqueue.DELIVER_WEBHOOK, bind=True, max_retries=None)
def deliver_webhook(self, review_id: int, event: str, attempt: int = 1) -> bool:
    """One try per run, on the `webhooks` queue; a try that may succeed later is retried up to WEBHOOK_MAX_ATTEMPTS."""
    review = Review.objects.select_related("draft__org").filter(pk=review_id).first()
    if review is None or review.draft is None or not review.draft.callback_url:
        return False
    tried = webhook_deliver(review=review, event=event, attempt=attempt)
    if tried.retry_in is None or attempt >= settings.WEBHOOK_MAX_ATTEMPTS:
        return tried.delivery is not None and tried.delivery.delivered
    raise self.retry(args=(review_id, event, attempt + 1), countdown=tried.retry_in)


@shared_task(name=enqueue.MONITORS_EVALUATE)
def monitors_evaluate() -> int:
    """Every monitor evaluated (beat); a change of state sends its notices after its commit."""
    return monitors_evaluate_all(deliver=enqueue.monitor_notices)


@shared_task(name=enqueue.MONITOR_NOTICE, bind=True, max_retries=None)
def monitor_notice(self, evaluation_id: int, channel: str, attempt: int = 1) -> bool:
    """One try of one channel's notice of a monitor's change of state, on the `webhooks` queue; a try that may
    succeed later (an SMTP or network error, 408, 425, 429, 5xx) is tried again up to WEBHOOK_MAX_ATTEMPTS."""
    evaluation = MonitorEvaluation.objects.select_related("monitor__org").filter(pk=evaluation_id).first()
    if evaluation is None:  # the monitor was deleted meanwhile
        return False
    sent = notice_send(evaluation, channel)
    if not sent.failed:
        return True
    if sent.permanent or attempt >= settings.WEBHOOK_MAX_ATTEMPTS:
        logger.error(
            "monitor notice %s by %s given up after %s tries: %s", evaluation_id, channel, attempt, sent.failed
        )
        return False
    raise self.retry(args=(evaluation_id, channel, attempt + 1), countdown=retry_delay(attempt))

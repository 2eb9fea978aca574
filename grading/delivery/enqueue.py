"""Handing work to the workers. Tasks are named here and looked up by name, so the modules that decide what to
send (the services, the planner, webhooks, the evaluation export) never import the task modules that call back
into them. A signature by name behaves as `task.delay` would (routing, eager mode). Call these after commit
(`transaction.on_commit`), so a worker never reads rows that are not there yet.

Nothing sent from here has its result read, so nothing subscribes to results: with Redis down, Celery's result
backend would otherwise retry its subscription for 20 s per send and then refuse every later one in that process
("the Celery application must be restarted").

Every send is one publish without kombu's retry, in a loop of our own. kombu's retrying publish declares the queue
inside a second retrying block; when the connection drops between the two, the inner one reconnects and closes the
channel the outer one then publishes on, which raises AttributeError instead of a broker error (kombu 5.7).
"""

import logging
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from celery import current_app
from django.conf import settings
from kombu.exceptions import OperationalError as BrokerUnavailable

from grading.models import GradingRun, ItemKind

logger = logging.getLogger(__name__)

GRADE_CONVERSATION = "grading.tasks.grade_conversation"
GRADE_DRAFT = "grading.tasks.grade_draft"
GRADE_CRITERIA_TRIAL = "grading.tasks.grade_criteria_trial_item"  # on the judge queue, as grade_* are
GRADE_SET_RUN = "grading.tasks.grade_set_run_items"  # on the judge queue, as grade_* are
GRADING_PASS = "grading.tasks.grading_pass"  # noqa: S105 - a task name
GRADING_RECOVER = "grading.tasks.grading_recover"
DELIVER_WEBHOOK = "grading.tasks.deliver_webhook"
EXPORT_EVALUATIONS = "grading.otlp.tasks.export_evaluations"
REBUILD_ROLLUPS = "grading.tasks.rebuild_rollups"
REBUILD_ALL_ROLLUPS = "grading.tasks.rebuild_all_rollups"
ERASURE_RUN = "grading.tasks.erasure_run"
CERTIFICATES_REFRESH = "grading.tasks.certificates_refresh"
WRITE_WHOLE_CALLS = "grading.otlp.tasks.write_whole_calls"
MONITORS_EVALUATE = "grading.tasks.monitors_evaluate"
MONITOR_NOTICE = "grading.tasks.monitor_notice"  # on the webhooks queue, as every notice to a receiver is

_GRADING_TASKS = {ItemKind.CONVERSATION: GRADE_CONVERSATION, ItemKind.DRAFT: GRADE_DRAFT}


@dataclass(frozen=True)
class Patience:
    """How many times a send tries the broker, and the waits between tries: 0, step, 2 * step, ... up to `longest`."""

    tries: int
    step: float = 0.0
    longest: float = 0.0

    def waits(self) -> Iterator[float]:
        """The wait before each try after the first."""
        for retry in range(self.tries - 1):
            yield min(retry * self.step, self.longest)


ONE_TRY = Patience(tries=1)  # an API request with a pipeline waiting on it
BRIEF = Patience(tries=4, step=0.2, longest=0.2)  # Celery's own default: rides out a dropped connection
# A grading pass (a worker or a command, nobody waiting on it) rides out a broker restart: about a minute of tries.
# planner.SEND_GRACE must stay longer than this, or a ticket still being sent could be taken for lost.
PASS_SEND_PATIENCE = Patience(tries=31, step=1, longest=2)


@dataclass(frozen=True)
class Ticket:
    """An item owed a grading, and the id of the task that owes it (grading/reviews/inflight.py); a task may owe
    several."""

    kind: str
    item_id: int
    task_id: str


def new_task_id() -> str:
    return str(uuid.uuid4())


def grading_send(tickets: Iterable[Ticket], *, patient: bool) -> int:
    """Send one grading task per task id, for the items whose tickets name it; return how many items the broker
    took.

    Never raises for a broker that is down: the tickets were committed first, so an unsent item is still owed its
    grading and the recovery run (planner.grading_recover) sends it once the broker answers. `patient` sends wait
    out a short outage; impatient ones (an API request with a pipeline waiting on it) try once.
    """
    tasks: dict[tuple[str, str], list[int]] = {}  # (kind, task id) -> its items, in the order given
    for ticket in tickets:
        tasks.setdefault((ticket.kind, ticket.task_id), []).append(ticket.item_id)
    patience = PASS_SEND_PATIENCE if patient else ONE_TRY
    sent = 0
    for (kind, task_id), item_ids in tasks.items():
        try:
            _send(_GRADING_TASKS[kind], item_ids, task_id=task_id, patience=patience)
        except BrokerUnavailable as exc:
            logger.warning(
                "the broker did not take grading tasks (%s); %s item(s) stay owed and the recovery run sends them",
                exc,
                sum(len(ids) for ids in tasks.values()) - sent,
            )
            return sent
        sent += len(item_ids)
    return sent


def queue_names() -> list[str]:
    """Every queue the app routes tasks to: where a waiting grading task can be."""
    names = {queue.name for queue in current_app.conf.task_queues or ()}
    return sorted(names | {settings.CELERY_TASK_DEFAULT_QUEUE})


def grading_pass_now() -> None:
    """A grading pass at once, not at the next hourly one (a spend cap was raised): a manual pass, since the hour's
    beat pass is unique."""
    _send(GRADING_PASS, GradingRun.Trigger.MANUAL.value)


def criteria_trial(*, trial_id: int, items: int) -> None:
    for index in range(items):
        _send(GRADE_CRITERIA_TRIAL, trial_id, index)


def set_run(*, run_id: int, batches: list[list[int]]) -> None:
    """A regression set's run, one task per batch of its items (grading/sets/runs.py)."""
    for item_ids in batches:
        _send(GRADE_SET_RUN, run_id, item_ids)


# What a draft's pipeline is told by webhook (grading/drafts/webhooks.py), its X-Tollgate-Event: the machine's verdict,
# sent by the gate, and a person's decision, sent by the record's writer (grading/reviews/services.py).
MACHINE_VERDICT = "machine_verdict"
HUMAN_DECISION = "human_decision"


def webhook_delivery(*, review_id: int, event: str) -> None:
    _send(DELIVER_WEBHOOK, review_id, event)


def evaluations_export(*, review_id: int, event: str) -> None:
    _send(EXPORT_EVALUATIONS, review_id, event)


def certificates_refresh(*, org_id: int) -> None:
    """The org's certificates computed again, after people's verdicts arrived or a target changed. A broker that
    is down loses nothing: the beat computes them again within ten minutes."""
    try:
        _send(CERTIFICATES_REFRESH, org_id)
    except BrokerUnavailable as exc:
        logger.warning("the broker did not take a certificates refresh (%s); the next beat run computes them", exc)


def rollups_rebuild(org_ids: Iterable[int]) -> None:
    for org_id in org_ids:
        _send(REBUILD_ROLLUPS, org_id)


def erasure_run(*, erasure_id: int) -> None:
    _send(ERASURE_RUN, erasure_id)


def otlp_whole_calls(*, org_id: int) -> None:
    """The OTLP calls a logs request made whole beyond what it writes: a worker writes them. Sent from a request
    that already answered for its own work, so a broker that is down is logged, not raised: the daily retention
    pass writes them then (grading/otlp/pending.py `pending_expire`)."""
    try:
        _send(WRITE_WHOLE_CALLS, org_id)
    except BrokerUnavailable as exc:
        logger.warning("the broker did not take the writing of org %s's whole OTLP calls (%s)", org_id, exc)


def monitor_notices(evaluation_id: int, channels: list[str]) -> None:
    """A monitor's change of state told on each of its channels (grading/monitors/notices.py), one task each. A broker
    that is down loses the notice (logged): the state and its history stand on the monitor's page."""
    for channel in channels:
        try:
            _send(MONITOR_NOTICE, evaluation_id, channel)
        except BrokerUnavailable as exc:
            logger.warning(
                "the broker did not take the %s notice of monitor evaluation %s (%s)", channel, evaluation_id, exc
            )


def _send(name: str, *args: object, task_id: str | None = None, patience: Patience = BRIEF) -> None:
    """Publish once per try; raise BrokerUnavailable when the last try fails."""
    signature = current_app.signature(name, args=args)
    waits = patience.waits()
    while True:
        try:
            signature.apply_async(task_id=task_id, ignore_result=True, retry=False)
            return
        except BrokerUnavailable:
            wait = next(waits, None)
            if wait is None:
                raise
            time.sleep(wait)

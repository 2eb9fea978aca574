"""The grading pass: find every item whose current review does not match its evidence and
the active criteria, and enqueue up to a cap. Its only judge calls are for those items."""

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from grading.core.evidence import NotScorable
from grading.delivery import enqueue
from grading.models import Conversation, CriteriaVersion, Draft, GradingRun, ItemKind, Org, Review, Route, SpendCap
from grading.reviews import inflight
from grading.reviews.conversation_reads import quiet_period
from grading.reviews.spend import spend_blocked
from grading.reviews.sql import tickets_write
from grading.reviews.versions import criteria_active

logger = logging.getLogger(__name__)

# How long after an item was given a ticket its task may still be on its way to the broker: the send follows the
# commit at once, but a pass waits out a broker outage for about a minute (enqueue.PASS_SEND_PATIENCE). Within
# this window a ticket the broker does not hold yet is not taken for lost.
SEND_GRACE = timedelta(seconds=90)


def _settled_by(subject: str) -> QuerySet[Review]:
    """Reviews of the outer item that count, errors excepted (an error is tried again)."""
    return Review.objects.counting().filter(**{subject: OuterRef("pk")}).exclude(route=Route.ERROR)


def went_quiet(now: datetime) -> Q:
    """Reviews that found their conversation in progress, which has since closed or gone quiet, or awaiting a
    model call's content, which has since come: its scorability changed without its evidence changing, so it is
    graded again. Quiet from the very moment the evidence reads it so (grading/core/evidence.py: in progress while
    less than the quiet period has passed)."""
    quiet = Q(conversation__closed=True) | Q(conversation__last_activity_at__lte=now - quiet_period())
    came = Q(conversation__content_awaited_since__isnull=True)
    return Q(route=Route.NOT_SCORABLE) & (
        Q(reason=NotScorable.IN_PROGRESS) & quiet | Q(reason=NotScorable.CONTENT_AWAITED) & came
    )


def conversations_needing_grading(now: datetime) -> QuerySet[Conversation]:
    """Conversations with no current review of their present identity (an "in progress" verdict that
    `went_quiet` settles nothing)."""
    settled = _settled_by("conversation").exclude(went_quiet(now))
    return Conversation.objects.filter(~Exists(settled))


def drafts_needing_grading() -> QuerySet[Draft]:
    return Draft.objects.filter(~Exists(_settled_by("draft")))


@dataclass(frozen=True)
class PassResult:
    run: GradingRun | None  # None when another beat already ran this hour's pass
    enqueued_ids: list[int]  # conversations
    enqueued_draft_ids: list[int]
    recovered: dict[str, list[int]] = field(default_factory=dict)  # kind -> ids sent again: their task was lost


def grading_pass(
    *, trigger: str = GradingRun.Trigger.MANUAL, now: datetime | None = None, cap: int | None = None
) -> PassResult:
    """Plan and enqueue one pass.

    1. Record the run; a second beat-triggered run in the same hour hits the unique bucket and stops.
    2. Make sure every org with items has active criteria (an org's first pass seeds v1).
    3. Per kind, set aside what is in flight (its task waits in the broker or a live worker holds it,
       grading/reviews/inflight.py); an item marked queued whose task is in neither place was lost and is ready again.
       Set aside too the items of orgs whose spend cap (the org's, or its active version's) is reached: they wait,
       counted as `spend_capped`, and the pass after the cap is raised or its period rolls over takes them.
    4. Take up to what is left of `cap` of the ready items (longest waiting first), skipping rows another pass
       holds, and give each a ticket; the ready items left over are the backlog.
    5. After commit, send one grading task per ticket; then one rollup rebuild per org with items.
    """
    now = now or timezone.now()
    cap = cap or settings.GRADING_PASS_CAP
    with transaction.atomic():
        try:
            with transaction.atomic():
                bucket = now.replace(minute=0, second=0, microsecond=0)
                run = GradingRun.objects.create(hour_bucket=bucket, trigger=trigger)
        except IntegrityError:
            return PassResult(run=None, enqueued_ids=[], enqueued_draft_ids=[])
        _seed_criteria()
        in_flight = _InFlight(now)
        capped = _spend_capped_orgs(now)
        conversations = _take(
            ItemKind.CONVERSATION, conversations_needing_grading(now), "last_activity_at", cap, now, in_flight,
            capped[ItemKind.CONVERSATION],
        )  # fmt: skip
        drafts = _take(
            ItemKind.DRAFT, drafts_needing_grading(), "updated_at", cap - len(conversations.picked), now, in_flight,
            capped[ItemKind.DRAFT],
        )  # fmt: skip
        run.needing = conversations.needing + drafts.needing
        run.in_flight = conversations.in_flight + drafts.in_flight
        run.enqueued = len(conversations.picked) + len(drafts.picked)
        run.recovered = len(conversations.recovered) + len(drafts.recovered)
        run.spend_capped = conversations.spend_capped + drafts.spend_capped
        run.backlog = run.needing - run.in_flight - run.enqueued - run.spend_capped
        run.save(update_fields=["needing", "in_flight", "enqueued", "recovered", "spend_capped", "backlog"])
        tickets = _ticket([(ItemKind.CONVERSATION, conversations.picked), (ItemKind.DRAFT, drafts.picked)], now)
        transaction.on_commit(lambda: enqueue.grading_send(tickets, patient=True))
    return PassResult(
        run=run,
        enqueued_ids=conversations.picked,
        enqueued_draft_ids=drafts.picked,
        recovered={ItemKind.CONVERSATION: conversations.recovered, ItemKind.DRAFT: drafts.recovered},
    )


def grading_recover(*, now: datetime | None = None) -> dict[str, list[int]]:
    """Send again every queued item whose task was lost; return kind -> ids. Beat runs this every minute, so a
    draft submitted while the broker was down, or one whose worker died, does not wait for the hourly pass.

    Only items marked queued are looked at (it never plans new work), and the broker is read only when one of
    them is old enough to have been lost.
    """
    now = now or timezone.now()
    recovered: dict[str, list[int]] = {}
    with transaction.atomic():
        in_flight = _InFlight(now)
        for kind, needing in (
            (ItemKind.CONVERSATION, conversations_needing_grading(now)),
            (ItemKind.DRAFT, drafts_needing_grading()),
        ):
            queued = needing.filter(queued_at__isnull=False)
            _, lost = in_flight.split(kind, list(queued.values_list("pk", "queued_at", "grading_task_id")))
            still_lost = queued.filter(pk__in=lost, queued_at__lt=in_flight.sent_before)  # not resent meanwhile
            recovered[kind] = sorted(still_lost.select_for_update(skip_locked=True).values_list("pk", flat=True))
        every_ticket = _ticket(list(recovered.items()), now)
        transaction.on_commit(lambda: enqueue.grading_send(every_ticket, patient=True))
    if every_ticket:
        logger.warning("sent %s lost grading task(s) again", len(every_ticket))
    return recovered


def _spend_capped_orgs(now: datetime) -> dict[str, set[int]]:
    """Per kind, the orgs whose grading a spend cap stops now: the org's own cap, or its active version's."""
    capped: dict[str, set[int]] = {ItemKind.CONVERSATION: set(), ItemKind.DRAFT: set()}
    with_caps = SpendCap.objects.values("org_id")
    for version in CriteriaVersion.objects.filter(org_id__in=with_caps, is_active=True):
        if spend_blocked(version.org_id, version, now=now) is not None:
            capped[version.kind].add(version.org_id)
    return capped


def _seed_criteria() -> None:
    for kind, items in ((ItemKind.CONVERSATION, Conversation), (ItemKind.DRAFT, Draft)):
        for org in Org.objects.filter(Exists(items.objects.filter(org=OuterRef("pk")))):
            criteria_active(org=org, kind=kind)


class _InFlight:
    """What is in flight, read once per pass: the items live workers hold, and the broker's task ids (read only
    when some ticket is old enough to have been lost)."""

    def __init__(self, now: datetime) -> None:
        self.sent_before = now - SEND_GRACE
        self.being_graded = inflight.items_being_graded()
        self._broker: inflight.BrokerTasks | None = None
        self._broker_read = False

    def split(self, kind: str, queued: list[tuple[int, datetime | None, str]]) -> tuple[set[int], set[int]]:
        """(in flight, lost) among items given as (id, queued_at, ticket)."""
        running = {item_id for held_kind, item_id in self.being_graded if held_kind == kind}
        in_flight: set[int] = set()
        candidates = {}
        for item_id, queued_at, ticket in queued:
            if item_id in running:
                in_flight.add(item_id)
            elif queued_at is None:
                continue
            elif queued_at >= self.sent_before:
                in_flight.add(item_id)  # just given a ticket: its task may be on its way to the broker
            else:
                candidates[item_id] = ticket
        if not candidates:
            return in_flight, set()
        broker = self._broker_tasks()
        if broker is None:  # the broker cannot be read: nothing can be called lost
            return in_flight | set(candidates), set()
        # A delivered task that no live worker holds belonged to a worker that died: running tasks hold the lock.
        waiting = {item_id for item_id, ticket in candidates.items() if ticket in broker.waiting}
        return in_flight | waiting, set(candidates) - waiting

    def _broker_tasks(self) -> inflight.BrokerTasks | None:
        if not self._broker_read:
            self._broker = inflight.broker_tasks(enqueue.queue_names())
            self._broker_read = True
        return self._broker


@dataclass(frozen=True)
class _Taken:
    picked: list[int]  # oldest first
    recovered: list[int]
    needing: int
    in_flight: int
    spend_capped: int  # ready, but their org's spend cap is reached


def _take(
    kind: str, needing: QuerySet, oldest_first: str, cap: int, now: datetime, in_flight: _InFlight, capped: set[int]
) -> _Taken:
    """Up to `cap` items of `needing` that are not in flight nor of a `capped` org, locked for their tickets; which
    of them were lost; how many need grading, how many of those are in flight and how many wait on a spend cap.

    One read of what needs grading, then the chosen rows are locked, skipping those a concurrent pass holds.
    """
    rows = list(needing.values_list("pk", oldest_first, "queued_at", "grading_task_id", "org_id"))
    flying, lost = in_flight.split(kind, [(pk, queued_at, ticket) for pk, _, queued_at, ticket, _ in rows])
    waiting = sorted((order, pk) for pk, order, _, _, org_id in rows if pk not in flying and org_id not in capped)
    spend_capped = sum(1 for pk, _, _, _, org_id in rows if pk not in flying and org_id in capped)
    ready = waiting[: max(cap, 0)]
    chosen = [pk for _, pk in ready]
    # Locked, and read again under the lock: a row a concurrent pass gave a ticket meanwhile is no longer ready.
    still_ready = needing.filter(pk__in=chosen).filter(
        Q(queued_at__isnull=True) | Q(queued_at__lt=in_flight.sent_before)
    )
    locked = set(still_ready.select_for_update(skip_locked=True).values_list("pk", flat=True))
    picked = [pk for pk in chosen if pk in locked]
    return _Taken(
        picked=picked,
        recovered=[pk for pk in picked if pk in lost],
        needing=len(rows),
        in_flight=len(flying),
        spend_capped=spend_capped,
    )


def _ticket(picked: list[tuple[str, list[int]]], now: datetime) -> list[enqueue.Ticket]:
    """Give each item (of each kind, in the order given) a new ticket in the caller's transaction: from its commit
    on, the item is owed a grading. Items go several to a task (`task_size`), never two kinds in one."""
    tickets: list[enqueue.Ticket] = []
    left = sum(len(item_ids) for _, item_ids in picked)
    for kind, item_ids in picked:
        of_kind: list[enqueue.Ticket] = []
        while len(of_kind) < len(item_ids):
            task_id, batch = enqueue.new_task_id(), item_ids[len(of_kind) : len(of_kind) + task_size(left)]
            of_kind += [enqueue.Ticket(kind=kind, item_id=item_id, task_id=task_id) for item_id in batch]
            left -= len(batch)
        if of_kind:
            tickets_write(
                kind=kind, item_ids=[t.item_id for t in of_kind], task_ids=[t.task_id for t in of_kind], now=now
            )
        tickets += of_kind
    return tickets


def task_size(left: int) -> int:
    """How many items the next task of a pass carries while `left` are still to be sent: GRADING_BATCH_SIZE, and
    towards the end a share of what is left for each of the GRADING_CONCURRENCY graders, down to one item.

    A batch shares Celery's own cost per task (receiving, acknowledging, the task's frame), a large part of a
    grading worker's CPU when each task carries one item. But a thread grades its batch one item after another, so
    once the queue runs dry the graders that finish first wait for the last long batches, and the end of a pass
    runs slower than the rest. Tasks that shrink as the pass runs out of items (guided self-scheduling) let the
    graders finish at about the same time.
    """
    return max(1, min(settings.GRADING_BATCH_SIZE, left // settings.GRADING_CONCURRENCY))

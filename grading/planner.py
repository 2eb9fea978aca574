"""The grading pass (DESIGN 4.6): find every item whose current review does not match its evidence and
the active criteria, and enqueue up to a cap. Its only judge calls are for those items."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from grading import enqueue
from grading.criteria import criteria_active
from grading.evidence import NotScorable
from grading.models import Conversation, Draft, GradingRun, ItemKind, Org, Review, Route
from grading.selectors import quiet_period


def _settled_by(subject: str) -> QuerySet[Review]:
    """Reviews of the outer item that count, errors excepted (an error is tried again)."""
    return Review.objects.counting().filter(**{subject: OuterRef("pk")}).exclude(route=Route.ERROR)


def conversations_needing_grading(now: datetime) -> QuerySet[Conversation]:
    """Conversations with no current review of their present identity.

    An "in progress" verdict stops settling a conversation once it has closed or gone quiet: its
    scorability changed without its evidence changing.
    """
    went_quiet = Q(conversation__closed=True) | Q(conversation__last_activity_at__lt=now - quiet_period())
    settled = _settled_by("conversation").exclude(
        Q(route=Route.NOT_SCORABLE, reason=NotScorable.IN_PROGRESS) & went_quiet
    )
    return Conversation.objects.filter(~Exists(settled))


def drafts_needing_grading() -> QuerySet[Draft]:
    return Draft.objects.filter(~Exists(_settled_by("draft")))


@dataclass(frozen=True)
class PassResult:
    run: GradingRun | None  # None when another beat already ran this hour's pass
    enqueued_ids: list[int]  # conversations
    enqueued_draft_ids: list[int]


def grading_pass(
    *, trigger: str = GradingRun.Trigger.MANUAL, now: datetime | None = None, cap: int | None = None
) -> PassResult:
    """Plan and enqueue one pass.

    1. Record the run; a second beat-triggered run in the same hour hits the unique bucket and stops.
    2. Make sure every org with items has active criteria (an org's first pass seeds v1).
    3. Per kind, count what needs grading and take up to what is left of `cap` (longest waiting first) that
       no pass enqueued within the task time limit, skipping rows another pass holds; mark them queued.
    4. After commit, send one grading task per item; the rest is backlog, reported on the run. Then one rollup
       rebuild per org with items.
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
        in_flight_since = now - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT)
        conversation_ids, conversations_needing = _take(
            conversations_needing_grading(now), "last_activity_at", cap, now, in_flight_since
        )
        draft_ids, drafts_needing = _take(
            drafts_needing_grading(), "updated_at", cap - len(conversation_ids), now, in_flight_since
        )
        run.needing = conversations_needing + drafts_needing
        run.enqueued = len(conversation_ids) + len(draft_ids)
        run.backlog = run.needing - run.enqueued
        run.save(update_fields=["needing", "enqueued", "backlog"])
        transaction.on_commit(lambda: enqueue.grading_of_conversations(conversation_ids))
        transaction.on_commit(lambda: enqueue.grading_of_drafts(draft_ids))
        # The dashboards' rollups are kept by every write; each pass also rebuilds them from the reviews, which
        # puts right what no review write sees (a conversation moved to another week) and audits the upkeep.
        with_items = Exists(Conversation.objects.filter(org=OuterRef("pk"))) | Exists(
            Draft.objects.filter(org=OuterRef("pk"))
        )
        org_ids = list(Org.objects.filter(with_items).values_list("pk", flat=True))
        transaction.on_commit(lambda: enqueue.rollups_rebuild(org_ids))
    return PassResult(run=run, enqueued_ids=conversation_ids, enqueued_draft_ids=draft_ids)


def _seed_criteria() -> None:
    for kind, items in ((ItemKind.CONVERSATION, Conversation), (ItemKind.DRAFT, Draft)):
        for org in Org.objects.filter(Exists(items.objects.filter(org=OuterRef("pk")))):
            criteria_active(org=org, kind=kind)


def _take(
    needing: QuerySet, oldest_first: str, cap: int, now: datetime, in_flight_since: datetime
) -> tuple[list[int], int]:
    """Up to `cap` ids of `needing` not already in flight, marked queued; and how many need grading in all."""
    ready = needing.filter(Q(queued_at__isnull=True) | Q(queued_at__lt=in_flight_since))
    picked = list(
        ready.order_by(oldest_first, "pk")
        .select_for_update(skip_locked=True)
        .values_list("pk", flat=True)[: max(cap, 0)]
    )
    needing.model.objects.filter(pk__in=picked).update(queued_at=now)
    return picked, needing.count()

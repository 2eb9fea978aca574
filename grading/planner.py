"""The grading pass (DESIGN 4.6): find every conversation whose current review does not match its
evidence and the active criteria, and enqueue up to a cap. Its only judge calls are for those items."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from grading.criteria import criteria_active
from grading.evidence import NotScorable
from grading.models import Conversation, GradingRun, ItemKind, Org, Review, Route
from grading.selectors import quiet_period


def conversations_needing_grading(now: datetime) -> QuerySet[Conversation]:
    """Conversations with no current review of their present identity.

    A current review settles a conversation when it names the conversation's fingerprint and its org's
    active criteria version, and is neither an error (retried) nor an "in progress" verdict on a
    conversation that has since closed or gone quiet (its scorability changed without its evidence).
    """
    went_quiet = Q(conversation__closed=True) | Q(conversation__last_activity_at__lt=now - quiet_period())
    settled = (
        Review.objects.filter(
            conversation=OuterRef("pk"),
            is_current=True,
            fingerprint=OuterRef("fingerprint"),
            criteria_version__is_active=True,
        )
        .exclude(route=Route.ERROR)
        .exclude(Q(route=Route.NOT_SCORABLE, reason=NotScorable.IN_PROGRESS) & went_quiet)
    )
    return Conversation.objects.filter(~Exists(settled))


@dataclass(frozen=True)
class PassResult:
    run: GradingRun | None  # None when another beat already ran this hour's pass
    enqueued_ids: list[int]


def grading_pass(
    *, trigger: str = GradingRun.Trigger.MANUAL, now: datetime | None = None, cap: int | None = None
) -> PassResult:
    """Plan and enqueue one pass.

    1. Record the run; a second beat-triggered run in the same hour hits the unique bucket and stops.
    2. Make sure every org with conversations has active criteria (an org's first pass seeds v1).
    3. Count what needs grading, take up to `cap` of it (longest waiting first) that no pass has enqueued
       within the task time limit, skipping rows another pass holds, and mark them queued.
    4. After commit, send one grading task per conversation; the rest is backlog, reported on the run.
    """
    from grading.tasks import grade_conversation  # tasks import this module

    now = now or timezone.now()
    cap = cap or settings.GRADING_PASS_CAP
    with transaction.atomic():
        try:
            with transaction.atomic():
                run = GradingRun.objects.create(
                    hour_bucket=now.replace(minute=0, second=0, microsecond=0), trigger=trigger
                )
        except IntegrityError:
            return PassResult(run=None, enqueued_ids=[])
        for org in Org.objects.filter(Exists(Conversation.objects.filter(org=OuterRef("pk")))):
            criteria_active(org=org, kind=ItemKind.CONVERSATION)
        needing = conversations_needing_grading(now)
        in_flight_since = now - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT)
        ready = needing.filter(Q(queued_at__isnull=True) | Q(queued_at__lt=in_flight_since))
        picked = list(
            ready.order_by("last_activity_at", "pk")
            .select_for_update(skip_locked=True)
            .values_list("pk", flat=True)[:cap]
        )
        Conversation.objects.filter(pk__in=picked).update(queued_at=now)
        run.needing = needing.count()
        run.enqueued = len(picked)
        run.backlog = run.needing - run.enqueued
        run.save(update_fields=["needing", "enqueued", "backlog"])
        transaction.on_commit(lambda: [grade_conversation.delay(pk) for pk in picked])
    return PassResult(run=run, enqueued_ids=picked)

"""The review cycle's audit sample: the fixed-rule sample goes to people as audit items whatever
the machine decided, so the judge is measured on items it did not choose."""

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from django.db import transaction
from django.utils import timezone

from grading.checks.routing import sample_rank
from grading.core.weeks import monday, week_start
from grading.models import UNGRADED, ItemKind, Org, Review
from grading.models.audit import audit_record
from grading.reviews.services import review_audit_mark


@dataclass(frozen=True)
class SampleCell:
    application: str  # "" for drafts
    week: date  # the Monday of its ISO week
    external_ids: list[str]
    review_ids: list[int] = field(default_factory=list)  # the counting review of each, in the same order


def _sample_since(now: datetime, weeks: int) -> datetime:
    return week_start(monday(now)) - timedelta(weeks=weeks - 1)


def _smallest_hashes(rows, *, per_week: int, salt: str) -> list[SampleCell]:
    cells: dict[tuple[str, date], list[tuple[str, str, int]]] = {}
    for application, at, external_id, review_id in rows:
        rank = sample_rank(salt, external_id)
        cells.setdefault((application, monday(at)), []).append((rank, external_id, review_id))
    sample = []
    for (application, week), ranked in sorted(cells.items()):
        picked = sorted(ranked)[:per_week]
        sample.append(SampleCell(application, week, [e for _, e, _ in picked], [r for _, _, r in picked]))
    return sample


def sample_conversations(
    *, org: Org, per_week: int, weeks: int, salt: str, now: datetime | None = None
) -> list[SampleCell]:
    """Fixed-rule sampling: per application and ISO week over the last `weeks` weeks, the
    `per_week` scorable conversations with the smallest sha256(salt + external_id).

    The rule ignores usage and old scores on purpose: nobody can steer which conversations get a human
    look. Scorable here means the conversation's current review counts and was not `not_scorable`.
    """
    now = now or timezone.now()
    scorable = (
        Review.objects.counting()
        .filter(org=org, kind=ItemKind.CONVERSATION)
        .exclude(route__in=UNGRADED)
        .filter(conversation__started_at__gte=_sample_since(now, weeks), conversation__started_at__lte=now)
        .values_list("conversation__application", "conversation__started_at", "conversation__external_id", "pk")
    )
    return _smallest_hashes(scorable, per_week=per_week, salt=salt)


def sample_drafts(*, org: Org, per_week: int, weeks: int, salt: str, now: datetime | None = None) -> list[SampleCell]:
    """The same rule for drafts, per ISO week of their verdict: the `per_week` drafts with a counting, judged
    review and the smallest sha256(salt + external_id)."""
    now = now or timezone.now()
    judged = (
        Review.objects.counting()
        .filter(org=org, kind=ItemKind.DRAFT, finished_at__gte=_sample_since(now, weeks), finished_at__lte=now)
        .exclude(route__in=UNGRADED)
        .values_list("application", "finished_at", "draft__external_id", "pk")
    )
    return _smallest_hashes(judged, per_week=per_week, salt=salt)


@dataclass(frozen=True)
class AuditSample:
    conversations: list[SampleCell]
    drafts: list[SampleCell]
    marked: list[int]  # review ids newly sent to people (the rest were sent before)


def audit_sample_send(
    *, org: Org, per_week: int, weeks: int, salt: str, now: datetime | None = None, send: bool = True
) -> AuditSample:
    """Pick the sample (conversations per application and week, drafts per week) and, unless `send` is off, mark
    each picked review as an audit item. The rule is deterministic, so running it again picks the same items and
    marks nothing new."""
    conversations = sample_conversations(org=org, per_week=per_week, weeks=weeks, salt=salt, now=now)
    drafts = sample_drafts(org=org, per_week=per_week, weeks=weeks, salt=salt, now=now)
    marked: list[int] = []
    if send:
        review_ids = [pk for cell in (*conversations, *drafts) for pk in cell.review_ids]
        with transaction.atomic():
            marked = review_audit_mark(review_ids=review_ids)
            if marked:
                detail = {"reviews": marked, "per_week": per_week, "weeks": weeks}
                audit_record(action="sample.audit", org=org, detail=detail)
    return AuditSample(conversations, drafts, marked)

"""Reads: conversation state for the API, the current review, the staleness audit and the quality number."""

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count, F, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import ExtractIsoYear, ExtractWeek
from django.utils import timezone

from grading import evidence
from grading.models import Conversation, CriteriaVersion, Draft, Feedback, ItemKind, Org, Review, Route


def quiet_period() -> timedelta:
    return timedelta(minutes=settings.CONVERSATION_QUIET_MINUTES)


def _active_criteria_id(kind: str) -> Subquery:
    return Subquery(CriteriaVersion.objects.filter(org=OuterRef("org_id"), kind=kind, is_active=True).values("pk")[:1])


def current_conversation_reviews(org: Org | None = None) -> QuerySet[Review]:
    """Reviews that count: the conversation's latest, for its present fingerprint, under active criteria."""
    reviews = Review.objects.filter(kind=ItemKind.CONVERSATION, is_current=True)
    if org is not None:
        reviews = reviews.filter(org=org)
    return reviews.filter(
        fingerprint=F("conversation__fingerprint"), criteria_version_id=_active_criteria_id(ItemKind.CONVERSATION)
    )


def stale_current_reviews(org: Org | None = None) -> QuerySet[Review]:
    """The staleness audit: latest reviews whose identity no longer matches the item. Zero after a pass."""
    reviews = Review.objects.filter(kind=ItemKind.CONVERSATION, is_current=True)
    if org is not None:
        reviews = reviews.filter(org=org)
    return reviews.exclude(
        fingerprint=F("conversation__fingerprint"), criteria_version_id=_active_criteria_id(ItemKind.CONVERSATION)
    )


def current_review(conversation: Conversation) -> Review | None:
    return current_conversation_reviews().filter(conversation=conversation).select_related("criteria_version").first()


@dataclass(frozen=True)
class ConversationState:
    conversation: Conversation
    path: list[evidence.EvidenceMessage]
    not_scorable_reason: evidence.NotScorable | None
    review: Review | None


def conversation_state(
    conversation: Conversation, messages: list[evidence.EvidenceMessage] | None = None, now: datetime | None = None
) -> ConversationState:
    if messages is None:
        messages = [m.as_evidence() for m in conversation.messages.all()]
    result = evidence.active_path(messages, conversation.active_message_id)
    reason = evidence.not_scorable_reason(
        result.path,
        closed=conversation.closed,
        last_activity=conversation.last_activity_at,
        now=now or timezone.now(),
        quiet_period=quiet_period(),
        path_problem=result.problem,
    )
    return ConversationState(conversation, result.path, reason, current_review(conversation))


@dataclass(frozen=True)
class QualityRow:
    application: str
    iso_year: int
    iso_week: int
    passed: int
    resolved: int  # reviews with no unknown check: the denominator
    with_unknown: int  # beside the number, never inside it
    thumbs_up: int
    thumbs_down: int

    @property
    def quality(self) -> float | None:
        return self.passed / self.resolved if self.resolved else None


def conversation_quality(org: Org) -> list[QualityRow]:
    """The quality number by application and ISO week of the conversation's start (DESIGN 4.5).

    passes over reviews with no unknown check; the count with an unknown stands beside it; thumbs apart.
    """
    week = {"iso_year": ExtractIsoYear("conversation__started_at"), "iso_week": ExtractWeek("conversation__started_at")}
    scored = (
        current_conversation_reviews(org)
        .annotate(**week)
        .values("conversation__application", "iso_year", "iso_week")
        .annotate(
            passed=Count("pk", filter=Q(route=Route.PASS)),
            resolved=Count("pk", filter=Q(route__in=[Route.PASS, Route.FAIL])),
            with_unknown=Count("pk", filter=Q(route=Route.HUMAN, reason="unknown_check")),
        )
    )
    thumbs = (
        Feedback.objects.filter(conversation__org=org)
        .annotate(**week)
        .values("conversation__application", "iso_year", "iso_week")
        .annotate(up=Count("pk", filter=Q(value="up")), down=Count("pk", filter=Q(value="down")))
    )
    thumbs_by_key = {
        (t["conversation__application"], t["iso_year"], t["iso_week"]): (t["up"], t["down"]) for t in thumbs
    }
    rows = []
    for row in scored:
        key = (row["conversation__application"], row["iso_year"], row["iso_week"])
        up, down = thumbs_by_key.get(key, (0, 0))
        rows.append(QualityRow(*key, row["passed"], row["resolved"], row["with_unknown"], up, down))
    return sorted(rows, key=lambda r: (r.application, r.iso_year, r.iso_week))


@dataclass(frozen=True)
class SampleCell:
    application: str
    iso_year: int
    iso_week: int
    external_ids: list[str]


def sample_conversations(
    *, org: Org, per_week: int, weeks: int, salt: str, now: datetime | None = None
) -> list[SampleCell]:
    """Fixed-rule sampling (DESIGN 4.7): per application and ISO week over the last `weeks` weeks, the
    `per_week` scorable conversations with the smallest sha256(salt + external_id).

    The rule ignores usage and old scores on purpose: nobody can steer which conversations get a human
    look. Scorable here means the conversation's current review counts and was not `not_scorable`.
    """
    now = now or timezone.now()
    this_monday = (now - timedelta(days=now.isocalendar().weekday - 1)).replace(
        hour=0, minute=0, second=0, microsecond=0
    )
    since = this_monday - timedelta(weeks=weeks - 1)
    scorable = (
        current_conversation_reviews(org)
        .exclude(route__in=[Route.NOT_SCORABLE, Route.ERROR])
        .filter(conversation__started_at__gte=since, conversation__started_at__lte=now)
        .values_list("conversation__application", "conversation__started_at", "conversation__external_id")
    )
    cells: dict[tuple[str, int, int], list[tuple[str, str]]] = {}
    for application, started_at, external_id in scorable:
        year, week, _ = started_at.isocalendar()
        rank = hashlib.sha256((salt + external_id).encode()).hexdigest()
        cells.setdefault((application, year, week), []).append((rank, external_id))
    return [
        SampleCell(application, year, week, [external_id for _, external_id in sorted(ranked)[:per_week]])
        for (application, year, week), ranked in sorted(cells.items())
    ]


# --- drafts ----------------------------------------------------------------------------------------------


def current_draft_reviews(org: Org | None = None) -> QuerySet[Review]:
    """Draft reviews that count: the draft's latest, for its present content, under active criteria."""
    reviews = Review.objects.filter(kind=ItemKind.DRAFT, is_current=True)
    if org is not None:
        reviews = reviews.filter(org=org)
    return reviews.filter(fingerprint=F("draft__fingerprint"), criteria_version_id=_active_criteria_id(ItemKind.DRAFT))


def current_draft_review(draft: Draft) -> Review | None:
    return current_draft_reviews().filter(draft=draft).select_related("criteria_version").first()


def draft_status(draft: Draft) -> dict:
    """The pipeline's view of a draft: the API answer and the webhook body."""
    review = current_draft_review(draft)
    status = {"id": draft.pk, "external_id": draft.external_id, "run_id": draft.run_id or None, "route": "pending"}
    if review is None:
        return status | {"score": None, "sub_scores": None, "findings": [], "judge_issues": [], "repairs": None,
                         "identity": None, "decision": None}  # fmt: skip
    return status | {
        "route": review.route,
        "reason": review.reason,
        "score": review.score,
        "spread": review.spread,
        "sub_scores": review.sub_scores or None,
        "findings": review.findings,
        "judge_issues": review.judge_issues,
        "repairs": {"diff": review.repairs["diff"], "body": review.repairs["body"]} if review.repairs else None,
        "identity": {
            "fingerprint": review.fingerprint,
            "criteria_version": review.criteria_version.number,
            "judge": review.judge,
            "memory_snapshot": review.memory_snapshot,
            "judged_at": review.finished_at,
            "stages": review.stages,
        },
        "decision": _decision_of(review),
    }


def _decision_of(review: Review) -> dict | None:
    """The operator's decision on this review, read through the reverse relation of the people side's
    Decision model (grading never imports reviewer)."""
    decisions = getattr(review, "decisions", None)
    decision = decisions.select_related("decided_by").order_by("-decided_at").first() if decisions is not None else None
    if decision is None:
        return None
    return {
        "outcome": decision.outcome,
        "note": decision.note,
        "by": decision.decided_by.get_username() if decision.decided_by else None,
        "at": decision.decided_at,
    }

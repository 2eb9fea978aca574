"""Reads: what counts (through ReviewState), conversation state for the API, the staleness audit, the review
sample and the pipeline's view of a draft."""

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Count, F, Field
from django.utils import timezone

from grading import evidence
from grading.models import Conversation, Decision, Draft, ItemKind, Message, Org, Review, ReviewState, Route
from grading.weeks import monday, week_start


def quiet_period() -> timedelta:
    return timedelta(minutes=settings.CONVERSATION_QUIET_MINUTES)


def current_review(subject: Conversation | Draft) -> Review | None:
    """The subject's review that counts, if it has one."""
    field = "draft" if isinstance(subject, Draft) else "conversation"
    return Review.objects.counting().with_state().filter(**{field: subject}).select_related("criteria_version").first()


@dataclass(frozen=True)
class StalenessAudit:
    """The staleness audit (DESIGN 3), per kind.

    `stale`: items whose latest review stopped counting (their evidence or criteria changed) and wait to be
    graded again; zero once a grading pass has run and its tasks are done. `mismatched`: reviews the state
    says count although their fingerprint differs from the item's, found by comparing the columns directly
    rather than by asking the state; zero always, or the writes failed to keep the state true.
    """

    stale: dict[str, int]
    mismatched: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.stale.values()) + sum(self.mismatched.values())


def staleness_audit(org: Org | None = None) -> StalenessAudit:
    reviews = Review.objects.all() if org is None else Review.objects.filter(org=org)
    stale = dict(reviews.in_state(ReviewState.STALE).values_list("kind").annotate(n=Count("pk")))
    counting = reviews.counting()
    mismatched = {
        ItemKind.CONVERSATION: counting.filter(kind=ItemKind.CONVERSATION)
        .exclude(fingerprint=F("conversation__fingerprint"))
        .count(),
        ItemKind.DRAFT: counting.filter(kind=ItemKind.DRAFT).exclude(fingerprint=F("draft__fingerprint")).count(),
    }
    return StalenessAudit(stale={kind: stale.get(kind, 0) for kind in ItemKind.values}, mismatched=mismatched)


@dataclass(frozen=True)
class PathState:
    path: list[evidence.EvidenceMessage]
    not_scorable_reason: evidence.NotScorable | None


def conversation_path(
    conversation: Conversation, messages: list[evidence.EvidenceMessage] | None = None, now: datetime | None = None
) -> PathState:
    """The active path and whether it may be scored now: what grading judges and what the API reports."""
    if messages is None:
        messages = conversation_messages(conversation.pk)
    result = evidence.active_path(messages, conversation.active_message_id)
    reason = evidence.not_scorable_reason(
        result.path,
        closed=conversation.closed,
        last_activity=conversation.last_activity_at,
        now=now or timezone.now(),
        quiet_period=quiet_period(),
        path_problem=result.problem,
    )
    return PathState(result.path, reason)


def conversation_messages(conversation_id: int) -> list[evidence.EvidenceMessage]:
    """Every message of the conversation as evidence (`Message.as_evidence`), read as values: building a model
    instance per message would be most of the cost of reading a conversation for grading."""
    with connection.cursor() as cursor:
        cursor.execute(_MESSAGES_SQL, [conversation_id])
        rows = cursor.fetchall()
    return [evidence.EvidenceMessage(*as_python(_EVIDENCE_FIELDS, row)) for row in rows]


# Plain SQL: the ORM's values() read costs several times the CPU of the statement it sends, on every grading.
_EVIDENCE_FIELDS = [Message._meta.get_field(name) for name in Message.EVIDENCE_FIELDS]
_MESSAGES_SQL = f"""
    SELECT {", ".join(field.column for field in _EVIDENCE_FIELDS)} FROM grading_message WHERE conversation_id = %s
"""  # noqa: S608 - columns from the model


def as_python(fields: Sequence[Field], row: Sequence) -> list:
    """A row read by plain SQL, converted as the ORM converts those fields' columns (JSON decoded)."""
    return [
        field.from_db_value(value, None, connection) if value is not None and hasattr(field, "from_db_value") else value
        for field, value in zip(fields, row, strict=True)
    ]


@dataclass(frozen=True)
class ConversationState:
    conversation: Conversation
    path: list[evidence.EvidenceMessage]
    not_scorable_reason: evidence.NotScorable | None
    review: Review | None


def conversation_state(
    conversation: Conversation, messages: list[evidence.EvidenceMessage] | None = None, now: datetime | None = None
) -> ConversationState:
    path = conversation_path(conversation, messages, now)
    return ConversationState(conversation, path.path, path.not_scorable_reason, current_review(conversation))


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
        rank = hashlib.sha256((salt + external_id).encode()).hexdigest()
        cells.setdefault((application, monday(at)), []).append((rank, external_id, review_id))
    sample = []
    for (application, week), ranked in sorted(cells.items()):
        picked = sorted(ranked)[:per_week]
        sample.append(SampleCell(application, week, [e for _, e, _ in picked], [r for _, _, r in picked]))
    return sample


def sample_conversations(
    *, org: Org, per_week: int, weeks: int, salt: str, now: datetime | None = None
) -> list[SampleCell]:
    """Fixed-rule sampling (DESIGN 4.7): per application and ISO week over the last `weeks` weeks, the
    `per_week` scorable conversations with the smallest sha256(salt + external_id).

    The rule ignores usage and old scores on purpose: nobody can steer which conversations get a human
    look. Scorable here means the conversation's current review counts and was not `not_scorable`.
    """
    now = now or timezone.now()
    scorable = (
        Review.objects.counting()
        .filter(org=org, kind=ItemKind.CONVERSATION)
        .exclude(route__in=[Route.NOT_SCORABLE, Route.ERROR])
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
        .exclude(route__in=[Route.NOT_SCORABLE, Route.ERROR])
        .values_list("application", "finished_at", "draft__external_id", "pk")
    )
    return _smallest_hashes(judged, per_week=per_week, salt=salt)


# --- drafts ----------------------------------------------------------------------------------------------


def draft_status(draft: Draft) -> dict:
    """The pipeline's view of a draft: the API answer and the webhook body."""
    review = current_review(draft)
    status = {"id": draft.pk, "external_id": draft.external_id, "run_id": draft.run_id or None, "route": "pending"}
    if review is None:
        return status | {"score": None, "sub_scores": None, "findings": [], "judge_issues": [], "repairs": None,
                         "identity": None, "decision": None}  # fmt: skip
    return status | {
        "route": review.route,
        "reason": review.reason,
        "state": review.state_now,
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
    decision = Decision.objects.filter(review=review).select_related("decided_by").first()
    if decision is None:
        return None
    return {
        "outcome": decision.outcome,
        "note": decision.note,
        "by": decision.decided_by.get_username() if decision.decided_by else None,
        "at": decision.decided_at,
    }

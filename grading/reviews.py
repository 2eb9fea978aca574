"""Grading one conversation into a Review that names its evidence (DESIGN 3 and 4), and writing reviews
of either kind.

The judge is called outside any transaction; the review is written afterwards in one short atomic
block, and the identity constraint makes a second review of the same evidence impossible.
"""

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from grading import evidence
from grading.criteria import criteria_active
from grading.judge.backends import ConversationJudge, judge_from_settings
from grading.judge.client import ZERO_USAGE, JudgeError
from grading.judge.conversation import CHECKS, combine_stages, with_evidence_on_path
from grading.models import NO_JUDGE, Conversation, CriteriaVersion, Draft, ItemKind, Review, Route
from grading.otlp.export import evaluations_export_on_commit

logger = logging.getLogger(__name__)

NO_JUDGE_IDENTITY = {"backend": NO_JUDGE}


def quiet_period() -> timedelta:
    return timedelta(minutes=settings.CONVERSATION_QUIET_MINUTES)


def conversation_grade(
    *, conversation_id: int, judge: ConversationJudge | None = None, now: datetime | None = None
) -> Review | None:
    """Grade the conversation as it is now; return its review (an existing one when already graded).

    1. Read the messages and compute the active path, fingerprint and scorability.
    2. Skip the judge when a review of this exact identity exists (errors excepted: they are retried).
    3. Not scorable: record why, with no judge call. Otherwise judge each stage, outside any transaction.
    4. Write the review and make it the conversation's current one.
    """
    conversation = Conversation.objects.select_related("org").filter(pk=conversation_id).first()
    if conversation is None:
        return None
    criteria = criteria_active(org=conversation.org, kind=ItemKind.CONVERSATION)
    now = now or timezone.now()
    messages = [m.as_evidence() for m in conversation.messages.all()]
    result = evidence.active_path(messages, conversation.active_message_id)
    not_scorable = evidence.not_scorable_reason(
        result.path,
        closed=conversation.closed,
        last_activity=conversation.last_activity_at,
        now=now,
        quiet_period=quiet_period(),
        path_problem=result.problem,
    )
    judge = judge or judge_from_settings()
    identity = {
        "fingerprint": evidence.fingerprint(result.path),
        "criteria_version": criteria,
        "judge": NO_JUDGE_IDENTITY if not_scorable else judge.identity.as_json(),
        "judge_key": NO_JUDGE if not_scorable else judge.identity.key,
    }
    existing = review_with_identity(conversation, identity)
    if existing is not None:
        return existing
    if not_scorable:
        outcome = {
            "route": Route.NOT_SCORABLE,
            "reason": str(not_scorable),
            "detail": evidence.REASON_TEXT[not_scorable],
            "stages": 0,
        }
    else:
        outcome = _judge_path(result.path, criteria, judge)
    return review_record(conversation, identity, outcome, started_at=now)


def _judge_path(path: list[evidence.EvidenceMessage], criteria: CriteriaVersion, judge: ConversationJudge) -> dict:
    stages = evidence.stages(path, budget_chars=settings.JUDGE_INPUT_BUDGET_CHARS)
    path_ids = {m.id for m in path}
    per_stage = []
    usage = ZERO_USAGE
    for stage in stages:
        try:
            judgement = judge.judge_stage(
                rubric=criteria.rubric, criteria_number=criteria.number, stage=stage, stage_count=len(stages)
            )
        except JudgeError as exc:
            logger.warning("judge failed on stage %s of %s: %s", stage.index + 1, len(stages), exc)
            return {
                "route": Route.ERROR,
                "reason": type(exc).__name__,
                "detail": str(exc),
                "stages": len(stages),
                "usage": usage.as_json(),
            }
        usage = usage + judgement.usage
        per_stage.append(with_evidence_on_path(judgement.verdicts, path_ids))
    checks = combine_stages(per_stage)
    route, reason = _route(checks)
    return {"route": route, "reason": reason, "checks": checks, "stages": len(stages), "usage": usage.as_json()}


def _route(checks: dict[str, dict]) -> tuple[Route, str]:
    """Any unknown goes to humans; otherwise all pass is a pass and anything else a fail."""
    verdicts = [checks[name]["verdict"] for name in CHECKS]
    if "unknown" in verdicts:
        return Route.HUMAN, "unknown_check"
    if all(verdict == "pass" for verdict in verdicts):
        return Route.PASS, ""
    return Route.FAIL, ""


# The score identity fields that tell two reviews of one subject apart (the judge is compared by its key).
_IDENTITY_KEYS = ("fingerprint", "criteria_version", "judge_key", "memory_snapshot")


def review_with_identity(subject: Conversation | Draft, identity: dict) -> Review | None:
    """The finished, non-error review of `subject` with this score identity, if there is one."""
    match = {key: identity[key] for key in _IDENTITY_KEYS if key in identity}
    return Review.objects.filter(**{_subject_field(subject): subject}, **match).exclude(route=Route.ERROR).first()


def review_record(subject: Conversation | Draft, identity: dict, outcome: dict, *, started_at: datetime) -> Review:
    """Write a finished review as the subject's current one, in one short transaction.

    The subject's row lock serialises writers, so exactly one review ends up current. If another worker
    wrote this identity first (the same task delivered twice), the constraint refuses ours and theirs is kept.
    """
    field = _subject_field(subject)
    try:
        with transaction.atomic():
            type(subject).objects.select_for_update().filter(pk=subject.pk).first()
            Review.objects.filter(**{field: subject}, is_current=True).update(is_current=False)
            review = Review.objects.create(
                org=subject.org,
                kind=ItemKind.DRAFT if field == "draft" else ItemKind.CONVERSATION,
                **{field: subject},
                started_at=started_at,
                finished_at=timezone.now(),
                is_current=True,
                **identity,
                **outcome,
            )
            evaluations_export_on_commit(review_id=review.pk)
            return review
    except IntegrityError:
        return review_with_identity(subject, identity)


def _subject_field(subject: Conversation | Draft) -> str:
    return "draft" if isinstance(subject, Draft) else "conversation"

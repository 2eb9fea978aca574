"""Grading one conversation into a Review that names its evidence (DESIGN 3 and 4), and writing reviews
of either kind.

The judge is called outside any transaction; the review is written afterwards in one short atomic
block, and the identity constraint makes a second review of the same evidence impossible.
"""

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from grading import evidence
from grading.criteria import criteria_active
from grading.judge.backends import ConversationJudge, judge_from_settings
from grading.judge.client import ZERO_USAGE, JudgeContextExceeded, JudgeError
from grading.judge.conversation import CHECKS, combine_stages, with_evidence_on_path
from grading.models import NO_JUDGE, Conversation, CriteriaVersion, Draft, ItemKind, Review, Route

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
    """Judge the path in stages that fit the judge's context, and combine the stages' verdicts.

    1. Stage the path to the judge's budget, counted in its tokens (`judge.stage_budget`, `judge.measure`).
       A message that cannot fit even alone makes the conversation not scorable by this judge: evidence is
       never cut, and sending it would be refused on every pass.
    2. Judge each stage. A context-length refusal has taught the judge its real window and token counts, so
       stage again, smaller, and start over (at most _RESTAGINGS times); any other judge error is an `error`.
    3. While waiting on the judge this thread holds no database connection when a pool can lend it back.
    """
    path_ids = {m.id for m in path}
    usage = ZERO_USAGE
    stages: list[evidence.Stage] = []
    for _ in range(_RESTAGINGS + 1):
        budget = judge.stage_budget(rubric=criteria.rubric, criteria_number=criteria.number)
        stages = evidence.stages(path, budget=budget, measure=judge.measure)
        if oversized := next((stage for stage in stages if stage.oversized), None):
            return _too_long(oversized, budget, len(stages), usage)
        per_stage = []
        _release_database_connection()
        try:
            for stage in stages:
                judgement = judge.judge_stage(
                    rubric=criteria.rubric, criteria_number=criteria.number, stage=stage, stage_count=len(stages)
                )
                usage = usage + judgement.usage
                per_stage.append(with_evidence_on_path(judgement.verdicts, path_ids))
        except JudgeContextExceeded as exc:
            logger.info("judge refused a stage of %s as too long (%s); staging again", len(stages), exc)
            continue
        except JudgeError as exc:
            logger.warning("judge failed on a stage of %s: %s", len(stages), exc)
            return {
                "route": Route.ERROR,
                "reason": type(exc).__name__,
                "detail": str(exc),
                "stages": len(stages),
                "usage": usage.as_json(),
            }
        checks = combine_stages(per_stage)
        route, reason = _route(checks)
        return {"route": route, "reason": reason, "checks": checks, "stages": len(stages), "usage": usage.as_json()}
    detail = f"the judge refused stages as too long {_RESTAGINGS + 1} times, the last staging had {len(stages)}"
    return {
        "route": Route.ERROR,
        "reason": "JudgeContextExceeded",
        "detail": detail,
        "stages": len(stages),
        "usage": usage.as_json(),
    }


# A refusal teaches the judge the server's figures, so one re-staging nearly always fits; a few more allow for
# a server whose error states no figures (each refusal then still raises the token estimate a little).
_RESTAGINGS = 3


def _too_long(stage: evidence.Stage, budget: int, stage_count: int, usage) -> dict:
    [message] = stage.messages
    reason = evidence.NotScorable.TOO_LONG_FOR_JUDGE
    return {
        "route": Route.NOT_SCORABLE,
        "reason": str(reason),
        "detail": f"{evidence.REASON_TEXT[reason]} Message {message.id!r} needs more than the {budget} tokens "
        f"a stage may carry.",
        "stages": stage_count,
        "usage": usage.as_json(),
    }


def _release_database_connection() -> None:
    """Hand this thread's database connection back to the pool before a long wait on the judge, so a worker's
    threads need only as many connections as are touching the database at once, not one each. Only with a
    connection pool (without one, closing means reconnecting afterwards) and never inside a transaction."""
    if connection.settings_dict.get("OPTIONS", {}).get("pool") and not connection.in_atomic_block:
        connection.close()


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
            return Review.objects.create(
                org=subject.org,
                kind=ItemKind.DRAFT if field == "draft" else ItemKind.CONVERSATION,
                **{field: subject},
                started_at=started_at,
                finished_at=timezone.now(),
                is_current=True,
                **identity,
                **outcome,
            )
    except IntegrityError:
        return review_with_identity(subject, identity)


def _subject_field(subject: Conversation | Draft) -> str:
    return "draft" if isinstance(subject, Draft) else "conversation"

"""Grading one conversation into a Review that names its evidence: read the active path, judge
each stage outside any transaction, then write the review (grading/reviews/services.py) in one short atomic block."""

import logging
from datetime import datetime

from django.conf import settings
from django.db import connection
from django.utils import timezone

from grading.certify.routing import certified_route
from grading.checks.answers import machine_outcome
from grading.checks.budget import ChecksOverBudget, checks_budget
from grading.checks.conversation_rules import RuledCheck, lowered, rule_failed_required, rules_run
from grading.checks.definitions import UNKNOWN, CheckSet
from grading.checks.routing import judge_sampled, routing_salt
from grading.core import evidence, evidence_text
from grading.core.evidence import Verdict
from grading.core.outcomes import CHECKS_BUDGET, JUDGE_UNKNOWN, UNKNOWN_CHECK
from grading.judge.backends import ConversationJudge, UnknownJudge, judge_named
from grading.judge.client import ZERO_USAGE, JudgeContextExceeded, JudgeError, Usage
from grading.judge.confidence import LOGPROBS, confidence_source, kept_confidences
from grading.judge.conversation import combine_stage_confidences, combine_stages, with_evidence_on_path
from grading.judge.examples import PromptExample
from grading.models import (
    COUNTING_STATES,
    NO_JUDGE,
    Conversation,
    CriteriaVersion,
    Review,
    Route,
)
from grading.reviews.conversation_reads import PathState, conversation_path
from grading.reviews.examples import version_examples, version_fingerprint
from grading.reviews.services import (
    ReviewOutcome,
    ScoreIdentity,
    criteria_of,
    earlier_review,
    published_check_set,
    review_record,
    review_reinstate,
)
from grading.reviews.spend import spend_blocked
from grading.reviews.sql import subject_to_grade

logger = logging.getLogger(__name__)

NO_JUDGE_IDENTITY = {"backend": NO_JUDGE}


def conversation_grade(
    *, conversation_id: int, judge: ConversationJudge | None = None, now: datetime | None = None, ticket: str = ""
) -> Review | None:
    """Grade the conversation as it is now; return its review (an existing one when already graded). A grading
    task names itself as `ticket`: its ticket is handed back with the review it writes (`review_record`).

    1. Read the messages and compute the active path, fingerprint and scorability.
    2. The judge is the criteria version's (unless the caller passes one); a version naming a judge no longer
       configured gets an error review (`judge_unknown`, no judge call) that the next pass tries again.
       Skip the judge when a review of this exact identity exists (errors excepted: they are retried).
    3. Not scorable, or outside the share of its slice the version's judge grades (judge sampling,
       grading/checks/routing.py): record why, with no judge call. A spend cap of the org or the version is reached
       (grading/reviews/spend.py): write nothing and return None, so the task hands the ticket back and the item
       waits for the next pass. Otherwise judge each stage, outside any transaction.
    4. Under a version with a certification target, route by its certificate (grading/certify/routing.py).
    5. Write the review and make it the conversation's current one.
    """
    conversation = subject_to_grade(Conversation, conversation_id)
    if conversation is None:
        return None
    criteria = criteria_of(conversation)
    now = now or timezone.now()
    state = conversation_path(conversation, conversation.evidence_messages, now=now)
    try:
        judge = judge or judge_named(criteria.judge)
    except UnknownJudge as unknown:
        identity = path_identity(state, criteria, None)
        outcome = judge_unknown_outcome(unknown)
        return review_record(subject=conversation, identity=identity, outcome=outcome, started_at=now, ticket=ticket)
    sampled = judge_sampled(
        criteria.judge_sample,
        metadata=conversation.metadata,
        external_id=conversation.external_id,
        salt=routing_salt(conversation.org_id),
    )
    identity = path_identity(state, criteria, judge, sampled=sampled)
    existing = earlier_review(subject=conversation, identity=identity)
    if existing is not None:
        return existing if existing.state in COUNTING_STATES else review_reinstate(review=existing)
    if state.not_scorable_reason:
        outcome = not_scorable_outcome(state.not_scorable_reason)
    elif not sampled:
        outcome = not_scorable_outcome(evidence.NotScorable.OUTSIDE_JUDGE_SAMPLE)
    elif spend_blocked(conversation.org_id, criteria, caps=conversation.spend_caps) is not None:
        return None  # no judge call past a spend cap: the item stays owed, waiting with the reason spend_cap
    else:
        outcome = path_outcome(state.path, criteria, judge)
        outcome = certified_route(outcome, version=criteria, judge_key=identity.judge_key)
    return review_record(subject=conversation, identity=identity, outcome=outcome, started_at=now, ticket=ticket)


def path_identity(
    state: PathState,
    criteria: CriteriaVersion,
    judge: ConversationJudge | None,
    examples: tuple[PromptExample, ...] | None = None,
    *,
    sampled: bool = True,
) -> ScoreIdentity:
    """The score identity of a review of the active path under `criteria` (no judge when it is not scorable or not
    `sampled` for the judge, or when `judge` is None: the version's judge is not configured)."""
    if judge is None:
        judge_json, judge_key = NO_JUDGE_IDENTITY | {"name": criteria.judge}, NO_JUDGE
    elif state.not_scorable_reason or not sampled:
        judge_json, judge_key = NO_JUDGE_IDENTITY, NO_JUDGE
    else:
        judge_json, judge_key = judge.identity.as_json(), judge.identity.key
    return ScoreIdentity(
        fingerprint=evidence.fingerprint(state.path),
        criteria_version=criteria,
        judge=judge_json,
        judge_key=judge_key,
        criteria_fingerprint=version_fingerprint(criteria, examples),
    )


def judge_unknown_outcome(unknown: UnknownJudge) -> ReviewOutcome:
    """The outcome of grading under a version whose judge is not configured: an error, with no judge call."""
    return ReviewOutcome(route=Route.ERROR, reason=JUDGE_UNKNOWN, detail=str(unknown))


def not_scorable_outcome(reason: evidence.NotScorable) -> ReviewOutcome:
    return ReviewOutcome(route=Route.NOT_SCORABLE, reason=str(reason), detail=evidence.REASON_TEXT[reason])


def path_outcome(
    path: list[evidence.EvidenceMessage],
    criteria: CriteriaVersion,
    judge: ConversationJudge,
    examples: tuple[PromptExample, ...] | None = None,
) -> ReviewOutcome:
    """Run the version's rules on a scorable path, judge it under `criteria` in stages that fit the judge's context,
    combine the stages' answers and lower them by what the rules found: the review's outcome. Grading records it as
    the conversation's review; a criteria trial as a trial review.

    1. Run the rules of the version's checks, under the checks' CPU budget (past it: an `error`, no judge call).
       When a rule has failed a required check and the version does not ask the judge then
       (`judge_after_rule_fail`), the outcome is the rules' alone.
    2. Stage the path to the judge's budget, counted in its tokens (`judge.stage_budget`, `judge.measure`).
       A message that cannot fit even alone makes the conversation not scorable by this judge: evidence is
       never cut, and sending it would be refused on every pass.
    3. Judge each stage. A context-length refusal has taught the judge its real window and token counts, so
       stage again, smaller, and start over (at most _RESTAGINGS times); any other judge error is an `error`.
    4. A check a rule matched is lowered to what the rule sets, never raised (conversation_rules.lowered).
    5. While waiting on the judge this thread holds no database connection when a pool can lend it back.
    """
    checks = published_check_set(criteria)
    try:
        with checks_budget(settings.CHECKS_CPU_BUDGET_SECONDS):
            ruled = rules_run(checks, path)
    except ChecksOverBudget as exc:
        logger.warning("rules of a conversation stopped: %s", exc)
        detail = f"{exc} ({settings.CHECKS_CPU_BUDGET_SECONDS:g} s, CHECKS_CPU_BUDGET_SECONDS)"
        return ReviewOutcome(route=Route.ERROR, reason=CHECKS_BUDGET, detail=detail)
    if not checks.judge_after_rule_fail and rule_failed_required(checks, ruled):
        return _checked_outcome(checks, None, ruled, stages=0, usage=ZERO_USAGE)
    path_ids = {m.id for m in path}
    examples = version_examples(criteria) if examples is None else examples
    usage = ZERO_USAGE
    stages: list[evidence_text.Stage] = []
    for _ in range(_RESTAGINGS + 1):
        budget, stages = path_stages(path, criteria, judge, examples)
        if oversized := next((stage for stage in stages if stage.oversized), None):
            return _too_long(oversized, budget, len(stages), usage)
        per_stage = []
        per_stage_confidences = []
        source = LOGPROBS
        _release_database_connection()
        try:
            for stage in stages:
                judgement = judge.judge_stage(
                    rubric=criteria.rubric,
                    criteria_number=criteria.number,
                    checks=checks,
                    stage=stage,
                    stage_count=len(stages),
                    examples=examples,
                )
                usage = usage + judgement.usage
                checked = with_evidence_on_path(judgement.verdicts, checks, path_ids)
                per_stage.append(checked)
                # An answer downgraded for want of evidence is not the judge's: it has no confidence.
                judged = _verdicts(judgement.verdicts)
                per_stage_confidences.append(
                    kept_confidences(judgement.confidences, judged=judged, stored=_verdicts(checked))
                )
                source = judgement.confidence_source
        except JudgeContextExceeded as exc:
            logger.info("judge refused a stage of %s as too long (%s); staging again", len(stages), exc)
            continue
        except JudgeError as exc:
            logger.warning("judge failed on a stage of %s: %s", len(stages), exc)
            return ReviewOutcome(
                route=Route.ERROR,
                reason=type(exc).__name__,
                detail=str(exc),
                stages=len(stages),
                usage=usage.as_json(),
            )
        combined = combine_stages(per_stage, checks)
        confidences = combine_stage_confidences(per_stage, per_stage_confidences, combined, checks)
        return _checked_outcome(
            checks, combined, ruled, stages=len(stages), usage=usage, confidences=confidences, source=source
        )
    detail = f"the judge refused stages as too long {_RESTAGINGS + 1} times, the last staging had {len(stages)}"
    return ReviewOutcome(
        route=Route.ERROR,
        reason="JudgeContextExceeded",
        detail=detail,
        stages=len(stages),
        usage=usage.as_json(),
    )


def path_stages(
    path: list[evidence.EvidenceMessage],
    criteria: CriteriaVersion,
    judge: ConversationJudge,
    examples: tuple[PromptExample, ...] | None = None,
) -> tuple[int, list[evidence_text.Stage]]:
    """The stages `judge` reads the path in under `criteria` (its token budget per stage, and the stages): what
    grading sends, and what a trial counts before it spends anything."""
    budget = judge.stage_budget(
        rubric=criteria.rubric,
        criteria_number=criteria.number,
        checks=published_check_set(criteria),
        examples=version_examples(criteria) if examples is None else examples,
    )
    return budget, evidence_text.stages(path, budget=budget, measure=judge.measure)


# A refusal teaches the judge the server's figures, so one re-staging nearly always fits; a few more allow for
# a server whose error states no figures (each refusal then still raises the token estimate a little).
_RESTAGINGS = 3


def _too_long(stage: evidence_text.Stage, budget: int, stage_count: int, usage) -> ReviewOutcome:
    [message] = stage.messages
    reason = evidence.NotScorable.TOO_LONG_FOR_JUDGE
    return ReviewOutcome(
        route=Route.NOT_SCORABLE,
        reason=str(reason),
        detail=f"{evidence.REASON_TEXT[reason]} Message {message.id!r} needs more than the {budget} tokens "
        f"a stage may carry.",
        stages=stage_count,
        usage=usage.as_json(),
    )


def _release_database_connection() -> None:
    """Hand this thread's database connection back to the pool before a long wait on the judge, so a worker's
    threads need only as many connections as are touching the database at once, not one each. Only with a
    connection pool (without one, closing means reconnecting afterwards) and never inside a transaction."""
    if connection.settings_dict.get("OPTIONS", {}).get("pool") and not connection.in_atomic_block:
        connection.close()


_UNASKED = {
    "verdict": UNKNOWN,
    "message_ids": [],
    "rationale": "Not asked: a rule failed a required check, and this version does not ask the judge then.",
}


def _checked_outcome(
    checks: CheckSet,
    judged: dict[str, dict] | None,
    ruled: dict[str, RuledCheck],
    *,
    stages: int,
    usage: Usage,
    confidences: dict[str, float] | None = None,
    source: str = LOGPROBS,
) -> ReviewOutcome:
    """The review's outcome from the judge's answers (None: the judge was not asked) lowered by the rules: the checks
    in the version's order, each a rule matched with its findings first. The judge's `confidences` stand for the
    answers a rule left as the judge gave them."""
    answers = {}
    for key in checks.keys:
        answer = judged[key] if judged is not None else None
        if key in ruled:
            answers[key] = lowered(checks[key], answer, ruled[key])
        else:
            answers[key] = answer if answer is not None else dict(_UNASKED)
    route, reason = _route(checks, answers, judge_asked=judged is not None)
    kept = kept_confidences(confidences or {}, judged=_verdicts(judged or {}), stored=_verdicts(answers))
    return ReviewOutcome(
        route=route,
        reason=reason,
        checks=answers,
        stages=stages,
        usage=usage.as_json(),
        confidences=kept,
        confidence_source=confidence_source(kept, source),
    )


def _verdicts(answers: dict[str, dict]) -> dict[str, str]:
    return {key: answer["verdict"] for key, answer in answers.items()}


def _route(checks: CheckSet, answers: dict[str, dict], *, judge_asked: bool) -> tuple[Route, str]:
    """The item's route from what the machine's answers come to (`machine_outcome`)."""
    verdicts = {key: answer["verdict"] for key, answer in answers.items()}
    outcome = machine_outcome(checks, verdicts, judge_asked=judge_asked)
    if outcome == Verdict.UNKNOWN:
        return Route.HUMAN, UNKNOWN_CHECK
    return (Route.FAIL, "") if outcome == Verdict.FAIL else (Route.PASS, "")

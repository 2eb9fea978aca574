"""The draft gate: deterministic checks and repairs, org memory, the judge, then the merge.

The model never gets the last word on facts: remaining findings are listed first, each takes a point off,
and a draft with any remaining finding cannot pass. Uncertain outcomes go to humans.
"""

import logging
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from grading.certify.routing import certified_route
from grading.checks.answers import item_outcome
from grading.checks.budget import ChecksOverBudget, checks_budget
from grading.checks.checks import PROOF_POINT_MISSING, Finding, check_draft
from grading.checks.definitions import UNKNOWN, AnswerKind, CheckSet
from grading.checks.repairs import repair_draft
from grading.checks.rules import DraftRules
from grading.core.evidence import Verdict, draft_fingerprint
from grading.core.outcomes import BAND, CHECKS_BUDGET, JUDGE_CONTRADICTION, JUDGE_UNKNOWN, SPREAD, UNKNOWN_CHECK
from grading.delivery import enqueue
from grading.drafts.corrections import corrected_review_record, correction_awaiting, correction_route
from grading.judge.backends import DraftJudge, DraftJudgement, DraftPrompt, UnknownJudge, draft_judge_named
from grading.judge.client import JudgeError
from grading.judge.confidence import confidence_source, kept_confidences, verdict_confidence
from grading.judge.examples import PromptExample
from grading.models import COUNTING_STATES, NO_JUDGE, Correction, CriteriaVersion, Draft, Label, Review, Route
from grading.reviews.examples import version_examples, version_fingerprint
from grading.reviews.memory import MemoryContext, related_articles, retrieve_memory
from grading.reviews.services import (
    ReviewOutcome,
    ScoreIdentity,
    criteria_of,
    earlier_review,
    published_check_set,
    published_draft_rules,
    review_record,
    review_reinstate,
)
from grading.reviews.spend import spend_blocked
from grading.reviews.sql import subject_to_grade

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Merged:
    score: float
    route: str  # pass | fail | human
    reason: str  # why humans: band | judge_contradiction | spread; "" otherwise


def merge_verdict(
    *,
    judge_score: float,
    judge_passed: bool,
    spread: float | None,
    findings: list[Finding],
    threshold: float,
    band: float,
) -> Merged:
    """Merge the judge's verdict with the remaining findings.

    1. The score drops by one per remaining finding, floored at 1.
    2. Any remaining finding fails the draft: facts veto the model, whatever it said.
    3. Without findings, humans decide when the score sits in the marginal band [threshold - band, threshold),
       when the judge contradicts itself (its pass verdict against its own number), or when the score's
       spread straddles the threshold.
    4. Otherwise pass at or above the threshold, fail below.
    """
    score = max(1.0, judge_score - len(findings))
    if findings:
        return Merged(score, "fail", "")
    if threshold - band <= score < threshold:
        return Merged(score, "human", BAND)
    if judge_passed != (judge_score >= threshold):
        return Merged(score, "human", JUDGE_CONTRADICTION)
    if spread is not None and judge_score - spread < threshold <= judge_score + spread:
        return Merged(score, "human", SPREAD)
    return Merged(score, "pass" if score >= threshold else "fail", "")


def draft_grade(*, draft_id: int, judge: DraftJudge | None = None, ticket: str = "") -> Review | None:
    """Grade the draft as it is now; return its review (the existing one when this identity was graded). A grading
    task names itself as `ticket`: its ticket is handed back with the review it writes (`review_record`).

    1. Read the active criteria and the org memory (learnings by similarity, strategy, facts).
    2. Skip everything when a review of this identity exists (errors excepted: they are retried). A spend cap
       of the org or the version is reached: write nothing and return None (the draft waits with `spend_cap`).
    3. Check the draft; patch fixable findings and check the repaired body again.
    4. Ask the judge about the body as it would be published (outside any transaction).
    5. Merge; under a version with a certification target, route by its certificate (grading/certify/routing.py).
       A revision a person approved as corrected goes to people (grading/drafts/corrections.py).
    6. Write the review as the draft's current one (settling that correction with it), and tell the pipeline after
       commit.
    """
    draft = subject_to_grade(Draft, draft_id)
    if draft is None:
        return None
    criteria = criteria_of(draft)
    memory = retrieve_memory(org=draft.org, text=f"{draft.title}\n{draft.body}")
    try:
        judge = judge or draft_judge_named(criteria.judge)
    except UnknownJudge as unknown:  # an error with no judge call; the next pass tries again
        outcome = ReviewOutcome(route=Route.ERROR, reason=JUDGE_UNKNOWN, detail=str(unknown),
                                memory_used=memory.as_json())  # fmt: skip
        return _draft_review_record(draft, draft_identity(draft, criteria, memory, None), outcome, ticket=ticket)
    identity = draft_identity(draft, criteria, memory, judge)
    existing = earlier_review(subject=draft, identity=identity)
    if existing is not None:
        return existing if existing.state in COUNTING_STATES else review_reinstate(review=existing)
    if spend_blocked(draft.org_id, criteria) is not None:
        return None  # no judge call past a spend cap: the draft stays owed, waiting with the reason spend_cap
    started_at = timezone.now()
    outcome = draft_outcome(draft=draft, criteria=criteria, memory=memory, judge=judge)
    outcome = certified_route(outcome, version=criteria, judge_key=identity.judge_key)
    correction = correction_awaiting(draft)
    if correction is not None:
        outcome = correction_route(outcome)
    return _draft_review_record(draft, identity, outcome, started_at=started_at, ticket=ticket, correction=correction)


def _draft_review_record(
    draft: Draft,
    identity: ScoreIdentity,
    outcome: ReviewOutcome,
    *,
    started_at: datetime | None = None,
    ticket: str,
    correction: Correction | None = None,
) -> Review | None:
    """Write the draft's review as its current one (settling the `correction` it graded) and tell the pipeline after
    commit (None: the draft was erased while it was graded, and nothing is written or told)."""
    started_at = started_at or timezone.now()

    def record() -> Review | None:
        return review_record(subject=draft, identity=identity, outcome=outcome, started_at=started_at, ticket=ticket)

    review = corrected_review_record(record, correction=correction)
    if review is not None and review.state in COUNTING_STATES and draft.callback_url:
        transaction.on_commit(lambda: enqueue.webhook_delivery(review_id=review.pk, event=enqueue.MACHINE_VERDICT))
    return review


def draft_identity(
    draft: Draft,
    criteria: CriteriaVersion,
    memory: MemoryContext,
    judge: DraftJudge | None,
    examples: tuple[PromptExample, ...] | None = None,
) -> ScoreIdentity:
    """The score identity of a review of the draft as it is now, under `criteria`, with `memory` (no judge when
    `judge` is None: the version's judge is not configured)."""
    if judge is None:
        judge_json, judge_key = {"backend": NO_JUDGE, "name": criteria.judge}, NO_JUDGE
    else:
        judge_json, judge_key = judge.identity.as_json(), judge.identity.key
    return ScoreIdentity(
        fingerprint=draft_fingerprint(title=draft.title, body=draft.body, source_urls=draft.source_urls),
        criteria_version=criteria,
        judge=judge_json,
        judge_key=judge_key,
        memory_snapshot=memory.snapshot_hash,
        criteria_fingerprint=version_fingerprint(criteria, examples),
    )


def draft_outcome(
    *,
    draft: Draft,
    criteria: CriteriaVersion,
    memory: MemoryContext,
    judge: DraftJudge,
    examples: tuple[PromptExample, ...] | None = None,
) -> ReviewOutcome:
    """What grading `draft` under `criteria` comes to, as a review's outcome: check, repair and check again,
    ask the judge about the body as it would be published (call it outside any transaction), merge. The gate
    records it as the draft's review; a criteria trial records it as a trial review."""
    rules = published_draft_rules(criteria)
    try:
        with checks_budget(settings.CHECKS_CPU_BUDGET_SECONDS):
            checked = _check_and_repair(draft, rules, memory.proof_terms)
    except ChecksOverBudget as exc:
        logger.warning("checks of draft %s stopped: %s", draft.pk, exc)
        detail = f"{exc} ({settings.CHECKS_CPU_BUDGET_SECONDS:g} s, CHECKS_CPU_BUDGET_SECONDS)"
        return ReviewOutcome(route=Route.ERROR, reason=CHECKS_BUDGET, detail=detail, memory_used=memory.as_json())
    checks = published_check_set(criteria)
    prompt = DraftPrompt(
        rubric=criteria.rubric,
        criteria_number=criteria.number,
        rules=rules,
        checks=checks,
        examples=version_examples(criteria) if examples is None else examples,
        strategy=memory.strategy.text if memory.strategy else None,
        learnings=[item.text for item in memory.learnings],
        facts=[item.text for item in memory.facts],
        proof_terms=memory.proof_terms,
        title=draft.title,
        body=checked.body,
    )
    try:
        judgement = judge.judge_draft(prompt=prompt)
    except JudgeError as exc:
        logger.warning("draft judge failed for draft %s: %s", draft.pk, exc)
        return ReviewOutcome(
            route=Route.ERROR,
            reason=type(exc).__name__,
            detail=str(exc),
            stages=1,
            findings=[f.as_json() for f in checked.findings],
            repairs=checked.repairs,
            memory_used=memory.as_json(),
        )
    return _judged_outcome(judgement, checked, rules, checks, memory)


@dataclass(frozen=True)
class Checked:
    body: str  # the body the judge reads: repaired when repairs applied
    findings: list[Finding]  # what remains after repairs
    repairs: dict | None


def _check_and_repair(draft: Draft, rules: DraftRules, proof_terms: list[str]) -> Checked:
    def check(body: str) -> list[Finding]:
        return check_draft(body=body, rules=rules, source_urls=draft.source_urls, proof_terms=proof_terms)

    findings = check(draft.body)
    if not any(f.severity == "fixable" and rules.repair.allows(f.code) for f in findings):
        return Checked(draft.body, findings, None)

    def siblings(body: str, *, limit: int, exclude: frozenset[str]) -> list[tuple[str, str]]:
        return related_articles(org=draft.org, text=body, limit=limit, exclude_slugs=exclude)

    repair = repair_draft(
        body=draft.body, findings=findings, rules=rules, related_articles=siblings, draft_slug=draft.slug
    )
    if not repair.applied:
        return Checked(draft.body, findings, None)
    repairs = {
        "diff": repair.diff,
        "body": repair.body,
        "applied": [{"code": r.code, "description": r.description} for r in repair.applied],
        "skipped": [{"code": r.code, "reason": r.reason} for r in repair.skipped],
    }
    return Checked(repair.body, check(repair.body), repairs)


def _judged_outcome(
    judgement: DraftJudgement, checked: Checked, rules: DraftRules, checks: CheckSet, memory: MemoryContext
) -> ReviewOutcome:
    """The judge's answer merged with the findings left (`merge_verdict`), then with the version's required checks:
    one that reads as fail fails the draft, one that reads as unknown sends a draft that would pass to people."""
    findings = checked.findings
    sub_scores = {
        check.key: judgement.answers[check.key]
        for check in checks.checks
        if check.kind == AnswerKind.SCORE and isinstance(judgement.answers[check.key], int)
    }
    if "org_fit" in sub_scores and any(f.code == PROOF_POINT_MISSING for f in findings):
        sub_scores["org_fit"] = 1  # facts exist and none is referenced: the judge cannot call that a fit
    answers = {
        check.key: _quoted(judgement.answers[check.key], checked.body)
        for check in checks.checks
        if check.kind != AnswerKind.SCORE
    }
    merged = merge_verdict(
        judge_score=judgement.score,
        judge_passed=judgement.passed,
        spread=judgement.spread,
        findings=findings,
        threshold=rules.threshold,
        band=rules.band,
    )
    route, reason = _required_checks_route(merged, checks, sub_scores, answers)
    confidences = _confidences(judgement, rules, sub_scores, answers)
    return ReviewOutcome(
        route=route,
        reason=reason,
        stages=1,
        usage=judgement.usage.as_json(),
        score=merged.score,
        judge_score=judgement.score,
        judge_passed=judgement.passed,
        spread=judgement.spread,
        sub_scores=sub_scores,
        checks=answers,
        findings=[f.as_json() for f in findings],
        judge_issues=[issue.model_dump() for issue in judgement.issues[: rules.max_judge_issues]],
        repairs=checked.repairs,
        memory_used=memory.as_json(),
        confidences=confidences,
        confidence_source=confidence_source(confidences, judgement.confidence_source),
    )


def _confidences(
    judgement: DraftJudgement, rules: DraftRules, sub_scores: dict[str, int], answers: dict[str, dict]
) -> dict[str, float]:
    """How sure the judge was: of each check's answer that stands as it gave it (not one `_quoted` downgraded, nor
    a sub-score the findings corrected), and of its verdict (`pass_fail`, by its overall score's distribution, the
    judge's own even where findings decided the draft)."""
    judged = {key: a["verdict"] if isinstance(a, dict) else a for key, a in judgement.answers.items()}
    stored = sub_scores | {key: answer["verdict"] for key, answer in answers.items()}
    confidences = kept_confidences(judgement.confidences, judged=judged, stored=stored)
    verdict = verdict_confidence(judgement.distribution, threshold=rules.threshold, passed=judgement.passed)
    if verdict is not None:
        confidences[Label.PASS_FAIL] = verdict
    return confidences


def _quoted(answer: dict, body: str) -> dict:
    """A verdict or category check's answer about the draft; one other than unknown that quotes nothing of the draft
    becomes unknown, as a conversation's that cites no message on its path does."""
    text = _folded(body)
    quotes = list(dict.fromkeys(answer["quotes"]))
    missing = [quote for quote in quotes if not _folded(quote) or _folded(quote) not in text]
    verdict, rationale = answer["verdict"], answer["rationale"]
    if verdict != UNKNOWN and (not quotes or missing):
        why = "quotes nothing of the draft" if not quotes else "a quote is not in the draft"
        rationale = f"[downgraded from {verdict}: {why}] {rationale}"
        verdict = UNKNOWN
    return {"verdict": verdict, "quotes": [quote for quote in quotes if quote not in missing], "rationale": rationale}


def _folded(text: str) -> str:
    return " ".join(text.split()).casefold()


def _required_checks_route(
    merged: Merged, checks: CheckSet, sub_scores: dict[str, int], answers: dict[str, dict]
) -> tuple[str, str]:
    """The merged route, lowered by the version's required checks as people's answers come to (`item_outcome`; a draft
    version of today requires none)."""
    given = {key: answer["verdict"] for key, answer in answers.items()}
    scores = [check.key for check in checks.checks if check.kind == AnswerKind.SCORE]
    given |= {key: str(sub_scores.get(key, UNKNOWN)) for key in scores}
    outcome = item_outcome(checks, given)
    if merged.route == "fail" or outcome == Verdict.FAIL:
        return "fail", ""
    if merged.route == "pass" and outcome == Verdict.UNKNOWN:
        return "human", UNKNOWN_CHECK
    return merged.route, merged.reason

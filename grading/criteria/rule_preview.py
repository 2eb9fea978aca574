"""The preview of a conversation version: the rules of its checks over the org's most recent conversations, against
their current reviews, read before anyone pays for a judge call. No judge is called and nothing is written.

A rule only lowers what the judge says (grading/checks/conversation_rules.py), so what a preview can tell without the
judge is the least a version's rules do to a conversation: a required check a rule fails whatever the judge answers
fails the conversation; one a rule makes unknown sends it to people at best. Everything else is the judge's to say,
which a trial run measures.
"""

import time
from dataclasses import dataclass

from django.conf import settings

from grading.checks.answers import machine_outcome
from grading.checks.budget import ChecksOverBudget, checks_budget
from grading.checks.conversation_rules import RuledCheck, lowered_answer, rule_failed_required, rules_run
from grading.checks.definitions import UNKNOWN, AnswerKind, CheckDefinition, CheckSet
from grading.core.evidence import Verdict
from grading.models import Conversation, CriteriaVersion, Review, Route
from grading.reviews.conversation_reads import conversation_path

PREVIEW_CHUNK = 200  # conversations read at once (each path is read on its own)


@dataclass(frozen=True)
class RuleMatch:
    """What the rules of one check found on a conversation's path."""

    key: str
    name: str
    sets: str  # what the rules set: fail | unknown
    findings: list[dict]  # {"rule", "message_id", "text"}, in rule order
    notes: list[str]
    answer_now: str | None  # the current review's answer to the check, if it asked it


@dataclass(frozen=True)
class RulePreviewRow:
    conversation: Conversation
    review: Review | None  # the current review, if any
    matches: list[RuleMatch]
    route_after: str  # fail, human (at best), or "" when the judge decides

    @property
    def route_before(self) -> str:
        return self.review.route if self.review is not None else ""


@dataclass(frozen=True)
class RulePreview:
    version: CriteriaVersion
    asked: int  # the N of "the last N conversations"
    read: int
    checked: int  # of those, scorable paths the rules ran on
    rows: list[RulePreviewRow]  # the conversations a rule matched, newest first
    unchecked: int = 0  # paths past a CPU budget: not checked after all

    @property
    def rules(self) -> int:
        return sum(len(check.rules) for check in self.version.check_set().checks)


def rules_preview(*, version: CriteriaVersion, limit: int) -> RulePreview:
    """Run the rules of `version`'s checks over the org's last `limit` conversations (by activity).

    1. Read the conversations newest first, PREVIEW_CHUNK at a time, with their current reviews; then each one's
       active path. A path that may not be scored yet (in progress, a parent missing) is read but not checked: the
       grader would not judge it either.
    2. Run the rules on each path under the checks' CPU budget (CHECKS_CPU_BUDGET_SECONDS), and all of them under
       PREVIEW_CPU_BUDGET_SECONDS together; a path past either is counted as unchecked.
    3. For each conversation a rule matched: per check, what the rules set and found, beside the current review's
       answer; and the route the rules force whatever the judge says (`_route_after`).
    """
    check_set = version.check_set()
    if not any(check.rules for check in check_set.checks):
        return RulePreview(version, limit, 0, 0, [])  # nothing to run: the judge alone decides under it
    ids = list(
        Conversation.objects.filter(org_id=version.org_id)
        .order_by("-last_activity_at", "-pk")
        .values_list("pk", flat=True)[:limit]
    )
    rows: list[RulePreviewRow] = []
    checked = unchecked = 0
    deadline = time.thread_time() + settings.PREVIEW_CPU_BUDGET_SECONDS
    for start in range(0, len(ids), PREVIEW_CHUNK):
        chunk = ids[start : start + PREVIEW_CHUNK]
        by_id = Conversation.objects.in_bulk(chunk)
        reviews = Review.objects.counting().filter(conversation_id__in=chunk).select_related("decision")
        current = {r.conversation_id: r for r in reviews}
        for pk in chunk:
            conversation = by_id.get(pk)
            if conversation is None:
                continue  # deleted meanwhile
            state = conversation_path(conversation)
            if state.not_scorable_reason:
                continue
            if time.thread_time() > deadline:
                unchecked += 1
                continue
            try:
                with checks_budget(settings.CHECKS_CPU_BUDGET_SECONDS):
                    ruled = rules_run(check_set, state.path)
            except ChecksOverBudget:
                unchecked += 1
                continue
            checked += 1
            if ruled:
                rows.append(_row(conversation, current.get(pk), check_set, ruled))
    return RulePreview(version, limit, len(ids), checked, rows, unchecked)


def _row(
    conversation: Conversation, review: Review | None, check_set: CheckSet, ruled: dict[str, RuledCheck]
) -> RulePreviewRow:
    matches = [
        RuleMatch(
            key=key,
            name=check_set[key].name,
            sets=found.sets,
            findings=[finding.as_json() for finding in found.findings],
            notes=list(found.notes),
            answer_now=((review.checks or {}).get(key) or {}).get("verdict") if review is not None else None,
        )
        for key, found in ruled.items()
    ]
    return RulePreviewRow(conversation, review, matches, _route_after(check_set, ruled))


def _route_after(check_set: CheckSet, ruled: dict[str, RuledCheck]) -> str:
    """The route the rules force whatever the judge answers: the machine's outcome (`machine_outcome`, the
    grader's rule) when the judge gives every check its best answer and the rules lower the ones they matched. A
    fail fails the conversation; an unknown sends it to people at best; a pass leaves it to the judge."""
    best = {check.key: _best_answer(check) for check in check_set.checks}
    answers = best | {key: lowered_answer(check_set[key], best[key], found.sets) for key, found in ruled.items()}
    judge_asked = check_set.judge_after_rule_fail or not rule_failed_required(check_set, ruled)
    outcome = machine_outcome(check_set, answers, judge_asked=judge_asked)
    return {Verdict.FAIL: Route.FAIL, Verdict.UNKNOWN: Route.HUMAN}.get(outcome, "")


def _best_answer(check: CheckDefinition) -> str:
    """The judge's best answer to a check: pass, its first passing category, the top of its scale."""
    if check.kind == AnswerKind.VERDICT:
        return Verdict.PASS.value
    if check.kind == AnswerKind.CATEGORY:
        return check.passing[0] if check.passing else UNKNOWN
    return str(check.scale)

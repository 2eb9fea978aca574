"""The deterministic rules a criteria version attaches to a conversation's checks, run on its active path before the
judge, and how what they find lowers the judge's answer. Pure Python: no Django.

The model does not get the last word on facts: a rule that matches sets its check to fail (or unknown, as the admin
chose) with the messages it matched and the text it found, and an answer is only ever lowered by it (fail beats
unknown beats pass), never raised. Phrases go through the drafts' Aho-Corasick matcher (whole words, any case:
grading/checks/checks.py), patterns through RE2 (linear in the text: grading/checks/definitions.py refused any
other when the version was saved), so the rules of a version cost time linear in the path; they run under the
checks' CPU budget (`checks_budget`) all the same, checking it after every message.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any

from grading.checks.budget import checkpoint
from grading.checks.checks import phrase_matcher
from grading.checks.definitions import (
    UNKNOWN,
    AnswerKind,
    CheckDefinition,
    CheckSet,
    ConversationRule,
    PatternRule,
    PhrasesRule,
    ToolCalledRule,
    ToolsAnsweredRule,
)
from grading.checks.rules import normalize_term
from grading.core.evidence import EvidenceMessage, Verdict, tool_call_id, unanswered_tool_calls
from grading.core.evidence_text import content_text

# What one check keeps of what its rules found: enough to show the evidence, bounded whatever the path holds.
MAX_FINDINGS = 20
MAX_FINDING_TEXT = 200


@dataclass(frozen=True)
class RuleFinding:
    rule: int  # the rule's position among its check's rules
    message_id: str | None  # None: what the rule found is an absence (a tool never called)
    text: str  # what matched: the phrase or pattern's text, the tool's name

    def as_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "message_id": self.message_id, "text": self.text}


@dataclass(frozen=True)
class RuledCheck:
    """What a check's rules found on the path: the lowest answer a matching rule sets, the findings in rule order, and
    the admin's notes of the rules that matched."""

    sets: str  # fail | unknown
    findings: tuple[RuleFinding, ...]
    notes: tuple[str, ...]


def rules_run(checks: CheckSet, path: Sequence[EvidenceMessage]) -> dict[str, RuledCheck]:
    """The checks of `checks` that a rule of theirs matched on `path`, by key, in the version's order. Call it inside
    `checks_budget`: it raises ChecksOverBudget past it."""
    ruled = {}
    for check in checks.checks:
        findings: list[RuleFinding] = []
        sets, notes = Verdict.UNKNOWN.value, []
        for index, rule in enumerate(check.rules):
            # A rule's first finding says it matched even once the check keeps no more: it still sets the check.
            room = MAX_FINDINGS - len(findings)
            found = list(islice(_rule_findings(index, rule, path), max(room, 1)))
            if not found:
                continue
            findings += found[:room]
            notes.append(rule.note or _RULE_TEXT[rule.kind])
            if rule.sets == Verdict.FAIL:
                sets = Verdict.FAIL.value
        if notes:
            ruled[check.key] = RuledCheck(sets=sets, findings=tuple(findings), notes=tuple(notes))
    return ruled


# What a rule's match says when the admin wrote no note of its own.
_RULE_TEXT = {
    "phrases": "a phrase the check's rule looks for appears",
    "pattern": "the check's pattern matches",
    "tool_called": "a tool was called, or not called, against the check's rule",
    "tools_answered": "a tool call got no result",
}


def _rule_findings(index: int, rule: ConversationRule, path: Sequence[EvidenceMessage]) -> Iterator[RuleFinding]:
    if isinstance(rule, PhrasesRule):
        matcher = phrase_matcher(tuple(dict.fromkeys(normalize_term(phrase) for phrase in rule.phrases)))
        for message, text in _scoped(path, rule.scopes):
            for (_, phrase), spans in matcher.scan(text).items():
                start, end = spans[0]
                yield RuleFinding(index, message.id, _clipped(text[start:end] or phrase))
    elif isinstance(rule, PatternRule):
        pattern = rule.compiled()
        for message, text in _scoped(path, rule.scopes):
            if (match := pattern.search(text)) is not None:
                yield RuleFinding(index, message.id, _clipped(match.group(0)))
    elif isinstance(rule, ToolCalledRule):
        calls = list(_calls(path, rule.tool))
        if rule.must and not calls:
            yield RuleFinding(index, None, f"{rule.tool} (never called)")  # an absence names no message
        elif not rule.must:
            for message in calls:
                yield RuleFinding(index, message.id, rule.tool)
    elif isinstance(rule, ToolsAnsweredRule):
        for message, call in unanswered_tool_calls(path):
            yield RuleFinding(index, message.id, f"{_call_name(call) or 'a tool'} ({tool_call_id(call) or 'no id'})")


def _scoped(path: Sequence[EvidenceMessage], scopes: Sequence[str]) -> Iterator[tuple[EvidenceMessage, str]]:
    """The messages a text rule reads (assistant messages, tool results, user messages) with their words, checking
    the CPU budget after each."""
    for message in path:
        if message.role in scopes:
            yield message, content_text(message.content)
            checkpoint()


def _calls(path: Sequence[EvidenceMessage], tool: str) -> Iterator[EvidenceMessage]:
    """The assistant messages that call `tool`."""
    for message in path:
        if message.role == "assistant" and any(_call_name(call) == tool for call in message.tool_calls or ()):
            yield message
        checkpoint()


def _call_name(call: object) -> str | None:
    function = call.get("function") if isinstance(call, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    return name if isinstance(name, str) else None


def _clipped(text: str) -> str:
    return text if len(text) <= MAX_FINDING_TEXT else text[: MAX_FINDING_TEXT - 1] + "…"


# --- lowering the judge's answer -------------------------------------------------------------------------------------
def lowered(check: CheckDefinition, judged: dict | None, ruled: RuledCheck) -> dict:
    """The check's stored answer once its rules have spoken: the judge's answer (`judged`; None when the judge was
    not asked) lowered to what the rules set, the rules' findings and messages first, then the judge's.

    What "lowered" means by kind:
    - verdict: fail beats unknown beats pass;
    - score: a rule's fail lowers to the highest score that fails (one below the lowest passing score); its unknown
      to unknown;
    - category (or a score check with no failing score): a rule finds evidence, it cannot pick a category, so both
      its fail and its unknown record unknown.
    A judge's answer that already reads as fail is kept whatever the rule sets."""
    judge_answer = judged["verdict"] if judged is not None else UNKNOWN
    answer = lowered_answer(check, judge_answer, ruled.sets)
    rule_ids = [finding.message_id for finding in ruled.findings if finding.message_id is not None]
    judge_ids = judged["message_ids"] if judged is not None else []
    rationale = f"[rule: {'; '.join(ruled.notes)}]"
    if judged is not None:
        rationale += f" {judged['rationale']}"
    return {
        "verdict": answer,
        "message_ids": list(dict.fromkeys([*rule_ids, *judge_ids])),
        "rationale": rationale,
        "source": "rule",
        "findings": [finding.as_json() for finding in ruled.findings],
    }


def rule_failed_required(checks: CheckSet, ruled: dict[str, RuledCheck]) -> bool:
    """Whether a rule has already failed a required check, whatever the judge would say."""
    return any(
        checks[key].required and checks[key].outcome(lowered_answer(checks[key], UNKNOWN, found.sets)) == Verdict.FAIL
        for key, found in ruled.items()
    )


def lowered_answer(check: CheckDefinition, judge_answer: str, sets: str) -> str:
    """`judge_answer` lowered to what a matching rule sets (fail | unknown); see `lowered`."""
    if check.outcome(judge_answer) == Verdict.FAIL:
        return judge_answer
    if sets == Verdict.UNKNOWN:
        return UNKNOWN
    if check.kind == AnswerKind.VERDICT:
        return Verdict.FAIL.value
    if check.kind == AnswerKind.SCORE and check.pass_from is not None and check.pass_from > 1:
        return str(check.pass_from - 1)
    return UNKNOWN

"""A conversation as its item page shows it: the active path as the user saw it, with abandoned branches folded where
they leave it, every message's thumbs, and each check of the review beside the messages it cites."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from grading.checks.answers import answer_reads_as
from grading.checks.definitions import CheckDefinition, ConversationRule, ToolCalledRule, ToolsAnsweredRule
from grading.core import evidence, evidence_text
from grading.models import Feedback, Message, Review
from grading.otlp.pending import awaited_content_note

if TYPE_CHECKING:
    from reviewer.queue.expected_replies import ReplyControl


@dataclass
class ShownToolCall:
    id: str
    name: str
    arguments: str


@dataclass
class ShownMessage:
    id: str
    anchor: str
    role: str
    name: str | None
    text: str
    preformatted: bool
    tool_calls: list[ShownToolCall]
    tool_call_id: str | None
    created_at: datetime | None
    hidden: bool
    truncated: bool
    cited_by: list[str] = field(default_factory=list)
    feedback: str | None = None
    reply_control: ReplyControl | None = None  # an assistant message of the path, to the person deciding the item


@dataclass
class Fold:
    """Messages that are not evidence: abandoned branches at one point of the path, or unconnected ones."""

    branches: int
    messages: list[ShownMessage]
    label: str


@dataclass
class PathEntry:
    message: ShownMessage | None = None
    fold: Fold | None = None


@dataclass(frozen=True)
class RuleFinding:
    """What one of the version's rules found: the admin's words on the rule, and the message and text it matched."""

    rule: str
    message: ShownMessage | None  # None when the rule names no message on the path (a tool never called)
    message_id: str
    text: str


@dataclass(frozen=True)
class CheckView:
    key: str
    name: str  # the check's name in its version
    question: str
    guidance: list[tuple[str, str]]  # (answer, what it means) as the version words it
    verdict: str  # the machine's answer, as stored: pass, fail, a category, a score, unknown
    reads_as: str  # pass, fail or unknown as the answer reads for the item; "" when it is neither
    rationale: str
    cited: list[ShownMessage]
    missing_ids: list[str]
    by_rule: bool = False  # a rule set the answer (it can only lower what the judge said)
    findings: list[RuleFinding] = field(default_factory=list)  # listed before the judge's evidence


@dataclass(frozen=True)
class ConversationEvidence:
    path: list[PathEntry]
    path_length: int
    abandoned: int
    branch_points: int
    checks: list[CheckView]
    feedback: list[tuple[ShownMessage | None, str, str]]  # (message, message id, up/down)
    not_scorable: str | None
    content_awaited: str | None  # why the conversation waits for a model call's messages, and since when
    active_path: list[evidence.EvidenceMessage] = field(default_factory=list)  # as evidence; none when unreadable


def conversation_evidence(review: Review) -> ConversationEvidence:
    """The conversation's active path with abandoned branches folded where they leave it, and each check of the
    review's criteria version with the messages it cites. Two queries: the messages and the thumbs."""
    conversation = review.conversation
    rows = list(Message.objects.filter(conversation=conversation).order_by("created_at", "pk"))
    messages = [m.as_evidence() for m in rows]
    result = evidence.active_path(messages, conversation.active_message_id)
    path_ids = [m.id for m in result.path]
    anchors = {m.id: f"msg-{n}" for n, m in enumerate(messages, start=1)}
    shown = {m.id: _shown(m, anchors[m.id]) for m in messages}
    feedback = list(Feedback.objects.filter(conversation=conversation).order_by("created_at"))
    for thumb in feedback:
        if thumb.message_external_id in shown:
            shown[thumb.message_external_id].feedback = thumb.value

    checks = []
    for definition in review.criteria_version.check_set().checks:
        check = review.checks.get(definition.key) or {}
        answer = str(check.get("verdict", "unknown"))
        cited_ids = [str(i) for i in check.get("message_ids") or []]
        for message_id in cited_ids:
            if message_id in shown:
                shown[message_id].cited_by.append(definition.name)
        checks.append(
            CheckView(
                key=definition.key,
                name=definition.name,
                question=definition.question,
                guidance=definition.guidance_in_order(),
                verdict=answer,
                reads_as=answer_reads_as(definition, answer),
                rationale=str(check.get("rationale", "")),
                cited=[shown[i] for i in cited_ids if i in shown],
                missing_ids=[i for i in cited_ids if i not in shown],
                by_rule=check.get("source") == "rule",
                findings=_findings(definition, check.get("findings"), shown),
            )
        )

    path, abandoned, branch_points = _path_with_folds(messages, path_ids, shown)
    return ConversationEvidence(
        path=path,
        path_length=len(path_ids),
        abandoned=abandoned,
        branch_points=branch_points,
        checks=checks,
        feedback=[(shown.get(t.message_external_id), t.message_external_id, t.value) for t in feedback],
        not_scorable=evidence.REASON_TEXT.get(result.problem) if result.problem else None,
        content_awaited=awaited_content_note(conversation),
        active_path=[] if result.problem else result.path,
    )


def _findings(definition: CheckDefinition, found: object, shown: dict[str, ShownMessage]) -> list[RuleFinding]:
    """The rule findings a review stores on a check ([{"rule": index, "message_id", "text"}]), each named by the
    admin's note on its rule (or what the rule asks, without one)."""
    findings = []
    for finding in found if isinstance(found, list) else []:
        if not isinstance(finding, dict):
            continue
        index = finding.get("rule")
        rule = definition.rules[index] if isinstance(index, int) and 0 <= index < len(definition.rules) else None
        message_id = str(finding.get("message_id") or "")
        findings.append(
            RuleFinding(
                rule=_rule_words(rule),
                message=shown.get(message_id),
                message_id=message_id,
                text=str(finding.get("text") or ""),
            )
        )
    return findings


def _rule_words(rule: ConversationRule | None) -> str:
    if rule is None:
        return "a rule the version no longer holds"
    if rule.note:
        return rule.note
    if isinstance(rule, ToolCalledRule):
        return f"the tool {rule.tool} {'must' if rule.must else 'must never'} be called"
    if isinstance(rule, ToolsAnsweredRule):
        return "every tool call is answered by its result"
    return f"a {rule.kind} rule"


def _path_with_folds(
    messages: list[evidence.EvidenceMessage], path_ids: list[str], shown: dict[str, ShownMessage]
) -> tuple[list[PathEntry], int, int]:
    """1. Index children by parent id (a root's parent is None).
    2. Walk the path; after each message (and before the first, for other roots) fold every child that is
       not the next path message, with its whole subtree (iteratively, so cycles and depth are harmless).
    3. Whatever is left is not connected to the path at all (an unresolved parent, a loop): one last fold.
    """
    children: dict[str | None, list[str]] = {}
    for m in messages:
        children.setdefault(m.parent_id, []).append(m.id)
    on_path = set(path_ids)
    placed = set(path_ids)
    entries: list[PathEntry] = []
    abandoned = 0
    branch_points = 0

    def subtree(root: str) -> list[ShownMessage]:
        found, stack = [], [root]
        while stack:
            current = stack.pop()
            if current in placed:
                continue
            placed.add(current)
            found.append(shown[current])
            stack.extend(reversed(children.get(current, [])))
        return found

    for parent in [None, *path_ids]:
        if parent is not None:
            entries.append(PathEntry(message=shown[parent]))
        off_path = [child for child in children.get(parent, []) if child not in on_path]
        if not off_path or (parent is None and not path_ids):
            continue
        folded = [m for child in off_path for m in subtree(child)]
        if folded:
            branch_points += 1
            abandoned += len(folded)
            where = "before the path starts" if parent is None else f"after {parent}"
            entries.append(
                PathEntry(
                    fold=Fold(
                        branches=len(off_path),
                        messages=folded,
                        label=f"{len(off_path)} abandoned branch{'es' if len(off_path) > 1 else ''} {where} "
                        f"({len(folded)} message{'s' if len(folded) > 1 else ''}). Not evidence.",
                    )
                )
            )
    rest = [shown[m.id] for m in messages if m.id not in placed]
    if rest:
        abandoned += len(rest)
        entries.append(
            PathEntry(fold=Fold(branches=0, messages=rest, label=f"{len(rest)} messages not connected to the path."))
        )
    return entries, abandoned, branch_points


def _shown(m: evidence.EvidenceMessage, anchor: str) -> ShownMessage:
    text, preformatted = _display_content(m.content, is_tool=m.role == "tool")
    calls = []
    if isinstance(m.tool_calls, list):
        for call in m.tool_calls:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                calls.append(
                    ShownToolCall(
                        id=str(call.get("id") or ""),
                        name=str(function.get("name") or "?"),
                        arguments=_pretty_json(function.get("arguments")),
                    )
                )
            else:
                calls.append(ShownToolCall(id="", name="?", arguments=_pretty_json(call)))
    elif m.tool_calls is not None:
        calls.append(ShownToolCall(id="", name="?", arguments=_pretty_json(m.tool_calls)))
    return ShownMessage(
        id=m.id,
        anchor=anchor,
        role=m.role,
        name=m.name,
        text=text,
        preformatted=preformatted,
        tool_calls=calls,
        tool_call_id=m.tool_call_id,
        created_at=m.created_at,
        hidden=m.hidden,
        truncated=m.truncated,
    )


def _display_content(content: object, *, is_tool: bool) -> tuple[str, bool]:
    """The text to show and whether it is preformatted: the words are grading's one rendering of content
    (`evidence_text.content_text`, what the judge read); tool output and JSON only keep their layout."""
    if (isinstance(content, str) and is_tool) or not isinstance(content, str | list | None):
        return _pretty_json(content), True
    return evidence_text.content_text(content), is_tool


def _pretty_json(value: object) -> str:
    """JSON laid out for reading; a string that is not JSON is shown as it is."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value
        if not isinstance(value, dict | list):
            return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=False, default=str)

"""What an item page shows beside the review: the score identity, the conversation path as the user saw it
with each check's quoted evidence, where a draft's score sits against threshold and band, its sub-scores."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime

from grading.core import evidence, evidence_text
from grading.core.outcomes import BAND, CHECKS, JUDGE_CONTRADICTION, SPREAD, UNKNOWN_CHECK
from grading.models import Feedback, ItemKind, Message, Review
from grading.otlp.pending import awaited_content_note
from reviewer.queue.display import SUB_SCORE_LABELS


@dataclass(frozen=True)
class IdentityRow:
    label: str
    value: str


def judge_label(judge: dict) -> str:
    """`cheap · openai · gpt-4.1-mini · prompt 5be0c2 · t=0` from the judge identity on a review: the configured
    judge's name first (reviews from before judges had names have none)."""
    if not isinstance(judge, dict):
        return str(judge)
    parts = [str(judge[key]) for key in ("name", "backend", "model") if judge.get(key)]
    if judge.get("prompt_hash"):
        parts.append(f"prompt {str(judge['prompt_hash'])[:8]}")
    if "temperature" in judge:
        parts.append(f"t={judge['temperature']:g}" if isinstance(judge["temperature"], int | float) else "")
    known = {"name", "backend", "model", "prompt_hash", "temperature"}
    parts += [f"{key}={value}" for key, value in sorted(judge.items()) if key not in known]
    return " · ".join(part for part in parts if part)


def identity_rows(review: Review, *, messages_on_path: int | None = None) -> list[IdentityRow]:
    fingerprint = review.fingerprint
    if messages_on_path is not None:
        fingerprint += f" ({messages_on_path} messages on the path, nothing truncated)"
    rows = [IdentityRow("fingerprint", fingerprint)]
    if review.criteria_fingerprint:  # reviews from before it was recorded have none
        rows.append(IdentityRow("criteria fingerprint", review.criteria_fingerprint))
    rows.append(IdentityRow("judge", judge_label(review.judge)))
    if review.kind == ItemKind.DRAFT:
        rows.append(IdentityRow("memory", review.memory_snapshot or "none read"))
    rows.append(IdentityRow("judged at", f"{review.finished_at:%d %b %Y %H:%M:%S} UTC"))
    stages = review.stages
    if review.kind == ItemKind.CONVERSATION:
        rows.append(IdentityRow("stages", "1 (the whole path in one call)" if stages == 1 else f"{stages}"))
    usage = review.usage or {}
    if usage.get("prompt_tokens") is not None:
        rows.append(
            IdentityRow("tokens", f"{usage.get('prompt_tokens', 0):,} in · {usage.get('completion_tokens', 0):,} out")
        )
    return rows


# --- conversations: the path as the user saw it -------------------------------------------------------------


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
class CheckView:
    name: str
    verdict: str
    rationale: str
    cited: list[ShownMessage]
    missing_ids: list[str]


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


def conversation_evidence(review: Review) -> ConversationEvidence:
    """The conversation's active path with abandoned branches folded where they leave it, and each check with
    the messages it cites. Two queries: the messages and the thumbs."""
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
    for name in CHECKS:
        check = review.checks.get(name) or {}
        cited_ids = [str(i) for i in check.get("message_ids") or []]
        for message_id in cited_ids:
            if message_id in shown:
                shown[message_id].cited_by.append(name)
        checks.append(
            CheckView(
                name=name,
                verdict=check.get("verdict", "unknown"),
                rationale=str(check.get("rationale", "")),
                cited=[shown[i] for i in cited_ids if i in shown],
                missing_ids=[i for i in cited_ids if i not in shown],
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
    )


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


@dataclass(frozen=True)
class Scale:
    """Where the score sits on the 1-10 scale, in percent of the width, for a small SVG."""

    band_start: float
    threshold: float
    score: float | None
    spread_from: float | None
    spread_to: float | None
    band_start_value: float
    threshold_value: float
    band_value: float

    @property
    def band_width(self) -> float:
        return round(self.threshold - self.band_start, 2)

    @property
    def pass_width(self) -> float:
        return round(100.0 - self.threshold, 2)

    @property
    def spread_width(self) -> float:
        return round((self.spread_to or 0.0) - (self.spread_from or 0.0), 2)


def _percent(value: float) -> float:
    return round(max(0.0, min(100.0, (value - 1.0) / 9.0 * 100.0)), 2)


def draft_scale(review: Review) -> Scale:
    rules = review.criteria_version.draft_rules()
    threshold, band = rules.threshold, rules.band
    spread_from = spread_to = None
    center = review.judge_score if review.judge_score is not None else review.score
    if review.spread is not None and center is not None:
        spread_from, spread_to = _percent(center - review.spread), _percent(center + review.spread)
    return Scale(
        band_start=_percent(threshold - band),
        threshold=_percent(threshold),
        score=_percent(review.score) if review.score is not None else None,
        spread_from=spread_from,
        spread_to=spread_to,
        band_start_value=threshold - band,
        threshold_value=threshold,
        band_value=band,
    )


def why_human(review: Review) -> str:
    """Why the machine handed this item to a person, in one or two sentences."""
    if review.kind == ItemKind.CONVERSATION:
        if review.reason == UNKNOWN_CHECK:
            return (
                "At least one check came back unknown: the recorded evidence leaves it open. "
                "Unknowns never count in the quality number."
            )
        return review.detail or "The machine could not decide on its own."
    rules = review.criteria_version.draft_rules()
    threshold, band = rules.threshold, rules.band
    score = f"{review.score:.1f}" if review.score is not None else "no score"
    if review.reason == BAND:
        return (
            f"Score {score} against threshold {threshold:.1f}: inside the marginal band {threshold - band:.1f}–"
            f"{threshold:.1f}. No remaining hard finding."
        )
    if review.reason == JUDGE_CONTRADICTION:
        said = "pass" if review.judge_passed else "fail"
        return f"The judge said {said}, but its own score of {score} against threshold {threshold:.1f} says otherwise."
    if review.reason == SPREAD and review.spread is not None:
        center = review.judge_score if review.judge_score is not None else review.score or 0
        return (
            f"The judge is unsure: its score {center:.1f} spreads from {center - review.spread:.1f} to "
            f"{center + review.spread:.1f}, across the threshold {threshold:.1f}."
        )
    return review.detail or "The machine could not decide on its own."


@dataclass(frozen=True)
class SubScore:
    label: str
    value: int | float | None
    percent: float


def sub_scores(review: Review) -> list[SubScore]:
    scores = review.sub_scores or {}
    rows = []
    for key, label in SUB_SCORE_LABELS.items():
        value = scores.get(key)
        percent = round(max(0.0, min(1.0, value / 5.0)) * 100.0, 1) if isinstance(value, int | float) else 0.0
        rows.append(SubScore(label, value, percent))
    return rows


def draft_body_for_review(review: Review) -> str:
    """The body the review's findings point into: the repaired one when repairs ran, else the draft's."""
    repairs = review.repairs or {}
    body = repairs.get("body") if isinstance(repairs, dict) else None
    return body if isinstance(body, str) else review.draft.body

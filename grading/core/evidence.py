"""The evidence contract for conversations (docs/pipelines-and-api.md): active path, fingerprint, scorability, staging.

Pure Python on purpose: no Django here. The models adapt into `EvidenceMessage`, so the same rules serve
the API, the importers, the grading pass and the tests, and a client can recompute a fingerprint from this
file alone.

The judge reads exactly what `render_message` produces, and `render_message` reads only the fields that
`canonical_message` puts in the fingerprint. So every change the judge could notice changes the fingerprint;
`created_at`, `hidden` and `truncated` shape the path and scorability but are not evidence.
"""

from __future__ import annotations

import hashlib
import json
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

import rehashes

FINGERPRINT_SCHEME = "fp1"
# The roles a message may have (the API's `MessageIn.role` lists the same four for its schema). The importers and
# the OTLP receiver also take other formats' names for them: OpenAI's `developer` messages are system
# instructions, its legacy `function` messages are tool results.
ROLES = frozenset({"system", "user", "assistant", "tool"})
ROLE_ALIASES = {"developer": "system", "function": "tool"}

_OLDEST = datetime.min.replace(tzinfo=UTC)


@dataclass(frozen=True)
class EvidenceMessage:
    id: str
    parent_id: str | None
    role: str  # one of ROLES
    content: str | list | None  # text, or a list of OpenAI content parts (dicts), stored as given
    tool_calls: list | None = None  # OpenAI tool_calls: [{"id", "type": "function", "function": {...}}]
    tool_call_id: str | None = None
    name: str | None = None
    created_at: datetime | None = None
    hidden: bool = False
    truncated: bool = False


def known_role(name: str) -> str | None:
    """The role `name` stands for (itself, or the role it is an alias of), or None when it names no role."""
    role = ROLE_ALIASES.get(name, name)
    return role if role in ROLES else None


class NotScorable(StrEnum):
    IN_PROGRESS = "in_progress"
    UNRESOLVED_PARENT = "unresolved_parent"
    CYCLE = "cycle"
    DUPLICATE_ID = "duplicate_id"
    UNKNOWN_ACTIVE_MESSAGE = "unknown_active_message"
    EMPTY = "empty"
    TOOL_CALL_WITHOUT_RESULT = "tool_call_without_result"
    TRUNCATED_BY_SOURCE = "truncated_by_source"
    CONTENT_AWAITED = "content_awaited"
    # Decided when grading, not by `not_scorable_reason`: they depend on the judge or the version, not on the record.
    TOO_LONG_FOR_JUDGE = "too_long_for_judge"
    OUTSIDE_JUDGE_SAMPLE = "outside_judge_sample"


REASON_TEXT: dict[NotScorable, str] = {
    NotScorable.IN_PROGRESS: (
        "The conversation is still in progress: it is not closed and had activity within the quiet period, "
        "or a tool call on the active path is still waiting for its result. It is graded once it goes quiet."
    ),
    NotScorable.UNRESOLVED_PARENT: (
        "A message on the active path names a parent that is not in the record, so the path to the root is unknown."
    ),
    NotScorable.CYCLE: "Following parents from the active message loops back on itself, so there is no root.",
    NotScorable.DUPLICATE_ID: "Two or more messages share an id, so the tree is ambiguous.",
    NotScorable.UNKNOWN_ACTIVE_MESSAGE: "The active message id given by the source is not in the record.",
    NotScorable.EMPTY: "The conversation has no messages.",
    NotScorable.TOOL_CALL_WITHOUT_RESULT: (
        "An assistant tool call on the active path has no later tool message with its result, "
        "and the conversation is closed or quiet."
    ),
    NotScorable.TRUNCATED_BY_SOURCE: "The source marked a message on the active path as truncated.",
    NotScorable.CONTENT_AWAITED: (
        "A model call of this conversation arrived as an OpenTelemetry span whose messages travel as OTLP log "
        "records, and they have not arrived. It is graded once they do."
    ),
    NotScorable.TOO_LONG_FOR_JUDGE: (
        "A message on the active path is longer than the judge's context window on its own, and evidence is never "
        "cut to fit. A judge with a larger context can grade it."
    ),
    NotScorable.OUTSIDE_JUDGE_SAMPLE: (
        "The criteria version has its judge grade only a share of this conversation's slice, to hold spend, and this "
        "conversation is outside that share: no judge was asked. The figures say the share they cover."
    ),
}


class Verdict(StrEnum):
    PASS = "pass"  # noqa: S105 - a verdict, not a password
    FAIL = "fail"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class PathResult:
    """The active path, root first. When `problem` is set the path is not evidence: it holds what could be
    walked from the active message (for display), or nothing when there was no message to start from."""

    path: list[EvidenceMessage]
    problem: NotScorable | None = None


# --- fingerprint -------------------------------------------------------------------------------------------


def canonical_message(m: EvidenceMessage) -> dict[str, Any]:
    """The part of a message that is evidence: exactly the keys the fingerprint and the API expose."""
    return {
        "content": m.content,
        "id": m.id,
        "name": m.name,
        "role": m.role,
        "tool_call_id": m.tool_call_id,
        "tool_calls": m.tool_calls,
    }


def fingerprint(path: Sequence[EvidenceMessage]) -> str:
    """Evidence fingerprint of a conversation, scheme `fp1`.

    1. Take the messages of the active path in order, root first, active message last.
    2. Write each as a JSON object with exactly the keys `content`, `id`, `name`, `role`, `tool_call_id`,
       `tool_calls`. Values are as stored: `content` is a string, a list of content parts, or null;
       `tool_calls` is the list as sent, or null; any absent value is null.
    3. Serialize the list of objects as JSON with object keys sorted, no whitespace (separators `,` and `:`),
       and non-ASCII characters written as themselves rather than `\\u` escapes; encode the text as UTF-8.
    4. The fingerprint is `fp1:` followed by the lowercase hex SHA-256 of those bytes.

    Nothing is truncated before hashing. In Python:

        payload = json.dumps(messages, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        "fp1:" + hashlib.sha256(payload.encode("utf-8")).hexdigest()

    Strings must be valid Unicode (no lone surrogates), which UTF-8 storage guarantees.
    """
    payload = json.dumps(
        [canonical_message(m) for m in path], sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return f"{FINGERPRINT_SCHEME}:{hashlib.sha256(payload.encode('utf-8')).hexdigest()}"


def _canonical_bytes(m: EvidenceMessage) -> bytes:
    return json.dumps(canonical_message(m), sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def path_digest(path: Sequence[EvidenceMessage]) -> tuple[str, bytes]:
    """The path's fingerprint and a resumable digest state that `extend_digest` continues.

    The fingerprint's JSON array is `[` + the messages' objects joined by `,` + `]`, so SHA-256 can absorb it one
    message at a time. The state is the hash after everything but the closing `]`: extending a path costs the new
    messages only, however long the path (rehashes' SHA-256, whose state can be stored; hashlib's cannot).
    """
    hasher = rehashes.PySha256()
    hasher.update(b"[")
    for index, m in enumerate(path):
        hasher.update(b"," + _canonical_bytes(m) if index else _canonical_bytes(m))
    return _finish(hasher), hasher.serialize()


def extend_digest(state: bytes, appended: Sequence[EvidenceMessage], *, path_was_empty: bool) -> tuple[str, bytes]:
    """`path_digest(path + appended)` from `path_digest(path)`'s state, reading only `appended`."""
    hasher = rehashes.PySha256.deserialize(state)
    for index, m in enumerate(appended):
        hasher.update(_canonical_bytes(m) if path_was_empty and index == 0 else b"," + _canonical_bytes(m))
    return _finish(hasher), hasher.serialize()


def prefix_fingerprints(path: Sequence[EvidenceMessage]) -> list[str]:
    """`fingerprint(path[: n + 1])` for each n: the fingerprint the conversation would have if the path ended at each
    of its messages (what an expected reply at a message is bound to). One pass over the path, as `path_digest`."""
    hasher = rehashes.PySha256()
    hasher.update(b"[")
    fingerprints = []
    for index, m in enumerate(path):
        hasher.update(b"," + _canonical_bytes(m) if index else _canonical_bytes(m))
        fingerprints.append(_finish(hasher))
    return fingerprints


def _finish(hasher: rehashes.PySha256) -> str:
    closing = rehashes.PySha256.deserialize(hasher.serialize())
    closing.update(b"]")
    return f"{FINGERPRINT_SCHEME}:{closing.finalize()}"


# --- the tree and its active path ---------------------------------------------------------------------------


def leaves(messages: Iterable[EvidenceMessage]) -> list[EvidenceMessage]:
    """Messages that no other message names as its parent, in input order."""
    messages = list(messages)
    parent_ids = {m.parent_id for m in messages if m.parent_id is not None}
    return [m for m in messages if m.id not in parent_ids]


def newest_leaf(messages: Iterable[EvidenceMessage]) -> EvidenceMessage | None:
    """The default active message: the leaf with the latest `created_at` (a missing time counts as oldest,
    a naive time as UTC); among equal times, the lexicographically greatest id."""
    return max(leaves(messages), key=_recency, default=None)


def _recency(m: EvidenceMessage) -> tuple[datetime, str]:
    if m.created_at is None:
        return (_OLDEST, m.id)
    if m.created_at.tzinfo is None:
        return (m.created_at.replace(tzinfo=UTC), m.id)
    return (m.created_at, m.id)


def active_path(messages: Sequence[EvidenceMessage], active_leaf_id: str | None) -> PathResult:
    """The root-to-leaf path the user saw, or the reason there is none.

    1. No messages -> `empty`. Any id used twice -> `duplicate_id` (which twin is meant is unknowable).
    2. The active message is `active_leaf_id`; an id not among the messages -> `unknown_active_message`.
       Without one, the newest leaf (see `newest_leaf`). A non-empty tree without leaves is all cycles
       -> `cycle`.
    3. Follow parents iteratively (chains of any length) until a root: a parent id not among the messages
       -> `unresolved_parent`; a message seen twice -> `cycle`.
    4. Reverse, so the root comes first.

    Problems are only looked for on the active path (plus duplicate ids anywhere): an orphan or a loop
    on an abandoned branch is not evidence and does not block a score.
    """
    if not messages:
        return PathResult([], NotScorable.EMPTY)
    by_id = {m.id: m for m in messages}
    if len(by_id) != len(messages):
        return PathResult([], NotScorable.DUPLICATE_ID)

    if active_leaf_id is not None:
        leaf = by_id.get(active_leaf_id)
        if leaf is None:
            return PathResult([], NotScorable.UNKNOWN_ACTIVE_MESSAGE)
    else:
        leaf = newest_leaf(messages)
        if leaf is None:
            return PathResult([], NotScorable.CYCLE)

    walked = [leaf]
    seen = {leaf.id}
    problem: NotScorable | None = None
    current = leaf
    while current.parent_id is not None:
        parent = by_id.get(current.parent_id)
        if parent is None:
            problem = NotScorable.UNRESOLVED_PARENT
            break
        if parent.id in seen:
            problem = NotScorable.CYCLE
            break
        walked.append(parent)
        seen.add(parent.id)
        current = parent
    walked.reverse()
    return PathResult(walked, problem)


def branch_count(messages: Iterable[EvidenceMessage]) -> int:
    """Number of leaves: 1 for a linear chain, 0 for no messages."""
    return len(leaves(messages))


# --- scorability --------------------------------------------------------------------------------------------


def unanswered_tool_calls(path: Sequence[EvidenceMessage]) -> list[tuple[EvidenceMessage, object]]:
    """Each assistant tool call with no later `tool` message answering it on the path, with the message that made
    it, in call order. Each tool message answers the earliest open call with its `tool_call_id`; a call without a
    string id can never be answered."""
    open_calls: dict[int, tuple[EvidenceMessage, object]] = {}  # call number -> the call; dicts keep call order
    open_by_id: dict[str, deque[int]] = {}
    calls_seen = 0
    for m in path:
        if m.role == "tool" and m.tool_call_id in open_by_id:
            waiting = open_by_id[m.tool_call_id]
            del open_calls[waiting.popleft()]
            if not waiting:
                del open_by_id[m.tool_call_id]
        if m.role == "assistant" and isinstance(m.tool_calls, list):
            for call in m.tool_calls:
                open_calls[calls_seen] = (m, call)
                if isinstance(call_id := tool_call_id(call), str):
                    open_by_id.setdefault(call_id, deque()).append(calls_seen)
                calls_seen += 1
    return list(open_calls.values())


def unanswered_tool_call_ids(path: Sequence[EvidenceMessage]) -> list[str | None]:
    """The ids of `unanswered_tool_calls`, None for a call without a string id."""
    return [tool_call_id(call) for _message, call in unanswered_tool_calls(path)]


def tool_call_id(call: object) -> str | None:
    call_id = call.get("id") if isinstance(call, dict) else None
    return call_id if isinstance(call_id, str) else None


def not_scorable_reason(
    path: Sequence[EvidenceMessage],
    *,
    closed: bool,
    last_activity: datetime,
    now: datetime,
    quiet_period: timedelta,
    path_problem: str | None,
    content_awaited: bool = False,
) -> NotScorable | None:
    """Why this conversation cannot be scored now, or None when it can.

    1. An incomplete record first, since waiting will not fix it: the path problem from `active_path`;
       no path at all -> `empty`; a message marked truncated by the source -> `truncated_by_source`; a model
       call known from its span whose messages have not arrived -> `content_awaited`.
    2. A tool call still without a result: `in_progress` while the conversation is open and active
       (the result may still arrive), else `tool_call_without_result`.
    3. Not closed and last activity less than `quiet_period` ago -> `in_progress`.
       A quiet period that has fully elapsed counts as quiet; activity "in the future" (clock skew) as recent.

    A closed or quiet path that ends on a user message is scorable on purpose: the agent never answered,
    and that is exactly what the judge should grade (`complete` fails). Calling it in progress forever
    would hide the conversations where the agent went silent.
    """
    return scorability(
        PathFacts(
            problem=path_problem,
            empty=not path,
            truncated=any(m.truncated for m in path),
            waiting_on_tools=bool(unanswered_tool_call_ids(path)),
        ),
        closed=closed,
        last_activity=last_activity,
        now=now,
        quiet_period=quiet_period,
        content_awaited=content_awaited,
    )


@dataclass(frozen=True)
class PathFacts:
    """What scorability needs to know about a path, without its messages (kept on the conversation, so an
    append can answer whether it is scorable without reading the path)."""

    problem: str | None
    empty: bool
    truncated: bool
    waiting_on_tools: bool


def scorability(
    facts: PathFacts,
    *,
    closed: bool,
    last_activity: datetime,
    now: datetime,
    quiet_period: timedelta,
    content_awaited: bool = False,
) -> NotScorable | None:
    """`not_scorable_reason` from a path's facts (the same rules, in the same order)."""
    if facts.problem is not None:
        return NotScorable(facts.problem)
    if facts.empty:
        return NotScorable.EMPTY
    if facts.truncated:
        return NotScorable.TRUNCATED_BY_SOURCE
    if content_awaited:
        return NotScorable.CONTENT_AWAITED
    active = not closed and now - last_activity < quiet_period
    if facts.waiting_on_tools:
        return NotScorable.IN_PROGRESS if active else NotScorable.TOOL_CALL_WITHOUT_RESULT
    if active:
        return NotScorable.IN_PROGRESS
    return None


def extend_open_tool_calls(open_calls: Sequence[str | None], appended: Sequence[EvidenceMessage]) -> list[str | None]:
    """`unanswered_tool_call_ids(path + appended)` from `unanswered_tool_call_ids(path)`, reading only `appended`:
    a tool message answers the earliest open call with its id, and an assistant message opens its calls."""
    still_open = list(open_calls)
    for m in appended:
        if m.role == "tool" and m.tool_call_id is not None and m.tool_call_id in still_open:
            still_open.remove(m.tool_call_id)
        if m.role == "assistant" and isinstance(m.tool_calls, list):
            for call in m.tool_calls:
                call_id = call.get("id") if isinstance(call, dict) else None
                still_open.append(call_id if isinstance(call_id, str) else None)
    return still_open


def recency(m: EvidenceMessage) -> tuple[datetime, str]:
    """The key of the newest-leaf rule: `created_at` (missing as oldest, naive as UTC), then the id."""
    return _recency(m)


def draft_fingerprint(*, title: str, body: str, source_urls: Sequence[str]) -> str:
    """Evidence fingerprint of a draft, scheme `fp1`: what the gate reads, nothing truncated.

    `fp1:` + SHA-256 hex of the UTF-8 JSON of {"body", "source_urls", "title"}, sorted keys,
    `(",", ":")` separators, non-ASCII kept.
    """
    document = {"body": body, "source_urls": list(source_urls), "title": title}
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return f"{FINGERPRINT_SCHEME}:" + hashlib.sha256(text.encode("utf-8")).hexdigest()

"""Shared pieces of the conversation importers: result types, file loading and the canonical message shape.

Every importer turns one export file into a list of results, one per conversation in the file, in file order.
A result is either a `ParsedConversation` whose `payload` is exactly the body of `POST /api/v1/conversations`
or a `ParseFailure` naming the conversation and the reason. One bad conversation never stops
the others; only a file that is not JSON/JSONL at all (or whose top level cannot hold conversations) raises
`ImportFormatError`.

This package is pure Python on purpose: the management command, the API tests and offline tools all use it,
and none of them should need Django settings to read a file.
"""

from __future__ import annotations

import json
import os
import reprlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from grading.core.evidence import known_role

Format = Literal["openai", "chatgpt", "openwebui"]
FORMATS: tuple[Format, ...] = ("openai", "chatgpt", "openwebui")


class ImportFormatError(Exception):
    """The file as a whole cannot be read (not JSON/JSONL, or no container of conversations at its top level)."""


class ConversationError(Exception):
    """One conversation cannot be imported; the message is the reason shown to the person importing."""


@dataclass(frozen=True)
class ParsedConversation:
    payload: dict[str, Any]


@dataclass(frozen=True)
class ParseFailure:
    external_id: str | None
    index: int
    reason: str


ParseResult = ParsedConversation | ParseFailure


@dataclass(frozen=True)
class _BadLine:
    """A JSONL line that is not JSON: a failure of that conversation, not of the file."""

    reason: str


def read_text(path: os.PathLike[str]) -> str:
    try:
        # utf-8-sig: exports saved by Windows tools often start with a byte-order mark.
        return Path(path).read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ImportFormatError(f"{os.fspath(path)} is not UTF-8 text: {exc.reason}") from exc


# ---------------------------------------------------------------------------------------------------------------
# Loading


def _reject_constant(name: str) -> Any:
    # NaN and Infinity are not JSON; accepting them would put values in payloads that the API cannot serialize.
    raise ValueError(f"{name} is not valid JSON")


def _loads(text: str) -> Any:
    return json.loads(text, parse_constant=_reject_constant)


def load_conversations(text: str, *, top_list_is_one: Callable[[list[Any]], bool] | None = None) -> list[Any]:
    """Split a file into one raw value per conversation.

    1. The whole text as one JSON value: a list is a list of conversations (unless `top_list_is_one` says the list
       itself is one conversation), an object is one conversation, anything else is an ImportFormatError.
    2. Otherwise JSONL, but only if the first non-empty line is a JSON object or array (so a broken pretty-printed
       file is reported as broken JSON, not as a pile of bad lines). Each non-empty line is one conversation; a line
       that is not JSON becomes a `_BadLine` so the other lines still import.
    """
    text = text.removeprefix("\ufeff")
    if not text.strip():
        raise ImportFormatError("the file is empty")
    try:
        value = _loads(text)
    except RecursionError as exc:
        raise ImportFormatError("the file nests JSON too deeply to read") from exc
    except ValueError as whole_error:
        return _load_jsonl(text, whole_error)
    if isinstance(value, list):
        return [value] if top_list_is_one is not None and top_list_is_one(value) else value
    if isinstance(value, dict):
        return [value]
    raise ImportFormatError(
        f"expected a JSON array of conversations or one conversation object, got {json_type(value)}"
    )


def _load_jsonl(text: str, whole_error: ValueError) -> list[Any]:
    lines = [(number, line) for number, line in enumerate(text.splitlines(), start=1) if line.strip()]
    values: list[Any] = []
    for position, (number, line) in enumerate(lines):
        try:
            value = _loads(line)
        except (ValueError, RecursionError) as exc:
            if position == 0:
                raise ImportFormatError(f"not a JSON or JSONL file: {_describe(whole_error)}") from whole_error
            values.append(_BadLine(f"line {number} is not valid JSON: {_describe(exc)}"))
            continue
        if position == 0 and not isinstance(value, dict | list):
            raise ImportFormatError(f"not a JSON or JSONL file: {_describe(whole_error)}") from whole_error
        values.append(value)
    return values


def _describe(exc: BaseException) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} (line {exc.lineno}, column {exc.colno})"
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return str(exc)


def parse_each(
    raw_conversations: Iterable[Any],
    parse_one: Callable[[Any], dict[str, Any]],
    id_of: Callable[[Any], str | None],
) -> list[ParseResult]:
    """Run `parse_one` on each raw conversation, turning its ConversationError into a ParseFailure."""
    results: list[ParseResult] = []
    for index, raw in enumerate(raw_conversations):
        if isinstance(raw, _BadLine):
            results.append(ParseFailure(external_id=None, index=index, reason=raw.reason))
            continue
        try:
            results.append(ParsedConversation(payload=parse_one(raw)))
        except ConversationError as exc:
            results.append(ParseFailure(external_id=id_of(raw), index=index, reason=str(exc)))
        except RecursionError:
            results.append(ParseFailure(external_id=id_of(raw), index=index, reason="nested too deeply"))
    return results


# ---------------------------------------------------------------------------------------------------------------
# Field helpers


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def as_id(value: Any) -> str | None:
    """A usable id: a non-blank string, or an integer (some tools number their messages). Else None."""
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def require_id(value: Any, what: str) -> str:
    ident = as_id(value)
    if ident is None:
        raise ConversationError(f"{what} must be a non-empty string, got {json_type(value)}")
    return ident


def optional_id(value: Any, what: str) -> str | None:
    """A link that may be absent (null) but, when given, must be an id."""
    return None if value is None else require_id(value, what)


def optional_str(value: Any, what: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ConversationError(f"{what} must be a string or null, got {json_type(value)}")


def canonical_role(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise ConversationError(f"{where} has no role (got {json_type(value)})")
    role = known_role(value)
    if role is None:
        raise ConversationError(f"{where} has unknown role {value!r}")
    return role


def content_value(value: Any, where: str) -> str | list[dict[str, Any]] | None:
    """Content as the contract allows it: text, a list of parts (bare strings become text parts), or null."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list):
        parts: list[dict[str, Any]] = []
        for part in value:
            if isinstance(part, str):
                parts.append({"type": "text", "text": part})
            elif isinstance(part, dict):
                parts.append(part)
            else:
                raise ConversationError(f"{where} has a content part that is a {json_type(part)}")
        return parts
    raise ConversationError(f"{where} content must be text, a list of parts or null, got {json_type(value)}")


def content_text(content: str | list[dict[str, Any]] | None) -> str:
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    return "\n".join(part["text"] for part in content if isinstance(part.get("text"), str))


# Anything above this is not seconds since 1970 (it would be after the year 5000): read it as ms, then us, then ns.
_MAX_EPOCH_SECONDS = 1e11


# A time the file gives is shown in a refusal at most this long: the value is untrusted and may be megabytes.
_SHOWN = reprlib.Repr()
_SHOWN.maxstring = _SHOWN.maxlong = _SHOWN.maxother = 60


def _not_a_time(value: Any, what: str) -> ConversationError:
    return ConversationError(f"{what} {_SHOWN.repr(value)} is not a time")


def _out_of_range(value: Any, what: str) -> ConversationError:
    return ConversationError(f"{what} {_SHOWN.repr(value)} is outside the years 1 to 9999 once converted to UTC")


def iso_from_epoch(value: Any, what: str) -> str | None:
    """Epoch seconds (or milliseconds, microseconds, nanoseconds) to ISO-8601 UTC; None when the file gives no
    time (null). `what` names the field in a refusal ("message 'm3' create_time").

    A time the file gives that is not a number, or falls outside the years 1 to 9999 in UTC, refuses the
    conversation (ConversationError), as the API refuses it. Dropping it stored the import time instead (what the
    upsert gives a message without one), which could make that message the newest leaf and so the active path.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _not_a_time(value, what)
    try:
        seconds = float(value)  # OverflowError: an integer too large for a float
        for _ in range(3):
            if abs(seconds) < _MAX_EPOCH_SECONDS:
                break
            seconds /= 1000
        return datetime.fromtimestamp(seconds, tz=UTC).isoformat()
    except (OverflowError, OSError, ValueError):
        raise _out_of_range(value, what) from None


def iso_from_any(value: Any, what: str) -> str | None:
    """An epoch number or an ISO-8601 string (naive means UTC) to ISO-8601; None when the file gives no time.
    Refused as `iso_from_epoch` refuses: a string that is not ISO-8601, or a time outside the years 1 to 9999
    once in UTC (0001-01-01T00:00+14:00 is in 1 BC)."""
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise _not_a_time(value, what) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        try:
            moment.astimezone(UTC)
        except OverflowError:
            raise _out_of_range(value, what) from None
        return moment.isoformat()
    return iso_from_epoch(value, what)


def message(
    *,
    id: str,
    parent_id: str | None,
    role: str,
    content: str | list[dict[str, Any]] | None,
    tool_calls: list[dict[str, Any]] | None = None,
    tool_call_id: str | None = None,
    name: str | None = None,
    created_at: str | None = None,
    hidden: bool = False,
    truncated: bool = False,
) -> dict[str, Any]:
    """One message of the canonical payload, with every key present so payloads compare equal field by field."""
    return {
        "id": id,
        "parent_id": parent_id,
        "role": role,
        "content": content,
        "tool_calls": tool_calls,
        "tool_call_id": tool_call_id,
        "name": name,
        "created_at": created_at,
        "hidden": hidden,
        "truncated": truncated,
    }


def conversation(
    *,
    external_id: str,
    application: str | None,
    active_message_id: str | None,
    messages: list[dict[str, Any]],
    metadata: Any = None,
) -> dict[str, Any]:
    """The canonical payload. Imports are historical exports, so they are closed: nothing is still in progress.
    `metadata` is what the export says produced the conversation (a model), validated with the rest."""
    return {
        "external_id": external_id,
        "application": application,
        "closed": True,
        "active_message_id": active_message_id,
        "messages": messages,
        **({"metadata": metadata} if metadata is not None else {}),
    }


# ---------------------------------------------------------------------------------------------------------------
# Trees


def ensure_unique_ids(messages: list[dict[str, Any]]) -> None:
    seen: set[str] = set()
    for item in messages:
        if item["id"] in seen:
            raise ConversationError(f"message id {item['id']!r} appears more than once")
        seen.add(item["id"])


def order_parents_first(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Order messages so that every parent comes before its children (a pre-order walk, siblings in input order).

    Export formats store trees as unordered maps; a stable parents-first order makes two parses of the same file
    identical and lets the upsert insert in one pass. Messages whose parent is missing count as roots (the evidence
    code reports the dangling link); messages caught in a cycle are appended in input order for the same reason.
    """
    ids = {item["id"] for item in messages}
    children: dict[str | None, list[dict[str, Any]]] = {}
    for item in messages:
        parent = item["parent_id"] if item["parent_id"] in ids else None
        children.setdefault(parent, []).append(item)
    ordered: list[dict[str, Any]] = []
    visited: set[str] = set()
    stack = list(reversed(children.get(None, [])))
    while stack:
        item = stack.pop()
        if item["id"] in visited:
            continue
        visited.add(item["id"])
        ordered.append(item)
        stack.extend(reversed(children.get(item["id"], [])))
    ordered.extend(item for item in messages if item["id"] not in visited)
    return ordered


def link_tool_results(messages: list[dict[str, Any]]) -> None:
    """Give each tool result that lacks a `tool_call_id` the id of the call it answers (in place).

    Formats that predate tool-call ids (ChatGPT's `recipient`, OpenAI's legacy `function_call`) link a result to
    its call only by the tool's name. Walking up from the result, within the same turn (stopping at a user message),
    the nearest assistant call of a function with the result's name is the one it answers; failing a name match,
    the single call of the result's direct parent. A result that matches nothing keeps `tool_call_id` None, and the
    evidence code then sees the call without a result and reports the record as incomplete instead of guessing.
    """
    by_id = {item["id"]: item for item in messages}
    for item in messages:
        if item["role"] != "tool" or item["tool_call_id"] is not None:
            continue
        item["tool_call_id"] = _call_answered_by(item, by_id)


def _call_answered_by(result: dict[str, Any], by_id: dict[str, dict[str, Any]]) -> str | None:
    seen: set[str] = set()
    parent_id = result["parent_id"]
    direct_parent = by_id.get(parent_id) if parent_id is not None else None
    while parent_id is not None and parent_id in by_id and parent_id not in seen:
        seen.add(parent_id)
        ancestor = by_id[parent_id]
        if ancestor["role"] == "user":
            break
        for call in reversed(ancestor["tool_calls"] or []):
            function = call.get("function")
            if isinstance(function, dict) and function.get("name") == result["name"]:
                return as_id(call.get("id"))
        parent_id = ancestor["parent_id"]
    # Without a name match, only an unambiguous call (the direct parent's only one) is taken as the answered one.
    if (
        direct_parent is not None
        and direct_parent["role"] == "assistant"
        and len(direct_parent["tool_calls"] or []) == 1
    ):
        return as_id(direct_parent["tool_calls"][0].get("id"))
    return None

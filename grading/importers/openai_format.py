"""OpenAI chat messages: a JSON array or JSONL of conversations.

A conversation is either a bare list of chat messages or an object
`{"external_id" | "id" | "conversation_id": ..., "application"?: ..., "active_message_id"?: ..., "metadata"?: {...},
"messages": [...]}`.
A top-level array whose items are all messages (objects with a `role` and no `messages`) is one conversation.

Messages carry `role`, `content` (text, parts or null), `tool_calls`, `tool_call_id`, `name`, and optionally `id`,
`parent_id`, `created_at` (epoch or ISO-8601), `hidden`, `truncated`. A message without `id` gets `m<index>`; a
message without a `parent_id` key hangs under the message before it, so plain logs become a linear chain while
explicit `parent_id`s (null for a root) describe branches. Legacy `function_call` / `function` messages become a
tool call with id `<message id>-call` and a tool result linked to it by function name.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from grading.importers.base import (
    ConversationError,
    ParseResult,
    as_id,
    canonical_role,
    content_value,
    conversation,
    ensure_unique_ids,
    iso_from_any,
    json_type,
    link_tool_results,
    load_conversations,
    message,
    optional_id,
    optional_str,
    order_parents_first,
    parse_each,
    require_id,
)

_ID_KEYS = ("external_id", "id", "conversation_id")


def parse(text: str) -> list[ParseResult]:
    return parse_each(load_conversations(text, top_list_is_one=_is_message_list), _parse_conversation, _id_of)


def _is_message_list(items: list[Any]) -> bool:
    return bool(items) and all(isinstance(item, dict) and "role" in item and "messages" not in item for item in items)


def _id_of(raw: Any) -> str | None:
    if isinstance(raw, dict):
        for key in _ID_KEYS:
            if as_id(raw.get(key)) is not None:
                return as_id(raw.get(key))
    return None


def _parse_conversation(raw: Any) -> dict[str, Any]:
    if isinstance(raw, list):
        raw_messages: Any = raw
        envelope: dict[str, Any] = {}
    elif isinstance(raw, dict):
        raw_messages = raw.get("messages")
        envelope = raw
    else:
        raise ConversationError(f"a conversation must be a list of messages or an object, got {json_type(raw)}")
    if not isinstance(raw_messages, list):
        raise ConversationError(f"messages must be a list, got {json_type(raw_messages)}")
    if not raw_messages:
        raise ConversationError("the conversation has no messages")

    messages = _parse_messages(raw_messages)
    ensure_unique_ids(messages)
    link_tool_results(messages)

    active_message_id = optional_id(envelope.get("active_message_id"), "active_message_id")
    if active_message_id is not None and active_message_id not in {item["id"] for item in messages}:
        raise ConversationError(f"active_message_id {active_message_id!r} is not one of the messages")
    return conversation(
        external_id=_id_of(envelope) or _content_hash(messages),
        application=optional_str(envelope.get("application"), "application"),
        active_message_id=active_message_id,
        messages=order_parents_first(messages),
        metadata=envelope.get("metadata"),
    )


def _parse_messages(raw_messages: list[Any]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    previous_id: str | None = None
    for index, raw in enumerate(raw_messages):
        where = f"message {index}"
        if not isinstance(raw, dict):
            raise ConversationError(f"{where} must be an object, got {json_type(raw)}")
        message_id = f"m{index}" if raw.get("id") is None else require_id(raw["id"], f"{where} id")
        where = f"message {message_id!r}"
        parent_id = optional_id(raw["parent_id"], f"{where} parent_id") if "parent_id" in raw else previous_id
        role = canonical_role(raw.get("role"), where)
        messages.append(
            message(
                id=message_id,
                parent_id=parent_id,
                role=role,
                content=content_value(raw.get("content"), where),
                tool_calls=_tool_calls(raw, message_id, where),
                tool_call_id=optional_id(raw.get("tool_call_id"), f"{where} tool_call_id"),
                name=optional_str(raw.get("name"), f"{where} name"),
                created_at=iso_from_any(raw.get("created_at"), f"{where} created_at"),
                hidden=raw.get("hidden") is True,
                truncated=raw.get("truncated") is True,
            )
        )
        previous_id = message_id
    return messages


def _tool_calls(raw: dict[str, Any], message_id: str, where: str) -> list[dict[str, Any]] | None:
    calls = raw.get("tool_calls")
    legacy = raw.get("function_call")
    if calls is None and isinstance(legacy, dict):
        # Legacy single function call: give it an id so its result can be linked like any other tool call.
        return [{"id": f"{message_id}-call", "type": "function", "function": legacy}]
    if calls is None:
        return None
    if not isinstance(calls, list):
        raise ConversationError(f"{where} tool_calls must be a list, got {json_type(calls)}")
    for call in calls:
        # The evidence contract pairs every call with its result by id, so a call without one is unusable.
        if not isinstance(call, dict) or as_id(call.get("id")) is None:
            raise ConversationError(f"{where} has a tool call without an id")
    return calls


def _content_hash(messages: list[dict[str, Any]]) -> str:
    """A stable external id for a conversation that has none, so importing the same file twice upserts, not copies."""
    canonical = json.dumps(messages, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    # surrogatepass: a lone surrogate (JSON can escape one, UTF-8 cannot hold it) must not stop the import here;
    # the payload's validation refuses it, by location, as it refuses it from the API.
    return "openai-" + hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()[:16]

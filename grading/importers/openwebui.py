"""Open WebUI chat export: a list of chats (or one chat object), each `{"id", "title", "chat": {...}, ...}`.

Mapping decisions:

- **Tree.** `chat.history.messages` (id -> message with `parentId`) holds every branch; all of it is imported and
  `chat.history.currentId` is the active leaf. `parentId` is authoritative, `childrenIds` is redundant and ignored.
  Older exports without `history` carry a `chat.messages` list; it is read with the same fields, as a linear chain
  where `parentId` is absent.
- **Content is verbatim.** Tool calls and reasoning live inside the assistant's `content` as
  `<details type="tool_calls">` / `<details type="reasoning">` blocks (and duplicated in `output`). They are kept in
  the text and not split into tool messages: the block is exactly what the user saw, it already contains the tool
  result (so grounding can be checked from the text), and synthesizing messages and ids the source never had would
  put invented structure into the fingerprinted evidence. Hence no `tool_calls` are emitted for this format.
- **Truncated.** An assistant message with `done: false` never finished generating (stopped or still streaming at
  export), which is what "truncated by the source" means; a missing `done` (older exports) is not truncated.
- **Times.** `timestamp` may be epoch seconds or milliseconds; both become ISO-8601 UTC.
- No `name` is set: the assistant's `model` identifies the backend, not a participant, and must not reach the judge.
  The chat's `models` become its metadata's `model` instead: kept with the conversation, never evidence.
"""

from __future__ import annotations

from typing import Any

from grading.importers.base import (
    ConversationError,
    ParseResult,
    as_id,
    canonical_role,
    content_value,
    conversation,
    ensure_unique_ids,
    iso_from_epoch,
    json_type,
    load_conversations,
    message,
    optional_id,
    order_parents_first,
    parse_each,
    require_id,
)


def parse(text: str) -> list[ParseResult]:
    return parse_each(load_conversations(text), _parse_conversation, _id_of)


def _chat_of(raw: dict[str, Any]) -> Any:
    # Some tools export the inner chat object alone (with `history` at the top level).
    return raw.get("chat", raw)


def _id_of(raw: Any) -> str | None:
    if not isinstance(raw, dict):
        return None
    chat = _chat_of(raw)
    return as_id(raw.get("id")) or (as_id(chat.get("id")) if isinstance(chat, dict) else None)


def _parse_conversation(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ConversationError(f"a chat must be an object, got {json_type(raw)}")
    external_id = _id_of(raw)
    if external_id is None:
        raise ConversationError("the chat has no id")
    chat = _chat_of(raw)
    if not isinstance(chat, dict):
        raise ConversationError(f"chat must be an object, got {json_type(chat)}")

    history = chat.get("history")
    active_message_id = None
    if isinstance(history, dict) and history.get("messages"):
        messages, active_message_id = _from_history(history)
    elif isinstance(chat.get("messages"), list) and chat["messages"]:
        messages = _from_list(chat["messages"])
    else:
        raise ConversationError("the chat has no history.messages and no messages list")
    if not messages:
        raise ConversationError("the chat has no messages")
    ensure_unique_ids(messages)
    return conversation(
        external_id=external_id,
        application=None,
        active_message_id=active_message_id,
        messages=order_parents_first(messages),
        metadata=_models_of(chat),
    )


def _models_of(chat: dict[str, Any]) -> dict[str, str] | None:
    """The chat's model as metadata (`models` lists the one or several a chat was held with: several are joined)."""
    models = chat.get("models")
    if isinstance(models, list) and models and all(isinstance(m, str) and m for m in models):
        return {"model": ",".join(models)}
    return None


def _from_history(history: dict[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
    raw_messages = history["messages"]
    if not isinstance(raw_messages, dict):
        raise ConversationError(f"history.messages must be an object, got {json_type(raw_messages)}")
    messages: list[dict[str, Any]] = []
    for key, raw in raw_messages.items():
        message_id = require_id(key, "a message id")
        if not isinstance(raw, dict):
            raise ConversationError(f"message {message_id!r} must be an object, got {json_type(raw)}")
        messages.append(_message(message_id, raw, raw.get("parentId")))
    active = optional_id(history.get("currentId"), "history.currentId")
    if active is not None and active not in raw_messages:
        raise ConversationError(f"history.currentId {active!r} is not one of the messages")
    return messages, active


def _from_list(raw_messages: list[Any]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    previous_id: str | None = None
    for index, raw in enumerate(raw_messages):
        if not isinstance(raw, dict):
            raise ConversationError(f"message {index} must be an object, got {json_type(raw)}")
        message_id = f"m{index}" if raw.get("id") is None else require_id(raw["id"], f"message {index} id")
        messages.append(_message(message_id, raw, raw.get("parentId", previous_id)))
        previous_id = message_id
    return messages


def _message(message_id: str, raw: dict[str, Any], parent: Any) -> dict[str, Any]:
    where = f"message {message_id!r}"
    role = canonical_role(raw.get("role"), where)
    return message(
        id=message_id,
        parent_id=optional_id(parent, f"{where} parentId"),
        role=role,
        content=content_value(raw.get("content"), where),
        created_at=iso_from_epoch(raw.get("timestamp"), f"{where} timestamp"),
        truncated=role == "assistant" and raw.get("done") is False,
    )

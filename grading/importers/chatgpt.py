"""ChatGPT data export (`conversations.json`): a list of conversations, each a tree of nodes in `mapping`.

Mapping decisions (the evidence contract depends on them):

- **Tree.** Every node that carries a message becomes a message, abandoned branches included: the evidence code
  computes the active path itself. Nodes without a message (the root) are skipped; their children hang under the
  nearest ancestor that has one (or become roots). `parent` is the authoritative link; `children` is redundant and
  ignored. A parent id missing from the mapping is kept as is, so the evidence code reports the record incomplete.
- **Active leaf.** `active_message_id` is `current_node`, or its nearest message-carrying ancestor when
  `current_node` has no message. A `current_node` outside the mapping fails the conversation.
- **Hidden.** `metadata.is_visually_hidden_from_conversation` marks `hidden=True` (the empty system prompt, custom
  instructions). Hidden messages stay on the path: the fingerprint covers what the model read, not only what showed.
- **Truncated.** "Truncated by the source" means the source says its record of a message is not the whole message:
  `status` other than `finished_successfully` (`in_progress`, `finished_partial_completion`, ...) or
  `metadata.finish_details.type == "interrupted"` (generation stopped by the user or an error). The stored text is
  then a prefix of a reply that never finished, and may not even be what the user's screen showed, so the evidence
  contract must not grade it as a delivered answer. A reply that hit the model's length limit (`max_tokens`) is
  complete as a record: it is what was delivered, and judging it as such is right.
- **Tool calls.** An assistant message whose `recipient` is not `all` is addressed to a tool (`python`, `browser`,
  `dalle.text2im`, ...): it becomes an assistant message with `content=None` and
  `tool_calls=[{"id": <message id>, "type": "function", "function": {"name": <recipient>, "arguments": <its text>}}]`
  (its text is the code or query, so nothing is lost; non-text parts stay in `content`). A `tool` message gets
  `name=author.name` and `tool_call_id` = the id of the nearest call in the same turn whose recipient equals that
  name (see `base.link_tool_results`), which is how ChatGPT itself pairs them: the export has no call ids.
- **Content.** `parts` (text, multimodal_text) become text when every part is a string, else a list of parts where
  strings are text parts and other parts (image asset pointers, ...) are kept as `{"type": <content_type>, ...}`.
  Other content types keep their text fields (`code`/`execution_output` `text`, browsing `result`, custom
  instructions); a content type with no text is kept whole as one dict part.
- **Times.** `create_time` (epoch seconds) becomes ISO-8601 UTC.
- **Metadata.** `default_model_slug` becomes the conversation's `model`.
"""

from __future__ import annotations

from typing import Any

from grading.importers.base import (
    ConversationError,
    ParseResult,
    as_id,
    canonical_role,
    content_text,
    conversation,
    iso_from_epoch,
    json_type,
    link_tool_results,
    load_conversations,
    message,
    optional_id,
    order_parents_first,
    parse_each,
    require_id,
)

# Text-bearing fields of non-`parts` content types, in the order they are joined.
_TEXT_FIELDS = ("title", "url", "text", "result", "summary", "user_profile", "user_instructions", "model_set_context")
_TEXT_PART_TYPES = frozenset({"text", "audio_transcription"})


def parse(text: str) -> list[ParseResult]:
    return parse_each(load_conversations(text), _parse_conversation, _id_of)


def _id_of(raw: Any) -> str | None:
    if not isinstance(raw, dict):
        return None
    return as_id(raw.get("id")) or as_id(raw.get("conversation_id"))


def _parse_conversation(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ConversationError(f"a conversation must be an object, got {json_type(raw)}")
    external_id = _id_of(raw)
    if external_id is None:
        raise ConversationError("the conversation has no id or conversation_id")
    mapping = raw.get("mapping")
    if mapping is None:
        raise ConversationError("the conversation has no mapping, so it has no messages to import")
    if not isinstance(mapping, dict):
        raise ConversationError(f"mapping must be an object, got {json_type(mapping)}")

    tree = _Tree(mapping)
    messages = [
        _message(key, node["message"], tree.nearest_message(tree.parents[key]))
        for key, node in tree.nodes.items()
        if key in tree.carriers
    ]
    if not messages:
        raise ConversationError("the mapping has no node with a message")
    link_tool_results(messages)
    return conversation(
        external_id=external_id,
        application=None,
        active_message_id=_active_message_id(raw.get("current_node"), tree),
        messages=order_parents_first(messages),
        metadata={"model": slug} if isinstance(slug := raw.get("default_model_slug"), str) and slug else None,
    )


class _Tree:
    """The mapping's nodes and parent links, checked for the types the contract needs."""

    def __init__(self, mapping: dict[str, Any]) -> None:
        self.nodes: dict[str, dict[str, Any]] = {}
        self.parents: dict[str, str | None] = {}
        for key, node in mapping.items():
            require_id(key, "a node id")
            if not isinstance(node, dict):
                raise ConversationError(f"node {key!r} must be an object, got {json_type(node)}")
            self.nodes[key] = node
            self.parents[key] = optional_id(node.get("parent"), f"node {key!r} parent")
        self.carriers = {key for key, node in self.nodes.items() if node.get("message") is not None}

    def nearest_message(self, start: str | None) -> str | None:
        """`start` itself if it carries a message or is not in the mapping, else its nearest such ancestor."""
        seen: set[str] = set()
        current = start
        while current is not None and current in self.nodes and current not in self.carriers:
            if current in seen:
                raise ConversationError(f"the nodes above {start!r} form a cycle")
            seen.add(current)
            current = self.parents[current]
        return current


def _active_message_id(current_node: Any, tree: _Tree) -> str | None:
    if current_node is None:
        return None
    current = require_id(current_node, "current_node")
    if current not in tree.nodes:
        raise ConversationError(f"current_node {current!r} is not in the mapping")
    active = tree.nearest_message(current)
    if active is None or active not in tree.carriers:
        raise ConversationError(f"current_node {current!r} has no message on its path")
    return active


def _message(key: str, raw: Any, parent_id: str | None) -> dict[str, Any]:
    where = f"message {key!r}"
    if not isinstance(raw, dict):
        raise ConversationError(f"{where} must be an object, got {json_type(raw)}")
    author = raw.get("author")
    if not isinstance(author, dict):
        raise ConversationError(f"{where} has no author")
    role = canonical_role(author.get("role"), where)
    name = author.get("name") if isinstance(author.get("name"), str) else None
    content = _content(raw.get("content"), where)
    metadata = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
    finish_details = metadata.get("finish_details")
    finish_type = finish_details.get("type") if isinstance(finish_details, dict) else None
    status = raw.get("status")

    tool_calls = None
    recipient = raw.get("recipient")
    if role == "assistant" and isinstance(recipient, str) and recipient not in ("", "all"):
        function = {"name": recipient, "arguments": content_text(content)}
        tool_calls = [{"id": key, "type": "function", "function": function}]
        # The text now lives in the call's arguments; only non-text parts would be lost by dropping the content.
        content = content if isinstance(content, list) else None

    return message(
        id=key,
        parent_id=parent_id,
        role=role,
        content=content,
        tool_calls=tool_calls,
        name=name,
        created_at=iso_from_epoch(raw.get("create_time"), f"{where} create_time"),
        hidden=metadata.get("is_visually_hidden_from_conversation") is True,
        truncated=(isinstance(status, str) and status != "finished_successfully") or finish_type == "interrupted",
    )


def _content(raw: Any, where: str) -> str | list[dict[str, Any]] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ConversationError(f"{where} content must be an object, got {json_type(raw)}")
    content_type = raw.get("content_type") if isinstance(raw.get("content_type"), str) else "unknown"
    parts = raw.get("parts")
    if isinstance(parts, list):
        return _parts(parts, where)
    texts = [raw[field] for field in _TEXT_FIELDS if isinstance(raw.get(field), str)]
    if texts:
        return "\n\n".join(text for text in texts if text)
    rest = {field: value for field, value in raw.items() if field != "content_type"}
    return [{**rest, "type": content_type}] if rest else None


def _parts(parts: list[Any], where: str) -> str | list[dict[str, Any]]:
    if all(isinstance(part, str) for part in parts):
        return "\n".join(parts)
    described: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, str):
            described.append({"type": "text", "text": part})
        elif isinstance(part, dict):
            part_type = part.get("content_type") if isinstance(part.get("content_type"), str) else "unknown"
            if part_type in _TEXT_PART_TYPES and isinstance(part.get("text"), str):
                described.append({"type": "text", "text": part["text"]})
            else:
                described.append({**{k: v for k, v in part.items() if k != "content_type"}, "type": part_type})
        else:
            raise ConversationError(f"{where} has a content part that is a {json_type(part)}")
    return described

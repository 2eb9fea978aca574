"""Reading OpenInference spans (Arize Phoenix's convention, emitted by the OpenInference instrumentations of the
OpenAI SDK, LlamaIndex, DSPy, CrewAI, smolagents, Haystack, LangChain and others).

A span says what it is in `openinference.span.kind`. An `LLM` span is a model call; its messages are flattened
into indexed attributes:

    llm.input_messages.<i>.message.role | .content | .name | .tool_call_id
    llm.input_messages.<i>.message.contents.<j>.message_content.type | .text | .image.image.url
    llm.input_messages.<i>.message.tool_calls.<k>.tool_call.id | .function.name | .function.arguments
    llm.output_messages.<i>.message.* (the same)

A `TOOL` span carries a tool's result in `output.value` and the call it answers in `tool.id` (or
`tool_call.id`). Every other kind (CHAIN, AGENT, RETRIEVER, EMBEDDING, ...) summarises or feeds model calls and is
not read as messages. `session.id` names the conversation.

Pure Python over decoded attributes: this module returns messages in the OpenAI shape, as plain dicts, and
grading/otlp/genai.py validates them as it validates every convention's.
"""

import re
from typing import Any

from grading.otlp.content import content_of

SPAN_KIND = "openinference.span.kind"
MODEL_CALL = "LLM"
TOOL = "TOOL"
SESSION_ID = "session.id"
TOOL_CALL_ID = "tool.id"
MESSAGES = ("llm.input_messages", "llm.output_messages")
NO_CONTENT = "OpenInference hides it (OPENINFERENCE_HIDE_INPUTS, OPENINFERENCE_HIDE_INPUT_MESSAGES or TraceConfig)"
_MESSAGE = re.compile(r"^llm\.(input|output)_messages\.(\d{1,6})\.message\.(.+)$")
_CONTENT_PART = re.compile(r"^contents\.(\d{1,6})\.message_content\.(.+)$")
_TOOL_CALL = re.compile(r"^tool_calls\.(\d{1,6})\.tool_call\.(id|function\.name|function\.arguments)$")


def applies(attributes: dict[str, Any]) -> bool:
    return SPAN_KIND in attributes


def is_model_call(attributes: dict[str, Any]) -> bool:
    return attributes[SPAN_KIND] == MODEL_CALL


def span_name(attributes: dict[str, Any]) -> str:
    return f"{attributes[SPAN_KIND]}"


def model_call_messages(attributes: dict[str, Any]) -> tuple[list[dict], list[dict]] | None:
    """(inputs, outputs) of an LLM span as OpenAI messages, or None when it captured no messages."""
    fields: dict[str, dict[int, dict[str, Any]]] = {"input": {}, "output": {}}
    for key, value in attributes.items():
        match = _MESSAGE.match(key)
        if match:
            fields[match[1]].setdefault(int(match[2]), {})[match[3]] = value
    if not fields["input"] and not fields["output"]:
        return None
    inputs = [_message(fields["input"][index]) for index in sorted(fields["input"])]
    outputs = [_message(fields["output"][index], default_role="assistant") for index in sorted(fields["output"])]
    return inputs, outputs


def tool_result(attributes: dict[str, Any]) -> tuple[Any, Any] | None:
    """(the id of the call it answers, its result) of a TOOL span that captured both, else None."""
    call_id = attributes.get(TOOL_CALL_ID, attributes.get("tool_call.id"))
    if attributes[SPAN_KIND] != TOOL or not call_id or "output.value" not in attributes:
        return None
    return call_id, attributes["output.value"]


def conversation_id(attributes: dict[str, Any]) -> Any:
    return attributes.get(SESSION_ID)


def response_id(attributes: dict[str, Any]) -> None:
    return None  # OpenInference records none


def _message(fields: dict[str, Any], *, default_role: str | None = None) -> dict:
    parts: dict[int, dict[str, Any]] = {}
    calls: dict[int, dict[str, Any]] = {}
    for key, value in fields.items():
        if part := _CONTENT_PART.match(key):
            parts.setdefault(int(part[1]), {})[part[2]] = value
        elif call := _TOOL_CALL.match(key):
            calls.setdefault(int(call[1]), {})[call[2]] = value
    content = fields.get("content")
    if content is None and parts:
        ordered = [parts[index] for index in sorted(parts)]
        texts = [part.get("text") for part in ordered if part.get("type") == "text"]
        content = content_of(texts, [_content_part(part) for part in ordered if part.get("type") != "text"])
    return {
        "role": fields.get("role", default_role),
        "content": content,
        "tool_calls": [
            {
                "id": calls[index].get("id"),
                "type": "function",
                "function": {
                    "name": calls[index].get("function.name"),
                    "arguments": calls[index].get("function.arguments"),
                },
            }
            for index in sorted(calls)
        ]
        or None,
        "tool_call_id": fields.get("tool_call_id"),
        "name": fields.get("name"),
    }


def _content_part(fields: dict[str, Any]) -> dict:
    """A part other than text in the OpenAI shape: image URLs as OpenAI names them, others as recorded."""
    if fields.get("type") == "image" and "image.image.url" in fields:
        return {"type": "image_url", "image_url": {"url": fields["image.image.url"]}}
    return {key: value for key, value in fields.items()}

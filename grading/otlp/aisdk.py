"""Reading the Vercel AI SDK's telemetry (`experimental_telemetry: {isEnabled: true}`), whose spans name their
operation in `ai.operationId`.

A provider call (`ai.generateText.doGenerate`, `ai.streamText.doStream`) is a model call: its input is
`ai.prompt.messages` (the SDK's prompt, JSON: system text; user, assistant and tool messages of typed parts), its
output `ai.response.text` and `ai.response.toolCalls`. An `ai.toolCall` span carries a tool's result
(`ai.toolCall.id`, `ai.toolCall.result`). The outer `ai.generateText`/`ai.streamText` spans summarise their
provider calls and are not read. The SDK has no conversation attribute: `ai.telemetry.metadata.sessionId` (what
Langfuse and others read as the session) names it; without it, each call's trace is a conversation.

Pure Python over decoded attributes: this module returns messages in the OpenAI shape, as plain dicts, and
grading/otlp/genai.py validates them as it validates every convention's.
"""

import json
from typing import Any

from grading.otlp.content import content_of

OPERATION = "ai.operationId"
MODEL_CALLS = frozenset({"ai.generateText.doGenerate", "ai.streamText.doStream"})
TOOL_CALL = "ai.toolCall"
SESSION_ID = "ai.telemetry.metadata.sessionId"
TOOL_CALL_ID = "ai.toolCall.id"
MESSAGES = ("ai.prompt.messages", "ai.response")
NO_CONTENT = "the AI SDK's telemetry records it unless recordInputs is false"


class UnreadablePrompt(ValueError):
    """`ai.prompt.messages` or `ai.response.toolCalls` is not what the SDK writes; the message says what."""


def applies(attributes: dict[str, Any]) -> bool:
    return OPERATION in attributes


def is_model_call(attributes: dict[str, Any]) -> bool:
    return attributes[OPERATION] in MODEL_CALLS


def span_name(attributes: dict[str, Any]) -> str:
    return f"{attributes[OPERATION]}"


def model_call_messages(attributes: dict[str, Any]) -> tuple[list[dict], list[dict]] | None:
    """(inputs, outputs) of a provider call as OpenAI messages, or None when it recorded no prompt (the SDK's
    `recordInputs: false`)."""
    if "ai.prompt.messages" not in attributes:
        return None
    prompt = _json(attributes["ai.prompt.messages"], "ai.prompt.messages")
    if not isinstance(prompt, list):
        raise UnreadablePrompt("ai.prompt.messages must be a JSON array of messages")
    inputs = [turn for index, message in enumerate(prompt) for turn in _turns(message, index)]
    calls = _json(attributes.get("ai.response.toolCalls", "[]"), "ai.response.toolCalls")
    if not isinstance(calls, list) or not all(isinstance(call, dict) for call in calls):
        raise UnreadablePrompt("ai.response.toolCalls must be a JSON array of tool calls")
    text = attributes.get("ai.response.text")
    if text is None and not calls:
        return inputs, []
    reply = {
        "role": "assistant",
        "content": text if text else None,
        "tool_calls": [_tool_call(call.get("toolCallId"), call.get("toolName"), call.get("input")) for call in calls]
        or None,
    }
    return inputs, [reply]


def tool_result(attributes: dict[str, Any]) -> tuple[Any, Any] | None:
    """(the id of the call it answers, its result) of an `ai.toolCall` span that recorded its result."""
    if attributes[OPERATION] != TOOL_CALL or "ai.toolCall.result" not in attributes or not attributes.get(TOOL_CALL_ID):
        return None
    return attributes[TOOL_CALL_ID], attributes["ai.toolCall.result"]


def conversation_id(attributes: dict[str, Any]) -> Any:
    return attributes.get(SESSION_ID)


def response_id(attributes: dict[str, Any]) -> Any:
    return attributes.get("ai.response.id")


def _turns(message: Any, index: int) -> list[dict]:
    """One prompt message as OpenAI messages: a tool message holds one result per OpenAI message."""
    where = f"ai.prompt.messages[{index}]"
    if not isinstance(message, dict):
        raise UnreadablePrompt(f"{where} must be an object with role and content")
    role, content = message.get("role"), message.get("content")
    if isinstance(content, str) or content is None:
        return [{"role": role, "content": content}]
    if not isinstance(content, list) or not all(isinstance(part, dict) for part in content):
        raise UnreadablePrompt(f"{where}.content must be text or an array of parts")
    if role == "tool":
        return [
            {"role": "tool", "tool_call_id": part.get("toolCallId"), "content": _tool_output(part.get("output"))}
            for part in content
            if part.get("type") == "tool-result"
        ]
    texts = [part.get("text") for part in content if part.get("type") == "text"]
    others = [_part(part) for part in content if part.get("type") not in ("text", "tool-call", "reasoning")]
    calls = [
        _tool_call(part.get("toolCallId"), part.get("toolName"), part.get("input"))
        for part in content
        if part.get("type") == "tool-call"
    ]
    return [{"role": role, "content": content_of(texts, others), "tool_calls": calls or None}]


def _tool_call(call_id: Any, name: Any, arguments: Any) -> dict:
    """As the OpenAI format carries it: arguments as compact JSON text (the SDK gives an object or that text)."""
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _tool_output(output: Any) -> str:
    """A tool result's output (`{type: text|json|error-text|error-json|content, value}`) as message text."""
    value = output.get("value") if isinstance(output, dict) else output
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _part(part: dict) -> dict:
    """A file part as an OpenAI image part when it is an image by URL; anything else as recorded."""
    if part.get("type") == "file" and str(part.get("mediaType", "")).startswith("image/"):
        data = part.get("data")
        if isinstance(data, str) and data.startswith(("http://", "https://", "data:")):
            return {"type": "image_url", "image_url": {"url": data}}
    return part


def _json(value: Any, name: str) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as exc:
        raise UnreadablePrompt(f"{name} is not valid JSON: {exc}") from None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")

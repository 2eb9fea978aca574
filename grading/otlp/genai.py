"""Reading the GenAI semantic conventions off OTLP spans: which spans are model calls and tool executions, and
the messages they carry, in the JSON API's message shape.

Pure Python over the decoded protobuf: no Django, no database. A span that names its OpenInference kind is read by
grading/otlp/openinference.py, one that names a Vercel AI SDK operation by grading/otlp/aisdk.py. Otherwise,
understood in this order of preference:

1. the current conventions: `gen_ai.system_instructions`, `gen_ai.input.messages`, `gen_ai.output.messages`
   (role and typed parts), as span attributes (JSON strings or structured values) or on a
   `gen_ai.client.inference.operation.details` span event;
2. the deprecated indexed attributes `gen_ai.prompt.N.*` and `gen_ai.completion.N.*`;
3. the deprecated span events `gen_ai.system.message`, `gen_ai.user.message`, `gen_ai.assistant.message`,
   `gen_ai.tool.message` (the input, in order) and `gen_ai.choice` (the output).

A model call whose span carries none of these is awaited (`ReadSpans.awaiting`): the instrumentations' default
sends the messages as OTLP log records of those events instead (grading/otlp/logs.py), which are joined to the
span by its ids (grading/otlp/pending.py).

A span whose `gen_ai.operation.name` is `execute_tool` gives a tool result (`gen_ai.tool.call.id`,
`gen_ai.tool.call.result`). Agent, embedding and retrieval spans are not model calls: the messages of an
agent span summarise its model calls, and reading them too would add a second copy of the reply.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import ModuleType
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status
from pydantic import TypeAdapter, ValidationError

from grading.core.evidence import known_role
from grading.core.schemas import MetadataKey, MetadataValue
from grading.otlp import aisdk, openinference
from grading.otlp.content import content_of
from grading.otlp.wire import hex_id

INFERENCE_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
TOOL_OPERATION = "execute_tool"
DETAILS_EVENT = "gen_ai.client.inference.operation.details"
INPUT_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
CHOICE_EVENT = "gen_ai.choice"
# Model calls in conventions this receiver does not read: the sender is told so in partial_success rather than
# answered as if everything were taken. MLflow writes its attribute values as JSON, so its strings come quoted.
UNREAD_MODEL_CALLS = {
    "langfuse.observation.type": ("Langfuse", frozenset({"generation"})),
    "mlflow.spanType": ("MLflow", frozenset({"LLM", "CHAT_MODEL"})),
}
UNKNOWN_SERVICE = "unknown_service"  # what the OpenTelemetry SDKs report when service.name is not set
# Parts that are not what the user saw: the model's hidden reasoning is not evidence of the reply.
SKIPPED_PART_TYPES = frozenset({"reasoning"})
_INDEXED = re.compile(r"^gen_ai\.(prompt|completion)\.(\d{1,6})\.(.+)$")
_INDEXED_TOOL_CALL = re.compile(r"^tool_calls\.(\d{1,6})\.(id|name|arguments|type)$")


class ContentError(Exception):
    """A span whose GenAI content cannot be read as messages; the message names the span and the attribute."""


@dataclass(frozen=True)
class Turn:
    """One message as a call carried it, in the JSON API's shape (no id or parent yet: the receiver places it)."""

    role: str
    content: Any = None
    tool_calls: list | None = None
    tool_call_id: str | None = None
    name: str | None = None

    def key(self) -> str:
        """What makes two turns the same message: everything the fingerprint reads except the id."""
        return json.dumps(
            [self.role, self.content, self.tool_calls, self.tool_call_id, self.name],
            sort_keys=True,
            ensure_ascii=False,
        )


@dataclass(frozen=True)
class SpanOrigin:
    trace_id: str
    span_id: str
    started_at: datetime | None
    ended_at: datetime | None
    conversation_id: str | None  # gen_ai.conversation.id, when the span has one
    application: str
    where: str  # resourceSpans[r].scopeSpans[s].spans[n], for error messages
    end_user: str | None = None  # `enduser.id` of the span, else of its resource: the person the call was for
    # What produced the call (`METADATA_ATTRIBUTES`), from its resource and then its own attributes: (key, value) pairs.
    metadata: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class _About:
    """Who and what a span's call is about, from the span's attributes over its resource's."""

    end_user: str | None
    metadata: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ModelCall:
    origin: SpanOrigin
    inputs: list[Turn]
    outputs: list[Turn]
    response_id: str | None


@dataclass(frozen=True)
class ToolResult:
    origin: SpanOrigin
    call_id: str
    content: Any


@dataclass(frozen=True)
class AwaitedCall:
    """A model call whose span carries no messages: they are expected as OTLP log records."""

    origin: SpanOrigin
    response_id: str | None


@dataclass
class ReadSpans:
    calls: list[ModelCall] = field(default_factory=list)
    tool_results: list[ToolResult] = field(default_factory=list)
    awaiting: list[AwaitedCall] = field(default_factory=list)
    ignored: int = 0  # no GenAI content: acknowledged, nothing to store
    rejected: list[str] = field(default_factory=list)  # model calls that carry no messages, with the reason
    span_count: int = 0


def read_spans(request: ExportTraceServiceRequest) -> ReadSpans:
    """Every span of the request, sorted into model calls, tool results, ignored and rejected.

    Raises ContentError for a span that is not valid OTLP (ids) or whose GenAI content is malformed: the whole
    request is then refused, so nothing of it is half-written.
    """
    read = ReadSpans()
    for r, resource_spans in enumerate(request.resource_spans):
        resource = attribute_values(resource_spans.resource.attributes)
        application = resource.get("service.name")
        if not isinstance(application, str) or not application:
            application = UNKNOWN_SERVICE
        for s, scope_spans in enumerate(resource_spans.scope_spans):
            for n, span in enumerate(scope_spans.spans):
                read.span_count += 1
                _read_span(span, application, f"resourceSpans[{r}].scopeSpans[{s}].spans[{n}]", read, resource)
    return read


END_USER = "enduser.id"
# The attributes that become an item's metadata (docs/opentelemetry.md), read from the resource and then the span,
# the span's winning; besides these, any `tollgate.metadata.<key>` attribute becomes <key>.
METADATA_ATTRIBUTES = {
    "service.version": "release",
    "deployment.environment": "environment",
    "deployment.environment.name": "environment",
    "gen_ai.request.model": "model",
    "llm.model_name": "model",  # OpenInference
    "ai.model.id": "model",  # the AI SDK
    "gen_ai.system": "provider",
    "gen_ai.provider.name": "provider",
    "gen_ai.agent.name": "agent",
}
METADATA_PREFIX = "tollgate.metadata."


def _end_user(attributes: dict[str, Any], default: str | None = None) -> str | None:
    """The semantic conventions' `enduser.id`, when it is a non-empty string."""
    value = attributes.get(END_USER)
    return value if isinstance(value, str) and value else default


def _metadata(*attribute_sets: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """The metadata the attribute sets name, later sets winning. A value is taken as text (a version may be sent as a
    number); a name or value outside the metadata rules is left out rather than refusing the spans: telemetry is not
    lost over a label."""
    found: dict[str, str] = {}
    for attributes in attribute_sets:
        for name, value in attributes.items():
            key = METADATA_ATTRIBUTES.get(name)
            if key is None and name.startswith(METADATA_PREFIX):
                key = name.removeprefix(METADATA_PREFIX)
            if key and isinstance(value, str | int | float) and not isinstance(value, bool):
                found[key] = str(value)
    return tuple((key, value) for key, value in found.items() if _metadata_allows(key, value))


_METADATA_KEY, _METADATA_VALUE = TypeAdapter(MetadataKey), TypeAdapter(MetadataValue)


def _metadata_allows(key: str, value: str) -> bool:
    try:
        _METADATA_KEY.validate_python(key)
        _METADATA_VALUE.validate_python(value)
    except ValidationError:
        return False
    return True


def _read_span(span: Span, application: str, where: str, read: ReadSpans, resource: dict[str, Any]) -> None:
    if len(span.trace_id) != 16 or not any(span.trace_id):
        raise ContentError(f"{where}.traceId must be 16 bytes and not all zero")
    if len(span.span_id) != 8 or not any(span.span_id):
        raise ContentError(f"{where}.spanId must be 8 bytes and not all zero")
    attributes = attribute_values(span.attributes)
    about = _About(_end_user(attributes, _end_user(resource)), _metadata(resource, attributes))
    for convention in (openinference, aisdk):
        if convention.applies(attributes):
            _read_convention_span(convention, span, attributes, application, where, read, about)
            return
    operation = attributes.get("gen_ai.operation.name")
    if operation is not None and not isinstance(operation, str):
        read.ignored += 1  # not an operation the conventions define
        return
    origin = _origin(span, attributes.get("gen_ai.conversation.id"), application, where, about)
    if operation == TOOL_OPERATION:
        call_id = attributes.get("gen_ai.tool.call.id")
        if "gen_ai.tool.call.result" not in attributes or not isinstance(call_id, str) or not call_id:
            read.ignored += 1  # no content captured: the next model call's input carries the result
            return
        content = _text_or_json(attributes["gen_ai.tool.call.result"])
        read.tool_results.append(ToolResult(origin, call_id, content))
        return
    if operation is not None and operation not in INFERENCE_OPERATIONS:
        read.ignored += 1
        return
    events = [(event.name, attribute_values(event.attributes)) for event in span.events]
    messages = _messages(attributes, events, where)
    response_id = attributes.get("gen_ai.response.id")
    response_id = response_id if isinstance(response_id, str) else None
    if messages is not None:
        read.calls.append(ModelCall(origin, *messages, response_id))
    elif operation is None and (unread := _unread_convention(attributes)):
        read.rejected.append(
            f"{where} (span {origin.span_id}) is a model call in {unread}'s own convention, which is not read "
            "(docs/opentelemetry.md lists the conventions that are)"
        )
    elif operation is None or span.status.code == Status.STATUS_CODE_ERROR:
        read.ignored += 1  # not a GenAI span at all, or a failed call: the next call's input holds its history
    else:
        read.awaiting.append(AwaitedCall(origin, response_id))


def _unread_convention(attributes: dict[str, Any]) -> str | None:
    for key, (name, model_calls) in UNREAD_MODEL_CALLS.items():
        value = attributes.get(key)
        if isinstance(value, str) and value.strip('"') in model_calls:
            return name
    return None


def _read_convention_span(
    convention: ModuleType,
    span: Span,
    attributes: dict[str, Any],
    application: str,
    where: str,
    read: ReadSpans,
    about: _About,
) -> None:
    """A span of a convention read by a module of its own (grading/otlp/openinference.py, aisdk.py), which gives
    its messages in the OpenAI shape; they are validated here as every convention's are."""
    origin = _origin(span, convention.conversation_id(attributes), application, where, about)
    if (result := convention.tool_result(attributes)) is not None:
        call_id, content = result
        if not isinstance(call_id, str):
            raise ContentError(f"{where} {convention.TOOL_CALL_ID} must be a string")
        read.tool_results.append(ToolResult(origin, call_id, _text_or_json(content)))
        return
    if not convention.is_model_call(attributes):
        read.ignored += 1  # a chain, an agent, a retriever, an outer span: not a model call
        return
    try:
        messages = convention.model_call_messages(attributes)
    except ValueError as exc:
        raise ContentError(f"{where} {exc}") from None
    if messages is None:
        read.rejected.append(
            f"{where} ({convention.span_name(attributes)} span {origin.span_id}) carries no message content: "
            f"{convention.NO_CONTENT}"
        )
        return
    inputs, outputs = (
        [_openai_message(message, f"{where} {name}.{index}") for index, message in enumerate(turns)]
        for name, turns in zip(convention.MESSAGES, messages, strict=True)
    )
    response_id = convention.response_id(attributes)
    read.calls.append(ModelCall(origin, inputs, outputs, response_id if isinstance(response_id, str) else None))


def _origin(span: Span, conversation_id: Any, application: str, where: str, about: _About) -> SpanOrigin:
    return SpanOrigin(
        trace_id=hex_id(span.trace_id),
        span_id=hex_id(span.span_id),
        started_at=_time(span.start_time_unix_nano, f"{where}.startTimeUnixNano"),
        ended_at=_time(span.end_time_unix_nano, f"{where}.endTimeUnixNano"),
        conversation_id=conversation_id if isinstance(conversation_id, str) and conversation_id else None,
        application=application,
        where=where,
        end_user=about.end_user,
        metadata=about.metadata,
    )


# --- values -------------------------------------------------------------------------------------------------


def attribute_values(key_values: Any) -> dict[str, Any]:
    return {kv.key: any_value(kv.value) for kv in key_values if isinstance(kv, KeyValue)}


def any_value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [any_value(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, kind)


def _time(nanoseconds: int, where: str) -> datetime | None:
    if not nanoseconds:
        return None
    try:
        return datetime.fromtimestamp(nanoseconds / 1e9, tz=UTC)
    except (OverflowError, OSError, ValueError):
        raise ContentError(f"{where} is not a time this receiver can represent") from None


def _structured(value: Any, where: str) -> Any:
    """A content attribute: a JSON string on spans (the conventions' encoding) or an already structured value."""
    if isinstance(value, str):
        try:
            return json.loads(value, parse_constant=lambda name: _refuse(f"{where} holds {name}, which is not JSON"))
        except (ValueError, RecursionError) as exc:
            raise ContentError(f"{where} is not valid JSON: {exc}") from None
    return value


def _refuse(message: str) -> Any:
    raise ContentError(message)


def _text_or_json(value: Any) -> Any:
    """Tool arguments and results as the OpenAI message format holds them: text, with structure as compact JSON."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _optional_str(value: Any, where: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ContentError(f"{where} must be a string")


# --- messages -------------------------------------------------------------------------------------------------


def _messages(
    attributes: dict[str, Any], events: list[tuple[str, dict[str, Any]]], where: str
) -> tuple[list[Turn], list[Turn]] | None:
    """(inputs, outputs) of a model call from the first form of content it carries, or None when it has none."""
    for source, values in [("attributes", attributes)] + [
        (f"event {name}", event_attributes) for name, event_attributes in events if name == DETAILS_EVENT
    ]:
        if any(key in values for key in ("gen_ai.input.messages", "gen_ai.output.messages")):
            return _current(values, f"{where} {source}")
    if any(_INDEXED.match(key) for key in attributes):
        return _indexed(attributes, where)
    if any(name in INPUT_EVENTS or name == CHOICE_EVENT for name, _ in events):
        return _deprecated_events(events, where)
    return None


def call_content(events: list[tuple[str, dict[str, Any]]], where: str) -> tuple[list[Turn], list[Turn]] | None:
    """(inputs, outputs) of a model call from its content events (sent as OTLP log records), or None."""
    return _messages({}, events, where)


def _current(values: dict[str, Any], where: str) -> tuple[list[Turn], list[Turn]]:
    inputs: list[Turn] = []
    if "gen_ai.system_instructions" in values:
        parts = _structured(values["gen_ai.system_instructions"], f"{where} gen_ai.system_instructions")
        inputs += _turns("system", parts, None, f"{where} gen_ai.system_instructions")
    for name in ("gen_ai.input.messages", "gen_ai.output.messages"):
        messages = _structured(values.get(name, []), f"{where} {name}")
        if not isinstance(messages, list):
            raise ContentError(f"{where} {name} must be a JSON array of messages")
        turns: list[Turn] = []
        for index, message in enumerate(messages):
            spot = f"{where} {name}[{index}]"
            if not isinstance(message, dict):
                raise ContentError(f"{spot} must be an object with role and parts")
            parts = message.get("parts", [])
            turns += _turns(message.get("role"), parts, _optional_str(message.get("name"), f"{spot}.name"), spot)
        if name == "gen_ai.input.messages":
            inputs += turns
        else:
            outputs = turns
    return inputs, outputs


def _role(role: Any, where: str) -> str:
    if not isinstance(role, str):
        raise ContentError(f"{where}.role must be a string")
    known = known_role(role)
    if known is None:
        raise ContentError(f"{where}.role {role!r} is not one of system, user, assistant, tool")
    return known


def _turns(role: Any, parts: Any, name: str | None, where: str) -> list[Turn]:
    """One message of the current conventions (role and typed parts) as JSON API messages.

    Text parts become the content (a string when there is one, else OpenAI content parts); tool_call parts
    become OpenAI `tool_calls`; each tool_call_response part becomes a `tool` message of its own (the JSON
    API holds one result per message), in order; other parts (blob, file, uri) are kept as given.
    """
    role = _role(role, where)
    if not isinstance(parts, list):
        raise ContentError(f"{where}.parts must be an array")
    texts: list[str] = []
    others: list[dict] = []
    tool_calls: list[dict] = []
    results: list[Turn] = []
    for index, part in enumerate(parts):
        spot = f"{where}.parts[{index}]"
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise ContentError(f"{spot} must be an object with a type")
        kind = part["type"]
        if kind == "text":
            if not isinstance(part.get("content"), str):
                raise ContentError(f"{spot}.content must be a string")
            texts.append(part["content"])
        elif kind == "tool_call":
            tool_calls.append(_tool_call(part.get("id"), part.get("name"), part.get("arguments"), spot))
        elif kind == "tool_call_response":
            call_id = part.get("id")
            if not isinstance(call_id, str) or not call_id:
                raise ContentError(f"{spot}.id must name the tool call it answers")
            results.append(Turn("tool", _text_or_json(part.get("response")), tool_call_id=call_id))
        elif kind not in SKIPPED_PART_TYPES:
            others.append(part)
    if role == "tool" and not results:
        raise ContentError(f"{where} is a tool message without a tool_call_response part")
    turns = list(results)
    if (texts or others or tool_calls or not results) and role != "tool":
        turns.append(Turn(role, content_of(texts, others), tool_calls or None, name=name))
    return turns


def _tool_call(call_id: Any, name: Any, arguments: Any, where: str) -> dict:
    if not isinstance(call_id, str) or not call_id:
        raise ContentError(f"{where}.id must be the tool call's id")
    if not isinstance(name, str):
        raise ContentError(f"{where}.name must be the tool's name")
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": _text_or_json(arguments)}}


def _indexed(attributes: dict[str, Any], where: str) -> tuple[list[Turn], list[Turn]]:
    """The deprecated `gen_ai.prompt.N.role|content|tool_call_id|name|tool_calls.M.*` and `gen_ai.completion.N.*`."""
    fields: dict[str, dict[int, dict[str, Any]]] = {"prompt": {}, "completion": {}}
    for key, value in attributes.items():
        match = _INDEXED.match(key)
        if match:
            fields[match[1]].setdefault(int(match[2]), {})[match[3]] = value
    sides = []
    for side in ("prompt", "completion"):
        turns = []
        for index in sorted(fields[side]):
            message = fields[side][index]
            spot = f"{where} gen_ai.{side}.{index}"
            calls: dict[int, dict[str, Any]] = {}
            for key, value in message.items():
                call = _INDEXED_TOOL_CALL.match(key)
                if call:
                    calls.setdefault(int(call[1]), {})[call[2]] = value
            tool_calls = [
                _tool_call(
                    calls[m].get("id"), calls[m].get("name"), calls[m].get("arguments"), f"{spot}.tool_calls.{m}"
                )
                for m in sorted(calls)
            ]
            turns.append(
                _openai_turn(
                    message.get("role", "assistant" if side == "completion" else None),
                    message.get("content"),
                    tool_calls,
                    message.get("tool_call_id"),
                    message.get("name"),
                    spot,
                )
            )
        sides.append(turns)
    return sides[0], sides[1]


def _deprecated_events(events: list[tuple[str, dict[str, Any]]], where: str) -> tuple[list[Turn], list[Turn]]:
    inputs: list[Turn] = []
    choices: list[tuple[int, int, Turn]] = []
    for position, (name, values) in enumerate(events):
        spot = f"{where} event {name}"
        if name in INPUT_EVENTS:
            role = INPUT_EVENTS[name]
            tool_calls = _structured(values.get("tool_calls"), f"{spot}.tool_calls")
            inputs.append(
                _openai_turn(
                    values.get("role", role),
                    values.get("content"),
                    _openai_tool_calls(tool_calls, spot),
                    values.get("id") if role == "tool" else None,
                    None,
                    spot,
                )
            )
        elif name == CHOICE_EVENT:
            message = _structured(values.get("message", {}), f"{spot}.message")
            if not isinstance(message, dict):
                raise ContentError(f"{spot}.message must be an object")
            index = values.get("index", 0)
            if not isinstance(index, int):
                raise ContentError(f"{spot}.index must be an integer")
            tool_calls = _structured(message.get("tool_calls"), f"{spot}.message.tool_calls")
            turn = _openai_turn(
                message.get("role", "assistant"),
                message.get("content"),
                _openai_tool_calls(tool_calls, spot),
                None,
                None,
                spot,
            )
            choices.append((index, position, turn))
    return inputs, [turn for _, _, turn in sorted(choices, key=lambda c: (c[0], c[1]))]


def _openai_tool_calls(tool_calls: Any, where: str) -> list[dict]:
    if tool_calls is None:
        return []
    if not isinstance(tool_calls, list):
        raise ContentError(f"{where}.tool_calls must be an array")
    calls = []
    for index, call in enumerate(tool_calls):
        spot = f"{where}.tool_calls[{index}]"
        if not isinstance(call, dict):
            raise ContentError(f"{spot} must be an object")
        function = call.get("function") or {}
        if not isinstance(function, dict):
            raise ContentError(f"{spot}.function must be an object")
        calls.append(_tool_call(call.get("id"), function.get("name"), function.get("arguments"), spot))
    return calls


def _openai_message(message: dict, where: str) -> Turn:
    tool_calls = _openai_tool_calls(message.get("tool_calls"), where)
    return _openai_turn(
        message.get("role"), message.get("content"), tool_calls, message.get("tool_call_id"), message.get("name"), where
    )


def _openai_turn(role: Any, content: Any, tool_calls: list[dict], tool_call_id: Any, name: Any, where: str) -> Turn:
    role = _role(role, where)
    if content is not None and not isinstance(content, str | list):
        raise ContentError(f"{where}.content must be a string or a list of content parts")
    if isinstance(content, list) and not all(isinstance(part, dict) for part in content):
        raise ContentError(f"{where}.content parts must be objects")
    tool_call_id = _optional_str(tool_call_id, f"{where}.tool_call_id")
    if role == "tool" and not tool_call_id:
        raise ContentError(f"{where} is a tool message without the id of the call it answers")
    return Turn(role, content, tool_calls or None, tool_call_id, _optional_str(name, f"{where}.name"))


def spans_in(request: ExportTraceServiceRequest) -> Iterator[Span]:
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            yield from scope_spans.spans

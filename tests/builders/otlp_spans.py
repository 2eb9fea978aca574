"""Builders of OTLP export requests for the receiver tests: spans as the GenAI conventions describe them."""

import base64
import gzip
import json
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

TRACE = "5b8efff798038103d269b633813fc60c"
T0_NS = 1_793_000_000_000_000_000  # 2026-10-25


def span_id(n: int) -> str:
    return f"{n:016x}"


def any_value(value: Any) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, str):
        return AnyValue(string_value=value)
    if isinstance(value, list):
        out = AnyValue()
        out.array_value.values.extend(any_value(item) for item in value)
        return out
    if isinstance(value, dict):
        out = AnyValue()
        out.kvlist_value.values.extend(KeyValue(key=k, value=any_value(v)) for k, v in value.items())
        return out
    raise TypeError(type(value))


def key_values(attributes: dict[str, Any]) -> list[KeyValue]:
    return [KeyValue(key=key, value=any_value(value)) for key, value in attributes.items()]


def text(content: str) -> dict:
    return {"type": "text", "content": content}


def chat_span(
    n: int,
    inputs: list[dict],
    outputs: list[dict],
    *,
    conversation: str | None = "conv-otlp",
    trace: str = TRACE,
    system: str | None = None,
    extra: dict | None = None,
) -> Span:
    """A chat span of the current conventions; `n` orders it in time (span n runs from n s to n s + 0.5 s)."""
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "support-model",
        "gen_ai.response.id": f"chatcmpl-{n}",
        "gen_ai.input.messages": json.dumps(inputs),
        "gen_ai.output.messages": json.dumps(outputs),
    }
    if system is not None:
        attributes["gen_ai.system_instructions"] = json.dumps([text(system)])
    if conversation is not None:
        attributes["gen_ai.conversation.id"] = conversation
    attributes.update(extra or {})
    return raw_span(n, attributes, trace=trace, name="chat support-model")


def tool_span(n: int, call_id: str, result: str, *, conversation: str | None = "conv-otlp", trace: str = TRACE) -> Span:
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "order_status",
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.call.result": result,
    }
    if conversation is not None:
        attributes["gen_ai.conversation.id"] = conversation
    return raw_span(n, attributes, trace=trace, name="execute_tool order_status")


def raw_span(n: int, attributes: dict[str, Any], *, trace: str = TRACE, name: str = "span", events=()) -> Span:
    span = Span(
        trace_id=bytes.fromhex(trace),
        span_id=bytes.fromhex(span_id(n)),
        name=name,
        kind=Span.SPAN_KIND_CLIENT,
        start_time_unix_nano=T0_NS + n * 1_000_000_000,
        end_time_unix_nano=T0_NS + n * 1_000_000_000 + 500_000_000,
    )
    span.attributes.extend(key_values(attributes))
    for event_name, event_attributes in events:
        event = span.events.add(name=event_name, time_unix_nano=span.start_time_unix_nano)
        event.attributes.extend(key_values(event_attributes))
    return span


def export_request(*spans: Span, service: str | None = "support-bot") -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    if service is not None:
        resource_spans.resource.attributes.extend(key_values({"service.name": service}))
    scope = resource_spans.scope_spans.add()
    scope.scope.name = "tests"
    scope.spans.extend(spans)
    return request


def as_otlp_json(request: ExportTraceServiceRequest) -> dict:
    """OTLP/JSON: the protobuf JSON mapping with ids as hex (not base64) and enums as integers."""
    document = json_format.MessageToDict(request, use_integers_for_enums=True)
    for resource_spans in document.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                for field in ("traceId", "spanId", "parentSpanId"):
                    if field in span:
                        span[field] = base64.b64decode(span[field]).hex()
    return document


def two_turns_with_a_tool() -> list[Span]:
    """system, user, assistant calls a tool, tool result, assistant answers; then a second user turn."""
    system = {"role": "system", "parts": [text("You are the support agent.")]}
    user1 = {"role": "user", "parts": [text("Where is order 1182?")]}
    call = {"role": "assistant", "parts": [{"type": "tool_call", "id": "call_1", "name": "order_status",
                                            "arguments": {"order": 1182}}]}  # fmt: skip
    result = {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": "call_1", "response": '{"status":"shipped"}'}],
    }
    answer = {"role": "assistant", "parts": [text("It has shipped.")]}
    user2 = {"role": "user", "parts": [text("Thanks!")]}
    goodbye = {"role": "assistant", "parts": [text("You are welcome.")]}
    return [
        chat_span(1, [system, user1], [call | {"finish_reason": "tool_calls"}]),
        tool_span(2, "call_1", '{"status":"shipped"}'),
        chat_span(3, [system, user1, call, result], [answer | {"finish_reason": "stop"}]),
        chat_span(4, [system, user1, call, result, answer, user2], [goodbye | {"finish_reason": "stop"}]),
    ]


def gzipped(body: bytes) -> bytes:
    return gzip.compress(body)

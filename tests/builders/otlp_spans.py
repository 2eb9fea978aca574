"""Builders of OTLP export requests for the receiver tests: spans as the GenAI conventions describe them."""

import base64
import gzip
import json
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
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


def as_otlp_json(request: ExportTraceServiceRequest | ExportLogsServiceRequest) -> dict:
    """OTLP/JSON: the protobuf JSON mapping with ids as hex (not base64) and enums as integers."""
    document = json_format.MessageToDict(request, use_integers_for_enums=True)
    for resources, scopes, items in (
        ("resourceSpans", "scopeSpans", "spans"),
        ("resourceLogs", "scopeLogs", "logRecords"),
    ):
        for resource in document.get(resources, []):
            for scope in resource.get(scopes, []):
                for item in scope.get(items, []):
                    for field in ("traceId", "spanId", "parentSpanId"):
                        if field in item:
                            item[field] = base64.b64decode(item[field]).hex()
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


def bare_chat_span(n: int, *, conversation: str | None = "conv-otlp", trace: str = TRACE) -> Span:
    """A chat span as the instrumentations write it by default: no messages, which go to log records."""
    attributes = {"gen_ai.operation.name": "chat", "gen_ai.system": "openai", "gen_ai.response.id": f"chatcmpl-{n}"}
    if conversation is not None:
        attributes["gen_ai.conversation.id"] = conversation
    return raw_span(n, attributes, trace=trace, name="chat support-model")


def log_record(
    n: int, event: str, body: dict | None, *, trace: str = TRACE, event_name_field: bool = True
) -> LogRecord:
    """A GenAI content event of span `n` as opentelemetry-instrumentation-openai-v2 sends it by default: the name in
    `event_name` (older SDKs: an `event.name` attribute), the fields in the body."""
    record = LogRecord(
        trace_id=bytes.fromhex(trace), span_id=bytes.fromhex(span_id(n)), time_unix_nano=T0_NS + n * 1_000_000_000
    )
    attributes = {"gen_ai.system": "openai"}
    if event_name_field:
        record.event_name = event
    else:
        attributes["event.name"] = event
    record.attributes.extend(key_values(attributes))
    if body is not None:
        record.body.CopyFrom(any_value(body))
    return record


def logs_request(*records: LogRecord, service: str | None = "support-bot") -> ExportLogsServiceRequest:
    request = ExportLogsServiceRequest()
    resource_logs = request.resource_logs.add()
    if service is not None:
        resource_logs.resource.attributes.extend(key_values({"service.name": service}))
    scope = resource_logs.scope_logs.add()
    scope.scope.name = "opentelemetry.instrumentation.openai_v2"
    scope.log_records.extend(records)
    return request


ORDER_CALL = {"id": "call_1", "type": "function", "function": {"name": "order_status", "arguments": '{"order":1182}'}}


def two_turns_in_log_records(*, conversation: str = "conv-otlp", trace: str = TRACE) -> tuple[list[Span], list]:
    """`two_turns_with_a_tool` as the instrumentations send it by default: bare chat spans (1, 3, 4), an
    execute_tool span without its result (2), and each call's messages as log records of its span."""
    system = ("gen_ai.system.message", {"content": "You are the support agent."})
    user1 = ("gen_ai.user.message", {"content": "Where is order 1182?"})
    call = ("gen_ai.assistant.message", {"tool_calls": [ORDER_CALL]})
    result = ("gen_ai.tool.message", {"content": '{"status":"shipped"}', "id": "call_1"})
    answer = ("gen_ai.assistant.message", {"content": "It has shipped."})
    user2 = ("gen_ai.user.message", {"content": "Thanks!"})

    def choice(message: dict, finish_reason: str = "stop") -> tuple[str, dict]:
        return (
            "gen_ai.choice",
            {"index": 0, "finish_reason": finish_reason, "message": {"role": "assistant"} | message},
        )

    calls = {
        1: [system, user1, choice({"tool_calls": [ORDER_CALL]}, "tool_calls")],
        3: [system, user1, call, result, choice({"content": "It has shipped."})],
        4: [system, user1, call, result, answer, user2, choice({"content": "You are welcome."})],
    }
    spans = [bare_chat_span(n, conversation=conversation, trace=trace) for n in calls]
    tool = raw_span(2, {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.id": "call_1"}, trace=trace)
    records = [log_record(n, event, body, trace=trace) for n, events in calls.items() for event, body in events]
    return [spans[0], tool, *spans[1:]], records


def gzipped(body: bytes) -> bytes:
    return gzip.compress(body)

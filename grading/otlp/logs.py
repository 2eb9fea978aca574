"""Reading the GenAI content events sent as OTLP log records: the messages of model calls whose spans carry none.

The official instrumentations' default (without OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental) sends
a call's messages as one log record per message: `gen_ai.system.message`, `gen_ai.user.message`,
`gen_ai.assistant.message`, `gen_ai.tool.message`, then `gen_ai.choice` per reply, each event's fields in the
record's body; the current conventions' `gen_ai.client.inference.operation.details` event carries the whole call
in its attributes. The event's name is the record's `event_name` (older SDKs: its `event.name` attribute), and
its trace and span ids name the call's span: the join to it (grading/otlp/pending.py). Other records (an
application's own logs) are acknowledged and not read.

Pure Python over the decoded protobuf, as grading/otlp/genai.py is, whose readers of the events these are.
"""

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

from grading.core.schemas import refuse_unstorable
from grading.otlp.genai import (
    CHOICE_EVENT,
    DETAILS_EVENT,
    INPUT_EVENTS,
    ContentError,
    any_value,
    attribute_values,
    call_content,
)
from grading.otlp.wire import hex_id

CONTENT_EVENTS = frozenset({*INPUT_EVENTS, CHOICE_EVENT, DETAILS_EVENT})
# A call's input events are emitted before its reply's, and an exporter sends records in the order they were
# emitted: once a reply event is here, so is every message of the call.
LAST_EVENTS = frozenset({CHOICE_EVENT, DETAILS_EVENT})


@dataclass(frozen=True)
class ContentEvent:
    trace_id: str
    span_id: str
    name: str
    values: dict[str, Any]  # the event's fields: the record's attributes and, over them, its body's
    time: int  # the record's time (else when it was observed), in nanoseconds: with the rest, what makes it itself
    size: int  # bytes of `values` as UTF-8 JSON: what keeping it costs
    largest_message: int  # bytes of its largest message as UTF-8 JSON: one over MAX_MESSAGE_BYTES is never written


@dataclass
class ReadLogs:
    events: list[ContentEvent] = field(default_factory=list)
    ignored: int = 0  # records that are not GenAI content events
    rejected: list[str] = field(default_factory=list)  # content events that name no span, with the reason
    record_count: int = 0


def read_logs(request: ExportLogsServiceRequest) -> ReadLogs:
    """Every record of the request, sorted into content events, ignored and rejected.

    Raises ContentError for a content event whose messages are malformed or cannot be stored: the whole request
    is then refused, so nothing of it is half-kept.
    """
    read = ReadLogs()
    for r, resource_logs in enumerate(request.resource_logs):
        for s, scope_logs in enumerate(resource_logs.scope_logs):
            for n, record in enumerate(scope_logs.log_records):
                read.record_count += 1
                where = f"resourceLogs[{r}].scopeLogs[{s}].logRecords[{n}]"
                attributes = attribute_values(record.attributes)
                name = record.event_name or attributes.get("event.name")
                if name not in CONTENT_EVENTS:
                    read.ignored += 1
                    continue
                if not (
                    len(record.trace_id) == 16
                    and any(record.trace_id)
                    and len(record.span_id) == 8
                    and any(record.span_id)
                ):
                    read.rejected.append(
                        f"{where} ({name}) names no span: a record's trace and span ids join it to its model call"
                    )
                    continue
                body = any_value(record.body)
                values = attributes | body if isinstance(body, dict) else attributes
                try:
                    refuse_unstorable(values)
                except ValueError as exc:
                    raise ContentError(f"{where} ({name}) {exc}") from None
                # Refuses malformed messages now, not at the join.
                messages = call_content([(name, values)], f"{where} {name}")
                time = record.time_unix_nano or record.observed_time_unix_nano
                size, largest = _json_size(values), max(map(_json_size, sum(messages or ([], []), [])), default=0)
                trace, span = hex_id(record.trace_id), hex_id(record.span_id)
                read.events.append(ContentEvent(trace, span, name, values, time, size, largest))
    return read


def _json_size(value: Any) -> int:
    if not isinstance(value, dict):  # a Turn: the fields a stored message keeps of it
        value = [value.role, value.content, value.tool_calls, value.tool_call_id, value.name]
    return len(json.dumps(value, ensure_ascii=False).encode())


def records_in(request: ExportLogsServiceRequest) -> Iterator[LogRecord]:
    for resource_logs in request.resource_logs:
        for scope_logs in resource_logs.scope_logs:
            yield from scope_logs.log_records

"""OTLP model calls waiting for their other part: what a logs request costs as a waiting call's records pile up, and
what a logs request completing calls of many conversations costs.

1. One call's records over BENCH_WAITING_REQUESTS logs requests of MAX_OTLP_LOG_RECORDS_PER_REQUEST records each
   (`gen_ai.user.message` events of ~200 bytes, each distinct, for one span that never comes): the wall time of each
   request. A request that reads back what the call already holds grows with it; one that only appends stays flat.
   MAX_MESSAGES_PER_CONVERSATION is raised for the run so that every request appends (by default the call is refused
   once it holds more events than a conversation may hold messages).
2. Calls of MAX_OTLP_LOG_RECORDS_PER_REQUEST conversations, one bare chat span each (sent first, in requests of
   MAX_OTLP_SPANS_PER_REQUEST spans), completed by one logs request holding one details record per call: the wall
   time of that request, which writes the calls of MAX_OTLP_CONVERSATIONS_PER_REQUEST conversations, and of the
   worker's task that writes the rest (run here, in this process).

Through Django's test client in this process against real PostgreSQL, as bench_otlp is.
"""

import json
import os
import time

from django.conf import settings
from django.test import Client
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from bench.common import fresh_org, purge_queues
from grading.api.keys import api_key_create
from grading.models import Conversation, Org
from grading.otlp.pending import whole_calls_write

T0_NS = 1_793_000_000_000_000_000
DETAILS = "gen_ai.client.inference.operation.details"


def main() -> None:
    requests = int(os.environ.get("BENCH_WAITING_REQUESTS", "15"))
    records = settings.MAX_OTLP_LOG_RECORDS_PER_REQUEST
    org = fresh_org()
    client = _client(org)
    settings.MAX_MESSAGES_PER_CONVERSATION = requests * records + 1
    times = []
    for request in range(requests):
        batch = [
            _record(1, 1, "gen_ai.user.message", {"content": f"request {request} record {n}: " + "x" * 180})
            for n in range(records)
        ]
        body = _logs(batch).SerializeToString()
        began = time.perf_counter()
        response = client.post("/api/v1/otlp/v1/logs", body, content_type="application/x-protobuf")
        times.append(time.perf_counter() - began)
        assert response.status_code == 200, response.content[:300]
    print(f"one waiting call, {requests} logs requests of {records:,} records each: seconds per request")
    print("  " + " ".join(f"{t:.2f}" for t in times))
    print(f"  first {times[0]:.2f} s, last {times[-1]:.2f} s, last/first {times[-1] / times[0]:.1f}x")

    org = Org.objects.create(name="Bench completing", slug="bench-completing")
    client = _client(org)
    spans = [_bare_span(n) for n in range(1, records + 1)]
    step = settings.MAX_OTLP_SPANS_PER_REQUEST
    for start in range(0, len(spans), step):
        body = _traces(spans[start : start + step]).SerializeToString()
        response = client.post("/api/v1/otlp/v1/traces", body, content_type="application/x-protobuf")
        assert response.status_code == 200, response.content[:300]
    body = _logs([_details(n) for n in range(1, records + 1)]).SerializeToString()
    began = time.perf_counter()
    response = client.post("/api/v1/otlp/v1/logs", body, content_type="application/x-protobuf")
    took = time.perf_counter() - began
    assert response.status_code == 200, response.content[:300]
    by_request = Conversation.objects.filter(org=org).count()
    began = time.perf_counter()
    by_worker = whole_calls_write(org_id=org.pk)
    worker_took = time.perf_counter() - began
    purge_queues()
    print(
        f"one logs request completing calls of {records:,} conversations: {took:.2f} s, writing {by_request:,} "
        f"(MAX_OTLP_CONVERSATIONS_PER_REQUEST); the worker wrote the other {by_worker:,} in {worker_took:.2f} s"
    )


def _client(org: Org) -> Client:
    key = api_key_create(org=org, name="bench").plaintext
    return Client(SERVER_NAME="localhost", HTTP_AUTHORIZATION=f"Bearer {key}")


def _value(value) -> AnyValue:
    if isinstance(value, dict):
        any_value = AnyValue()
        any_value.kvlist_value.values.extend(KeyValue(key=k, value=_value(v)) for k, v in value.items())
        return any_value
    return AnyValue(string_value=value) if isinstance(value, str) else AnyValue(int_value=value)


def _record(trace: int, span: int, event: str, body: dict, attributes: dict | None = None) -> LogRecord:
    record = LogRecord(
        trace_id=trace.to_bytes(16, "big"), span_id=span.to_bytes(8, "big"), time_unix_nano=T0_NS, event_name=event
    )
    record.body.CopyFrom(_value(body))
    record.attributes.extend(KeyValue(key=k, value=_value(v)) for k, v in (attributes or {}).items())
    return record


def _details(n: int) -> LogRecord:
    asked = [{"role": "user", "parts": [{"type": "text", "content": f"Where is order {n}?"}]}]
    answered = [{"role": "assistant", "parts": [{"type": "text", "content": "It has shipped."}]}]
    values = {"gen_ai.input.messages": json.dumps(asked), "gen_ai.output.messages": json.dumps(answered)}
    return _record(n, n, DETAILS, {}, values)


def _bare_span(n: int) -> Span:
    span = Span(
        trace_id=n.to_bytes(16, "big"),
        span_id=n.to_bytes(8, "big"),
        name="chat support-model",
        start_time_unix_nano=T0_NS + n,
        end_time_unix_nano=T0_NS + n + 500_000_000,
    )
    attributes = {"gen_ai.operation.name": "chat", "gen_ai.system": "openai", "gen_ai.conversation.id": f"c-{n}"}
    span.attributes.extend(KeyValue(key=k, value=_value(v)) for k, v in attributes.items())
    return span


def _traces(spans: list[Span]) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    resource_spans.resource.attributes.append(KeyValue(key="service.name", value=AnyValue(string_value="bench")))
    resource_spans.scope_spans.add().spans.extend(spans)
    return request


def _logs(records: list[LogRecord]) -> ExportLogsServiceRequest:
    request = ExportLogsServiceRequest()
    resource_logs = request.resource_logs.add()
    resource_logs.resource.attributes.append(KeyValue(key="service.name", value=AnyValue(string_value="bench")))
    resource_logs.scope_logs.add().log_records.extend(records)
    return request

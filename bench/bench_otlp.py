"""OTLP/HTTP trace ingestion against the JSON conversation API, on the same conversations in the same run.

Each conversation is an agent exchange of TURNS user turns: a system prompt, then per turn a user message and
the answer; the first turn's answer comes after a tool call and its result. The JSON side posts each whole
conversation once (`POST /api/v1/conversations`, as bench_ingestion does). The OTLP side sends what an
instrumented agent exports: one chat span per model call, whose input holds the whole history so far, plus an
execute_tool span, in protobuf batches of SPANS_PER_BATCH spans in time order (conversations interleaved), as
the SDK's batch processor sends them. Both go through Django's test client in this process against real
PostgreSQL; CPU is this process's (the database's own CPU is not counted). The run checks that every
conversation has the same fingerprint both ways.
"""

import json
import os
import time

from django.test import Client
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from bench.common import fresh_org
from grading.models import Conversation, Message, Org
from grading.services import api_key_create

SPANS_PER_BATCH = 64
T0_NS = 1_793_000_000_000_000_000
SYSTEM = "You are the support agent of Northwind. Look orders up before you answer. " * 3


def main() -> None:
    conversations = int(os.environ.get("BENCH_OTLP_CONVERSATIONS", "200"))
    turns = int(os.environ.get("BENCH_OTLP_TURNS", "5"))
    json_org = fresh_org()
    otlp_org = Org.objects.create(name="Bench OTLP", slug="bench-otlp")
    exchanges = [_exchange(i, turns) for i in range(conversations)]
    messages = sum(len(exchange["messages"]) for exchange in exchanges)
    json_client, otlp_client = _client(json_org), _client(otlp_org)
    # One conversation each way first, untimed: the first request of a process pays for imports and connections.
    warm_up = _exchange(conversations, turns)
    warm_up_body = {"external_id": "warm-up", "application": "bench", "messages": warm_up["messages"]}
    json_client.post("/api/v1/conversations", json.dumps(warm_up_body), content_type="application/json")
    otlp_client.post(
        "/api/v1/otlp/v1/traces", _request(warm_up["spans"]).SerializeToString(), content_type="application/x-protobuf"
    )
    Conversation.objects.filter(external_id__in=["warm-up", warm_up["id"]]).delete()

    client = json_client
    wall, cpu = time.perf_counter(), time.process_time()
    for exchange in exchanges:
        body = {"external_id": exchange["id"], "application": "bench", "messages": exchange["messages"]}
        response = client.post("/api/v1/conversations", json.dumps(body), content_type="application/json")
        assert response.status_code == 201, response.content[:300]
    json_wall, json_cpu = time.perf_counter() - wall, time.process_time() - cpu

    # The JSON API as a live agent would use it: after every model call, append what that call added.
    per_call_org = Org.objects.create(name="Bench JSON per call", slug="bench-json-per-call")
    per_call_client = _client(per_call_org)
    wall, cpu = time.perf_counter(), time.process_time()
    for step in range(max(len(exchange["steps"]) for exchange in exchanges)):
        for exchange in exchanges:
            if step >= len(exchange["steps"]):
                continue
            if step == 0:
                body = {"external_id": exchange["id"], "application": "bench", "messages": exchange["steps"][0]}
                response = per_call_client.post(
                    "/api/v1/conversations", json.dumps(body), content_type="application/json"
                )
            else:
                response = per_call_client.post(
                    f"/api/v1/conversations/{exchange['id']}/messages",
                    json.dumps({"messages": exchange["steps"][step]}),
                    content_type="application/json",
                )
            assert response.status_code in (200, 201), response.content[:300]
    per_call_wall, per_call_cpu = time.perf_counter() - wall, time.process_time() - cpu

    spans = sorted((span for exchange in exchanges for span in exchange["spans"]), key=lambda s: s.start_time_unix_nano)
    batches = [
        _request(spans[i : i + SPANS_PER_BATCH]).SerializeToString() for i in range(0, len(spans), SPANS_PER_BATCH)
    ]
    client = otlp_client
    wall, cpu = time.perf_counter(), time.process_time()
    for body in batches:
        response = client.post("/api/v1/otlp/v1/traces", body, content_type="application/x-protobuf")
        assert response.status_code == 200 and not response.content, response.content[:300]
    otlp_wall, otlp_cpu = time.perf_counter() - wall, time.process_time() - cpu

    stored = Message.objects.filter(conversation__org=otlp_org).count()
    assert stored == messages, f"OTLP stored {stored} messages, JSON {messages}"
    fingerprints = dict(Conversation.objects.filter(org=json_org).values_list("external_id", "fingerprint"))
    mismatched = sum(
        1
        for external_id, fingerprint in Conversation.objects.filter(org=otlp_org).values_list(
            "external_id", "fingerprint"
        )
        if fingerprints.get(external_id) != fingerprint
    )
    print(
        f"{conversations} conversations x {turns} turns = {messages:,} messages; "
        f"OTLP: {len(spans):,} spans in {len(batches)} batches of up to {SPANS_PER_BATCH}, "
        f"{sum(map(len, batches)) / 1e6:.1f} MB of protobuf"
    )
    print(
        f"JSON API: {messages / json_wall:,.0f} messages/s in {json_wall:.1f} s, "
        f"CPU {json_cpu / messages * 1e3:.2f} ms/message"
    )
    print(
        f"JSON API, one append per model call: {messages / per_call_wall:,.0f} messages/s in {per_call_wall:.1f} s, "
        f"CPU {per_call_cpu / messages * 1e3:.2f} ms/message"
    )
    print(
        f"OTLP:     {len(spans) / otlp_wall:,.0f} spans/s, {messages / otlp_wall:,.0f} messages/s "
        f"in {otlp_wall:.1f} s, "
        f"CPU {otlp_cpu / len(spans) * 1e3:.2f} ms/span ({otlp_cpu / messages * 1e3:.2f} ms/message)"
    )
    print(
        f"OTLP / JSON messages per second: {json_wall / otlp_wall:.2f}x "
        f"(CPU per message {otlp_cpu / json_cpu:.2f}x the JSON API's); against one append per model call: "
        f"{per_call_wall / otlp_wall:.2f}x (CPU {otlp_cpu / per_call_cpu:.2f}x); fingerprints mismatched: {mismatched}"
    )
    assert mismatched == 0


def _client(org: Org) -> Client:
    key = api_key_create(org=org, name="bench").plaintext
    return Client(SERVER_NAME="localhost", HTTP_AUTHORIZATION=f"Bearer {key}")


def _exchange(i: int, turns: int) -> dict:
    """The conversation's messages as the JSON API takes them and the spans an instrumented agent exports,
    with the ids the receiver derives from span ids, so both sides hold the same evidence."""
    trace = f"{i + 1:032x}"
    history: list[dict] = [{"role": "system", "parts": [{"type": "text", "content": SYSTEM}]}]
    messages: list[dict] = []
    steps: list[list[dict]] = []  # the messages each model call (or tool run) added, for the per-call JSON side
    ids: list[str] = []
    spans: list[Span] = []
    clock = T0_NS + i * 1_000_000

    def record(message_id: str, role: str, **fields) -> None:
        """A message, added by the span named in its id (the JSON side appends per span, in that order)."""
        messages.append({"id": message_id, "parent_id": ids[-1] if ids else None, "role": role, **fields})
        ids.append(message_id)
        span = message_id.split(":")[0]
        if not steps or steps[-1][0]["id"].split(":")[0] != span:
            steps.append([])
        steps[-1].append(messages[-1])

    def chat(outputs: list[dict]) -> str:
        nonlocal clock
        sid = f"{len(spans) + 1:08x}{i:08x}"
        for index in range(len(ids), len(history)):
            part = history[index]["parts"][0]
            if history[index]["role"] in ("system", "user"):
                record(f"{sid}:in{index}", history[index]["role"], content=part["content"])
        spans.append(_span(trace, sid, clock, "chat", history, outputs))
        clock += 10_000_000_000
        return sid

    for turn in range(turns):
        question = f"Conversation {i}, turn {turn}: where is order {1000 + turn}? " + "Some detail of the request. " * 4
        history.append({"role": "user", "parts": [{"type": "text", "content": question}]})
        if turn == 0:
            call = {"type": "tool_call", "id": f"call_{i}", "name": "order_status", "arguments": {"order": 1000}}
            sid = chat([{"role": "assistant", "parts": [call]}])
            record(f"{sid}:out0", "assistant", content=None, tool_calls=[{"id": f"call_{i}", "type": "function",
                   "function": {"name": "order_status", "arguments": '{"order":1000}'}}])  # fmt: skip
            history.append({"role": "assistant", "parts": [call]})
            result = '{"status": "shipped", "carrier": "DHL"}'
            tool_sid = f"{len(spans) + 1:08x}{i:08x}"
            spans.append(_tool_span(trace, tool_sid, clock, f"call_{i}", result))
            clock += 10_000_000_000
            record(f"{tool_sid}:tool", "tool", content=result, tool_call_id=f"call_{i}")
            history.append(
                {"role": "tool", "parts": [{"type": "tool_call_response", "id": f"call_{i}", "response": result}]}
            )
        answer = f"Order {1000 + turn} has shipped with DHL and arrives on Thursday. " * 3
        sid = chat([{"role": "assistant", "parts": [{"type": "text", "content": answer}]}])
        record(f"{sid}:out0", "assistant", content=answer)
        history.append({"role": "assistant", "parts": [{"type": "text", "content": answer}]})
    return {"id": f"conv-{i}", "messages": messages, "spans": spans, "steps": steps}


def _attributes(values: dict) -> list[KeyValue]:
    return [KeyValue(key=key, value=AnyValue(string_value=value)) for key, value in values.items()]


def _span(trace: str, sid: str, start: int, operation: str, inputs: list[dict], outputs: list[dict]) -> Span:
    span = Span(trace_id=bytes.fromhex(trace), span_id=bytes.fromhex(sid), name=f"{operation} support-model",
                start_time_unix_nano=start, end_time_unix_nano=start + 900_000_000)  # fmt: skip
    span.attributes.extend(
        _attributes(
            {
                "gen_ai.operation.name": operation,
                "gen_ai.conversation.id": f"conv-{int(trace, 16) - 1}",
                "gen_ai.input.messages": json.dumps(inputs, separators=(",", ":")),
                "gen_ai.output.messages": json.dumps(outputs, separators=(",", ":")),
            }
        )
    )
    return span


def _tool_span(trace: str, sid: str, start: int, call_id: str, result: str) -> Span:
    span = Span(trace_id=bytes.fromhex(trace), span_id=bytes.fromhex(sid), name="execute_tool order_status",
                start_time_unix_nano=start, end_time_unix_nano=start + 100_000_000)  # fmt: skip
    span.attributes.extend(
        _attributes(
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.conversation.id": f"conv-{int(trace, 16) - 1}",
                "gen_ai.tool.call.id": call_id,
                "gen_ai.tool.call.result": result,
            }
        )
    )
    return span


def _request(spans: list[Span]) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    resource_spans.resource.attributes.extend(_attributes({"service.name": "bench"}))
    resource_spans.scope_spans.add().spans.extend(spans)
    return request

"""OTLP/HTTP trace ingestion against the JSON conversation API, on the same conversations in the same run.

Each conversation is an agent exchange of TURNS user turns: a system prompt, then per turn a user message and
the answer; the first turn's answer comes after a tool call and its result. The JSON side posts each whole
conversation once (`POST /api/v1/conversations`, as bench_ingestion does). The OTLP side sends what an
instrumented agent exports: one chat span per model call, whose input holds the whole history so far, plus an
execute_tool span, in protobuf batches of SPANS_PER_BATCH spans in time order (conversations interleaved), as
the SDK's batch processor sends them. Both go through Django's test client in this process against real
PostgreSQL; CPU is this process's (the database's own CPU is not counted). The OTLP side runs four times: in
the OpenTelemetry GenAI conventions, with the messages as log records (bare chat spans, and one inference details
record per call, each batch of spans followed by the batch of their records, as two batch processors send them:
every call waits for its record and is written when it comes), as OpenInference records the same calls (LLM and
TOOL spans), and as the Vercel AI SDK does (provider-call and ai.toolCall spans). The run checks that every
conversation has the same fingerprint every way.

Then one request as large as the limits let it be (MAX_OTLP_SPANS_PER_REQUEST, MAX_OTLP_CONVERSATIONS_PER_REQUEST)
and one half as large, so the cost at n and 2n shows whether it grows linearly: new conversations of one model call
each (the yardstick, in the same run: the same conversations posted to the JSON API one request each), then
conversations of several calls and a tool result each, at the spans limit. Reported per conversation: wall time, CPU
here and CPU in the PostgreSQL backend (from /proc), and the longest transaction (from its first statement to its
commit: the locks a transaction takes are held that long). Then the same without the limits, at
BENCH_OTLP_UNBOUNDED new conversations and twice as many, which shows that the cost per conversation no longer grows
with the request (it did: a cached generic plan found each conversation through the org_id index, reading every
conversation the org had), and how soon a request over the spans limit is refused.

`phases()` offers the JSON API, the GenAI spans and the messages as log records to `bench.compare`, and with
BENCH_OTLP_STORED writes what each way stores (the log records' waiting calls too), so that two commits can be shown
to store the same.
"""

import json
import os
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import count

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count
from django.test import Client
from django.utils import timezone
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from bench.common import backend_cpu, fresh_org
from grading.api.keys import api_key_create
from grading.models import LIVE_STATES, Conversation, ItemKind, Message, Org, Review, ReviewState, Route
from grading.models.otlp import PendingCall, PendingEvent, SpanLink
from grading.reviews.versions import criteria_active

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

    print(f"{conversations} conversations x {turns} turns = {messages:,} messages")
    print(
        f"JSON API: {messages / json_wall:,.0f} messages/s in {json_wall:.1f} s, "
        f"CPU {json_cpu / messages * 1e3:.2f} ms/message"
    )
    print(
        f"JSON API, one append per model call: {messages / per_call_wall:,.0f} messages/s in {per_call_wall:.1f} s, "
        f"CPU {per_call_cpu / messages * 1e3:.2f} ms/message"
    )
    fingerprints = dict(Conversation.objects.filter(org=json_org).values_list("external_id", "fingerprint"))
    conventions = {
        "spans": ("OTLP, GenAI conventions", otlp_org),
        "logs": ("OTLP, GenAI, messages as log records", Org.objects.create(name="Logs", slug="bench-logs")),
        "openinference": ("OTLP, OpenInference", Org.objects.create(name="OI", slug="bench-oi")),
        "ai_sdk": ("OTLP, Vercel AI SDK", Org.objects.create(name="AI SDK", slug="bench-ai-sdk")),
    }
    for convention, (name, org) in conventions.items():
        spans = sorted(
            (span for exchange in exchanges for span in exchange["spans" if convention == "logs" else convention]),
            key=lambda s: s.start_time_unix_nano,
        )
        batches = [spans[i : i + SPANS_PER_BATCH] for i in range(0, len(spans), SPANS_PER_BATCH)]
        requests = []
        for batch in batches:
            if convention == "logs":
                bare, records = _as_log_records(batch)
                requests += [("traces", _request(bare)), ("logs", _logs_request(records))]
            else:
                requests.append(("traces", _request(batch)))
        bodies = [(signal, request.SerializeToString()) for signal, request in requests]
        client = _client(org)
        wall, cpu = time.perf_counter(), time.process_time()
        for signal, body in bodies:
            response = client.post(f"/api/v1/otlp/v1/{signal}", body, content_type="application/x-protobuf")
            assert response.status_code == 200, response.content[:300]
            assert not response.content or signal == "traces" and convention == "logs", response.content[:300]
        otlp_wall, otlp_cpu = time.perf_counter() - wall, time.process_time() - cpu

        stored = Message.objects.filter(conversation__org=org).count()
        assert stored == messages, f"OTLP ({convention}) stored {stored} messages, JSON {messages}"
        mismatched = sum(
            1
            for external_id, fingerprint in Conversation.objects.filter(org=org).values_list(
                "external_id", "fingerprint"
            )
            if fingerprints.get(external_id) != fingerprint
        )
        print(
            f"{name}: {len(spans):,} spans in {len(batches)} batches of up to {SPANS_PER_BATCH} "
            f"({len(bodies)} requests), {sum(len(body) for _, body in bodies) / 1e6:.1f} MB of protobuf"
        )
        print(
            f"  {len(spans) / otlp_wall:,.0f} spans/s, {messages / otlp_wall:,.0f} messages/s "
            f"in {otlp_wall:.1f} s, "
            f"CPU {otlp_cpu / len(spans) * 1e3:.2f} ms/span ({otlp_cpu / messages * 1e3:.2f} ms/message)"
        )
        print(
            f"  / JSON messages per second: {json_wall / otlp_wall:.2f}x "
            f"(CPU per message {otlp_cpu / json_cpu:.2f}x the JSON API's); against one append per model call: "
            f"{per_call_wall / otlp_wall:.2f}x (CPU {otlp_cpu / per_call_cpu:.2f}x); "
            f"fingerprints mismatched: {mismatched}"
        )
        assert mismatched == 0
    _one_request()


@contextmanager
def phases() -> Iterator[dict[str, Callable[[], None]]]:
    """For `bench.compare`: the same BENCH_OTLP_CONVERSATIONS conversations of BENCH_OTLP_TURNS turns, each phase
    into an org of its own: posted whole to the JSON API, and as an instrumented agent's spans in the GenAI
    conventions (batches of SPANS_PER_BATCH in time order), and with the messages as log records (each batch of bare
    spans followed by their records, as in `main`). With BENCH_OTLP_STORED=<file>, what those write is
    written to the file first (`_stored_check`), so that two sides' files can be compared."""
    conversations = int(os.environ.get("BENCH_OTLP_CONVERSATIONS", "200"))
    turns = int(os.environ.get("BENCH_OTLP_TURNS", "5"))
    fresh_org()
    exchanges = [_exchange(i, turns) for i in range(conversations)]
    messages = sum(len(exchange["messages"]) for exchange in exchanges)
    posts = [
        json.dumps({"external_id": exchange["id"], "application": "bench", "messages": exchange["messages"]})
        for exchange in exchanges
    ]
    spans = sorted((s for exchange in exchanges for s in exchange["spans"]), key=lambda s: s.start_time_unix_nano)
    batches = [
        _request(spans[i : i + SPANS_PER_BATCH]).SerializeToString() for i in range(0, len(spans), SPANS_PER_BATCH)
    ]
    as_logs = []
    for i in range(0, len(spans), SPANS_PER_BATCH):
        bare, records = _as_log_records(spans[i : i + SPANS_PER_BATCH])
        as_logs += [("traces", _request(bare)), ("logs", _logs_request(records))]
    logs_bodies = [(signal, request.SerializeToString()) for signal, request in as_logs]
    orgs = count()
    if path := os.environ.get("BENCH_OTLP_STORED"):
        with open(path, "w") as out:
            json.dump(_stored_check(exchanges, batches, logs_bodies), out, indent=1, sort_keys=True)

    def json_api() -> None:
        client = _client(Org.objects.create(name="JSON", slug=f"bench-json-{next(orgs)}"))
        for post in posts:
            response = client.post("/api/v1/conversations", post, content_type="application/json")
            assert response.status_code == 201, response.content[:300]

    def otlp() -> None:
        client = _client(Org.objects.create(name="OTLP", slug=f"bench-otlp-{next(orgs)}"))
        for body in batches:
            response = client.post("/api/v1/otlp/v1/traces", body, content_type="application/x-protobuf")
            assert response.status_code == 200 and not response.content, response.content[:300]

    def otlp_logs() -> None:
        client = _client(Org.objects.create(name="OTLP logs", slug=f"bench-otlp-logs-{next(orgs)}"))
        for signal, body in logs_bodies:
            response = client.post(f"/api/v1/otlp/v1/{signal}", body, content_type="application/x-protobuf")
            assert response.status_code == 200, response.content[:300]

    yield {
        f"JSON API ({conversations} conversations, {messages:,} messages)": json_api,
        f"OTLP, GenAI spans ({len(spans):,} spans in {len(batches)} requests)": otlp,
        f"OTLP, messages as log records ({len(logs_bodies)} requests)": otlp_logs,
    }


def _stored_check(exchanges: list[dict], batches: list[bytes], logs_bodies: list[tuple[str, bytes]]) -> dict:
    """What ingestion stores, each way, for comparing two commits: the conversations posted whole to the JSON API,
    appended per model call, sent as spans, and as bare spans and log records; the last three reviewed halfway
    (every third review waiting for people, the rest passed), so that the appends after it move the reviews' states,
    and again at the end, before the second half is sent again (which changes nothing). The log records are
    reviewed halfway between a batch's spans and their records, with the waiting calls as they stand then, and the
    calls' rows are kept too (`_calls`)."""
    stored = {}
    whole = Org.objects.create(name="Stored JSON", slug="stored-json")
    client = _client(whole)
    for exchange in exchanges:
        body = {"external_id": exchange["id"], "application": "bench", "messages": exchange["messages"]}
        response = client.post("/api/v1/conversations", json.dumps(body), content_type="application/json")
        assert response.status_code == 201, response.content[:300]
    stored["json"] = _stored(whole)

    per_call = Org.objects.create(name="Stored per call", slug="stored-per-call")
    client = _client(per_call)
    steps = max(len(exchange["steps"]) for exchange in exchanges)
    for step in range(steps):
        if step == steps // 2:
            _reviewed(per_call)
        for exchange in exchanges:
            if step >= len(exchange["steps"]):
                continue
            if step == 0:
                body = {"external_id": exchange["id"], "application": "bench", "messages": exchange["steps"][0]}
                response = client.post("/api/v1/conversations", json.dumps(body), content_type="application/json")
            else:
                response = client.post(
                    f"/api/v1/conversations/{exchange['id']}/messages",
                    json.dumps({"messages": exchange["steps"][step]}),
                    content_type="application/json",
                )
            assert response.status_code in (200, 201), response.content[:300]
    stored["json per call, states before the second review"] = _states(per_call)
    _reviewed(per_call)
    for exchange in exchanges:
        body = json.dumps({"messages": exchange["steps"][-1]})
        url = f"/api/v1/conversations/{exchange['id']}/messages"
        response = client.post(url, body, content_type="application/json")
        assert response.status_code == 200, response.content[:300]
    stored["json per call"] = _stored(per_call)

    spans = Org.objects.create(name="Stored spans", slug="stored-spans")
    client = _client(spans)
    half = len(batches) // 2
    for number, body in enumerate([*batches, *batches[half:]]):
        if number == len(batches):
            stored["otlp spans, states before the second review"] = _states(spans)
        if number in (half, len(batches)):
            _reviewed(spans)
        response = client.post("/api/v1/otlp/v1/traces", body, content_type="application/x-protobuf")
        assert response.status_code == 200 and not response.content, response.content[:300]
    stored["otlp spans"] = _stored(spans)

    logs = Org.objects.create(name="Stored logs", slug="stored-logs")
    client = _client(logs)
    half = len(logs_bodies) // 2 | 1  # after a batch's spans, before their records: its calls wait
    for number, (signal, body) in enumerate([*logs_bodies, *logs_bodies[half:]]):
        if number == half:
            stored["otlp log records, halfway"] = _stored(logs) | {"calls": _calls(logs)}
        if number == len(logs_bodies):
            stored["otlp log records, states before the second review"] = _states(logs)
        if number in (half, len(logs_bodies)):
            _reviewed(logs)
        response = client.post(f"/api/v1/otlp/v1/{signal}", body, content_type="application/x-protobuf")
        assert response.status_code == 200, response.content[:300]
    stored["otlp log records"] = _stored(logs) | {"calls": _calls(logs)}
    return stored


def _reviewed(org: Org) -> None:
    """A live review of each of the org's conversations, reading its evidence as it stands (the one before it
    superseded)."""
    version = criteria_active(org=org, kind=ItemKind.CONVERSATION)
    Review.objects.filter(org=org, state__in=LIVE_STATES).update(state=ReviewState.SUPERSEDED)
    finished = timezone.now()
    for number, conversation in enumerate(Conversation.objects.filter(org=org).order_by("external_id")):
        waits = number % 3 == 0
        Review.objects.create(
            org=org,
            kind=ItemKind.CONVERSATION,
            conversation=conversation,
            application=conversation.application,
            fingerprint=conversation.fingerprint,
            criteria_version=version,
            judge={"backend": "openai", "model": "bench"},
            judge_key="bench",
            started_at=finished - timedelta(seconds=5),
            finished_at=finished,
            routed_at=finished,
            stages=1,
            route=Route.HUMAN if waits else Route.PASS,
            reason="unknown_check" if waits else "",
            checks={},
            usage={},
            state=ReviewState.WAITING if waits else ReviewState.CURRENT,
        )


def _states(org: Org) -> list:
    return list(Review.objects.filter(org=org).order_by("pk").values_list("conversation__external_id", "state"))


def _stored(org: Org) -> dict:
    """The org's conversations, messages, span links and reviews' states, by external id; a time of this run (the
    JSON API's times of receipt, the last activity) as "now"."""
    recent = timezone.now() - timedelta(hours=1)

    def plain(row: dict) -> dict:
        return {name: _plain(value, recent) for name, value in row.items()}

    conversations = {}
    for conversation in Conversation.objects.filter(org=org).order_by("external_id").values():
        key = conversation["external_id"]
        conversations[key] = plain({k: v for k, v in conversation.items() if k not in ("id", "org_id", "updated_at")})
        messages = Message.objects.filter(conversation_id=conversation["id"]).order_by("external_id", "twin")
        conversations[key]["messages"] = [
            plain({k: v for k, v in message.items() if k not in ("id", "conversation_id")})
            for message in messages.values()
        ]
        links = SpanLink.objects.filter(conversation_id=conversation["id"]).order_by("message_external_id")
        conversations[key]["span links"] = list(
            links.values_list("message_external_id", "trace_id", "span_id", "response_id")
        )
        reviews = Review.objects.filter(conversation_id=conversation["id"]).order_by("pk")
        conversations[key]["reviews"] = list(reviews.values_list("fingerprint", "state"))
    return conversations


def _calls(org: Org) -> list:
    """The org's model calls that waited for their other part (PendingCall), by span, with their records' count
    (PendingEvent); a time of this run as "now"."""
    recent = timezone.now() - timedelta(hours=1)
    calls = PendingCall.objects.filter(org=org).order_by("trace_id", "span_id")
    records = dict(
        PendingEvent.objects.filter(call__org=org).values("call_id").annotate(n=Count("pk")).values_list("call_id", "n")
    )
    return [
        {name: _plain(value, recent) for name, value in call.items() if name not in ("id", "org_id")}
        | {"records": records.get(call["id"], 0)}
        for call in calls.values()
    ]


def _plain(value: object, recent: datetime) -> object:
    """A stored value as JSON, a time of this run (a datetime, or one written out in `evidence_state`) as "now"."""
    if isinstance(value, str) and len(value) >= 19 and value[4] == "-" and value[10] == "T":
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return value
    if isinstance(value, datetime):
        return "now" if value > recent else value.isoformat()
    if isinstance(value, dict):
        return {key: _plain(item, recent) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item, recent) for item in value]
    return value


@dataclass
class Cost:
    wall: float = 0.0
    cpu: float = 0.0
    db_cpu: float = 0.0
    transactions: list[float] = field(default_factory=list)

    def per(self, n: int, unit: str) -> str:
        return (
            f"{self.wall / n * 1000:6.2f} ms wall, {self.cpu / n * 1000:5.2f} ms CPU here, "
            f"{self.db_cpu / n * 1000:5.2f} ms CPU in PostgreSQL per {unit}"
        )

    def held(self) -> str:
        if not self.transactions:
            return "no transaction"
        return (
            f"{len(self.transactions)} transactions of {statistics.median(self.transactions) * 1000:.0f} ms "
            f"(median), the longest {max(self.transactions) * 1000:.0f} ms"
        )


@contextmanager
def _clock(cost: Cost) -> Iterator[None]:
    """Time the block; and each transaction in it, from its first statement to its commit."""
    began: list[float] = []

    def committed() -> None:
        cost.transactions.append(time.perf_counter() - began.pop())

    def watch(execute, sql, params, many, context):
        if context["connection"].in_atomic_block and not began:
            began.append(time.perf_counter())
            transaction.on_commit(committed)
        return execute(sql, params, many, context)

    wall, cpu, db = time.perf_counter(), time.process_time(), backend_cpu()
    with connection.execute_wrapper(watch):
        yield
    cost.wall += time.perf_counter() - wall
    cost.cpu += time.process_time() - cpu
    cost.db_cpu += backend_cpu() - db


def _one_request() -> None:
    max_spans, max_conversations = settings.MAX_OTLP_SPANS_PER_REQUEST, settings.MAX_OTLP_CONVERSATIONS_PER_REQUEST
    print(
        f"-- one request at the limits (MAX_OTLP_SPANS_PER_REQUEST {max_spans:,}, "
        f"MAX_OTLP_CONVERSATIONS_PER_REQUEST {max_conversations:,}) and at half of them"
    )
    offset = 1_000_000
    for n in (max_conversations // 2, max_conversations):
        json_client = _client(Org.objects.create(name=f"JSON {n}", slug=f"bench-json-{n}"))
        yardstick = Cost()
        with _clock(yardstick):
            for i in range(n):
                body = {"external_id": f"conv-{offset + i}", "application": "bench", "messages": _one_call(i)[1]}
                response = json_client.post("/api/v1/conversations", json.dumps(body), content_type="application/json")
                assert response.status_code == 201, response.content[:300]
        body = _request([_one_call(offset + i)[0] for i in range(n)]).SerializeToString()
        cost = _send(_client(Org.objects.create(name=f"One {n}", slug=f"bench-one-{n}")), body)
        print(
            f"{n:>5,} new conversations, one call each: {cost.wall:5.2f} s, {cost.per(n, 'conversation')}; "
            f"{cost.held()}; {(cost.cpu + cost.db_cpu) / (yardstick.cpu + yardstick.db_cpu):.2f}x the CPU of the "
            f"JSON API's one request each ({yardstick.per(n, 'conversation')})"
        )
        offset += n

    turns = max(max_spans // max_conversations - 2, 1)  # an exchange of `turns` turns is turns + 2 spans
    for conversations in (max_conversations // 2, max_conversations):
        exchanges = [_exchange(offset + i, turns) for i in range(conversations)]
        spans = sorted((s for exchange in exchanges for s in exchange["spans"]), key=lambda s: s.start_time_unix_nano)
        spans = spans[: max_spans * conversations // max_conversations]
        body = _request(spans).SerializeToString()
        cost = _send(
            _client(Org.objects.create(name=f"Spans {conversations}", slug=f"bench-spans-{conversations}")), body
        )
        print(
            f"{len(spans):>5,} spans ({turns + 2} per conversation, {len(body) / 1e6:.1f} MB) in {conversations:,} "
            f"conversations: {cost.wall:5.2f} s, {cost.per(len(spans), 'span')}; {cost.held()}"
        )
        offset += conversations

    unbounded = int(os.environ.get("BENCH_OTLP_UNBOUNDED", "1000"))
    print(f"-- without the limits: one request of {unbounded:,} new conversations, then {2 * unbounded:,}")
    settings.MAX_OTLP_SPANS_PER_REQUEST = settings.MAX_OTLP_CONVERSATIONS_PER_REQUEST = 4 * unbounded
    costs = []
    for n in (unbounded, 2 * unbounded):
        body = _request([_one_call(offset + i)[0] for i in range(n)]).SerializeToString()
        costs.append(_send(_client(Org.objects.create(name=f"Unbounded {n}", slug=f"bench-unbounded-{n}")), body))
        print(f"{n:>5,} new conversations: {costs[-1].wall:5.2f} s, {costs[-1].per(n, 'conversation')}")
        offset += n
    small, large = costs
    print(
        f"2n against n: {large.wall / small.wall:.2f}x the wall time, {large.cpu / small.cpu:.2f}x the CPU here, "
        f"{large.db_cpu / small.db_cpu:.2f}x the CPU in PostgreSQL (2.00x is linear)"
    )
    settings.MAX_OTLP_SPANS_PER_REQUEST, settings.MAX_OTLP_CONVERSATIONS_PER_REQUEST = max_spans, max_conversations

    over = 5 * max_spans
    body = _request([_one_call(offset + i)[0] for i in range(over)]).SerializeToString()
    refused = Cost()
    with _clock(refused):
        response = _client(Org.objects.create(name="Over", slug="bench-over")).post(
            "/api/v1/otlp/v1/traces", body, content_type="application/x-protobuf"
        )
    assert response.status_code == 413, response.content[:300]
    print(f"a request of {over:,} spans ({len(body) / 1e6:.1f} MB) refused with 413 in {refused.wall * 1000:.0f} ms")


def _send(client: Client, body: bytes) -> Cost:
    cost = Cost()
    with _clock(cost):
        response = client.post("/api/v1/otlp/v1/traces", body, content_type="application/x-protobuf")
    assert response.status_code == 200 and not response.content, response.content[:300]
    return cost


def _one_call(i: int) -> tuple[Span, list[dict]]:
    """A conversation of one model call, as its chat span and as the JSON API's messages."""
    question, answer = f"Where is order {i}? It was due on Monday.", f"Order {i} has shipped with DHL."
    inputs = [{"role": "user", "parts": [{"type": "text", "content": question}]}]
    outputs = [{"role": "assistant", "parts": [{"type": "text", "content": answer}]}]
    sid = f"{1:08x}{i:08x}"
    messages = [
        {"id": f"{sid}:in0", "role": "user", "content": question},
        {"id": f"{sid}:out0", "parent_id": f"{sid}:in0", "role": "assistant", "content": answer},
    ]
    return _span(f"{i + 1:032x}", sid, T0_NS + i * 1_000_000, "chat", inputs, outputs), messages


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
    openinference: list[Span] = []  # the same calls as OpenInference records them, under the same span ids
    ai_sdk: list[Span] = []  # and as the Vercel AI SDK does
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
        openinference.append(_openinference_span(trace, sid, clock, history, outputs))
        ai_sdk.append(_ai_sdk_span(trace, sid, clock, history, outputs))
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
            openinference.append(_openinference_tool_span(trace, tool_sid, clock, f"call_{i}", result))
            ai_sdk.append(_ai_sdk_tool_span(trace, tool_sid, clock, f"call_{i}", result))
            clock += 10_000_000_000
            record(f"{tool_sid}:tool", "tool", content=result, tool_call_id=f"call_{i}")
            history.append(
                {"role": "tool", "parts": [{"type": "tool_call_response", "id": f"call_{i}", "response": result}]}
            )
        answer = f"Order {1000 + turn} has shipped with DHL and arrives on Thursday. " * 3
        sid = chat([{"role": "assistant", "parts": [{"type": "text", "content": answer}]}])
        record(f"{sid}:out0", "assistant", content=answer)
        history.append({"role": "assistant", "parts": [{"type": "text", "content": answer}]})
    return {
        "id": f"conv-{i}",
        "messages": messages,
        "spans": spans,
        "openinference": openinference,
        "ai_sdk": ai_sdk,
        "steps": steps,
    }


def _attributes(values: dict) -> list[KeyValue]:
    return [KeyValue(key=key, value=AnyValue(string_value=value)) for key, value in values.items()]


def _built(trace: str, sid: str, start: int, name: str, attributes: dict, *, tool: bool = False) -> Span:
    """A span of the exchange: a model call lasts 0.9 s, a tool run 0.1 s."""
    span = Span(trace_id=bytes.fromhex(trace), span_id=bytes.fromhex(sid), name=name, start_time_unix_nano=start,
                end_time_unix_nano=start + (100_000_000 if tool else 900_000_000))  # fmt: skip
    span.attributes.extend(_attributes(attributes))
    return span


def _span(trace: str, sid: str, start: int, operation: str, inputs: list[dict], outputs: list[dict]) -> Span:
    return _built(trace, sid, start, f"{operation} support-model", {
        "gen_ai.operation.name": operation,
        "gen_ai.conversation.id": f"conv-{int(trace, 16) - 1}",
        "gen_ai.input.messages": json.dumps(inputs, separators=(",", ":")),
        "gen_ai.output.messages": json.dumps(outputs, separators=(",", ":")),
    })  # fmt: skip


def _tool_span(trace: str, sid: str, start: int, call_id: str, result: str) -> Span:
    return _built(trace, sid, start, "execute_tool order_status", {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.conversation.id": f"conv-{int(trace, 16) - 1}",
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.call.result": result,
    }, tool=True)  # fmt: skip


def _openinference_span(trace: str, sid: str, start: int, inputs: list[dict], outputs: list[dict]) -> Span:
    attributes = {"openinference.span.kind": "LLM", "session.id": f"conv-{int(trace, 16) - 1}"}
    for side, messages in (("input", inputs), ("output", outputs)):
        for index, message in enumerate(messages):
            prefix = f"llm.{side}_messages.{index}.message"
            attributes[f"{prefix}.role"] = message["role"]
            for part in message["parts"]:
                if part["type"] == "text":
                    attributes[f"{prefix}.content"] = part["content"]
                elif part["type"] == "tool_call":
                    call = f"{prefix}.tool_calls.0.tool_call"
                    attributes[f"{call}.id"] = part["id"]
                    attributes[f"{call}.function.name"] = part["name"]
                    attributes[f"{call}.function.arguments"] = json.dumps(part["arguments"], separators=(",", ":"))
                else:  # tool_call_response
                    attributes[f"{prefix}.tool_call_id"] = part["id"]
                    attributes[f"{prefix}.content"] = part["response"]
    return _built(trace, sid, start, "ChatCompletion", attributes)


def _openinference_tool_span(trace: str, sid: str, start: int, call_id: str, result: str) -> Span:
    return _built(trace, sid, start, "order_status", {
        "openinference.span.kind": "TOOL",
        "session.id": f"conv-{int(trace, 16) - 1}",
        "tool.name": "order_status",
        "tool.id": call_id,
        "output.value": result,
    }, tool=True)  # fmt: skip


def _ai_sdk_span(trace: str, sid: str, start: int, inputs: list[dict], outputs: list[dict]) -> Span:
    prompt = []
    for message in inputs:
        parts = []
        for part in message["parts"]:
            if part["type"] == "text":
                parts.append({"type": "text", "text": part["content"]})
            elif part["type"] == "tool_call":
                parts.append({"type": "tool-call", "toolCallId": part["id"], "toolName": part["name"],
                              "input": part["arguments"]})  # fmt: skip
            else:
                parts.append({"type": "tool-result", "toolCallId": part["id"], "toolName": "order_status",
                              "output": {"type": "text", "value": part["response"]}})  # fmt: skip
        prompt.append({"role": message["role"], "content": parts[0]["text"] if message["role"] == "system" else parts})
    attributes = {
        "ai.operationId": "ai.generateText.doGenerate",
        "ai.telemetry.metadata.sessionId": f"conv-{int(trace, 16) - 1}",
        "ai.prompt.messages": json.dumps(prompt, separators=(",", ":")),
    }
    [reply] = outputs
    calls = [part for part in reply["parts"] if part["type"] == "tool_call"]
    if calls:
        attributes["ai.response.toolCalls"] = json.dumps(
            [
                {
                    "toolCallId": c["id"],
                    "toolName": c["name"],
                    "input": json.dumps(c["arguments"], separators=(",", ":")),
                }
                for c in calls
            ]  # fmt: skip
        )
    else:
        attributes["ai.response.text"] = reply["parts"][0]["content"]
    return _built(trace, sid, start, "ai.generateText.doGenerate", attributes)


def _ai_sdk_tool_span(trace: str, sid: str, start: int, call_id: str, result: str) -> Span:
    return _built(trace, sid, start, "ai.toolCall", {
        "ai.operationId": "ai.toolCall",
        "ai.telemetry.metadata.sessionId": f"conv-{int(trace, 16) - 1}",
        "ai.toolCall.name": "order_status",
        "ai.toolCall.id": call_id,
        "ai.toolCall.result": result,
    }, tool=True)  # fmt: skip


def _as_log_records(spans: list[Span]) -> tuple[list[Span], list[LogRecord]]:
    """The spans as an instrumentation in its log-based mode sends them: chat spans without their messages, and
    per chat span a gen_ai.client.inference.operation.details record that carries them."""
    bare, records = [], []
    for span in spans:
        content = [kv for kv in span.attributes if kv.key in ("gen_ai.input.messages", "gen_ai.output.messages")]
        if not content:
            bare.append(span)
            continue
        stripped = Span()
        stripped.CopyFrom(span)
        del stripped.attributes[:]
        stripped.attributes.extend(kv for kv in span.attributes if kv not in content)
        bare.append(stripped)
        record = LogRecord(trace_id=span.trace_id, span_id=span.span_id, time_unix_nano=span.end_time_unix_nano,
                           event_name="gen_ai.client.inference.operation.details")  # fmt: skip
        record.attributes.extend(content)
        records.append(record)
    return bare, records


def _logs_request(records: list[LogRecord]) -> ExportLogsServiceRequest:
    request = ExportLogsServiceRequest()
    resource_logs = request.resource_logs.add()
    resource_logs.resource.attributes.extend(_attributes({"service.name": "bench"}))
    resource_logs.scope_logs.add().log_records.extend(records)
    return request


def _request(spans: list[Span]) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    resource_spans.resource.attributes.extend(_attributes({"service.name": "bench"}))
    resource_spans.scope_spans.add().spans.extend(spans)
    return request

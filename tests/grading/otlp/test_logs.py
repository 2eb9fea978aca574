"""The OTLP/HTTP logs endpoint: a model call's messages sent as log records (the instrumentations' default) are
joined to its span, whichever arrives first, and its conversation is not scorable while they are awaited."""

import json
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from grading.api.keys import api_key_create
from grading.core.errors import LimitExceeded
from grading.models import Conversation, Message
from grading.models.otlp import PendingCall, PendingEvent
from reviewer.celery import app
from tests.builders.otlp_spans import (
    as_otlp_json,
    bare_chat_span,
    export_request,
    gzipped,
    log_record,
    logs_request,
    span_id,
    text,
    two_turns_in_log_records,
    two_turns_with_a_tool,
)

pytestmark = pytest.mark.django_db
PROTOBUF = "application/x-protobuf"
DETAILS = "gen_ai.client.inference.operation.details"
CANONICAL = ("role", "content", "tool_calls", "tool_call_id", "name")


@pytest.fixture
def key(org) -> str:
    return api_key_create(org=org, name="collector").plaintext


@pytest.fixture
def post(client, key):
    def send(signal: str, body: bytes, content_type: str = PROTOBUF, auth: str | None = None, **headers):
        return client.post(
            f"/api/v1/otlp/v1/{signal}",
            body,
            content_type=content_type,
            HTTP_AUTHORIZATION=f"Bearer {auth or key}",
            **headers,
        )

    return send


@pytest.fixture
def conversation_of(client, key):
    def get(external_id: str) -> dict:
        response = client.get(f"/api/v1/conversations/{external_id}", HTTP_AUTHORIZATION=f"Bearer {key}")
        assert response.status_code == 200, response.content[:300]
        return response.json()

    return get


def spans_ok(response) -> ExportTraceServiceResponse:
    assert response.status_code == 200, response.content[:500]
    return ExportTraceServiceResponse.FromString(response.content)


def logs_ok(response) -> ExportLogsServiceResponse:
    assert response.status_code == 200, response.content[:500]
    return ExportLogsServiceResponse.FromString(response.content)


def canonical(messages: list[dict]) -> list[tuple]:
    return [tuple(m[field] for field in CANONICAL) for m in messages]


def kept() -> list[tuple]:
    """The waiting calls and what their records add up to: a refused request changes none of it."""
    fields = ("trace_id", "span_id", "span_seen_at", "event_count", "stored_bytes", "replied", "refused")
    return list(PendingCall.objects.order_by("pk").values_list(*fields))


def send_spans(post, spans) -> ExportTraceServiceResponse:
    return spans_ok(post("traces", export_request(*spans).SerializeToString()))


def send_logs(post, records) -> ExportLogsServiceResponse:
    return logs_ok(post("logs", logs_request(*records).SerializeToString()))


def test_spans_then_their_log_records_give_the_conversation_the_spans_alone_would(post, conversation_of):
    spans, records = two_turns_in_log_records(conversation="conv-logs")
    waiting = send_spans(post, spans)
    assert waiting.partial_success.rejected_spans == 0
    assert "3 model call(s) of this request wait for their other part" in waiting.partial_success.error_message
    assert not Conversation.objects.filter(external_id="conv-logs").exists()

    answer = send_logs(post, records)
    assert not answer.HasField("partial_success")
    by_logs = conversation_of("conv-logs")
    send_spans(post, two_turns_with_a_tool())
    by_spans = conversation_of("conv-otlp")
    assert canonical(by_logs["messages"]) == canonical(by_spans["messages"])
    assert by_logs["active_path"][-1] == f"{span_id(4)}:out0"
    assert (by_logs["branch_count"], by_logs["scorable"]) == (1, by_spans["scorable"])
    assert by_logs["metadata"] == {"provider": "openai"}  # the spans' gen_ai.system, kept while the calls waited
    assert PendingCall.objects.filter(written_at=None).count() == 0


def test_log_records_before_their_spans_give_the_same_evidence_as_after(post, conversation_of):
    spans, records = two_turns_in_log_records(conversation="spans-first")
    send_spans(post, spans)
    send_logs(post, records)
    spans_first = conversation_of("spans-first")

    spans, records = two_turns_in_log_records(conversation="logs-first", trace="6c" * 16)
    early = send_logs(post, records)
    assert "wait for their other part" in early.partial_success.error_message
    assert not Conversation.objects.filter(external_id="logs-first").exists()
    send_spans(post, spans)
    logs_first = conversation_of("logs-first")

    assert logs_first["fingerprint"] == spans_first["fingerprint"]  # message ids come from span ids, as do these
    assert logs_first["active_path"] == spans_first["active_path"]
    assert logs_first["messages"] == spans_first["messages"]


def test_a_calls_records_give_the_same_messages_whichever_came_first_whatever_their_fields_order(post, conversation_of):
    # Tool arguments as structure are kept as compact JSON, in the order of their fields: records that waited were
    # kept by PostgreSQL (jsonb orders the fields its own way and writes 1.5e16 as 15000000000000000), so the
    # records that complete a call must read as if they had been kept too.
    arguments = {"order_id": 1182, "carrier": "DHL", "weight": 1.5e16, "volume": -0.0, "ratio": 1.25e-7}
    call = {"id": "call_1", "type": "function", "function": {"name": "order_status", "arguments": arguments}}
    by_order = {}
    for first, trace in (("spans", "7a" * 16), ("logs", "7b" * 16)):
        span = bare_chat_span(1, conversation=f"{first}-first", trace=trace)
        records = [
            log_record(1, "gen_ai.user.message", {"content": "Where is order 1182?"}, trace=trace),
            log_record(1, "gen_ai.choice", {"index": 0, "finish_reason": "tool_calls",
                                             "message": {"role": "assistant", "tool_calls": [call]}}, trace=trace),
        ]  # fmt: skip
        parts = [("traces", export_request(span)), ("logs", logs_request(*records))]
        for signal, request in parts if first == "spans" else parts[::-1]:
            assert post(signal, request.SerializeToString()).status_code == 200
        by_order[first] = conversation_of(f"{first}-first")
    assert by_order["spans"]["messages"] == by_order["logs"]["messages"]
    assert by_order["spans"]["fingerprint"] == by_order["logs"]["fingerprint"]
    [reply] = [message for message in by_order["logs"]["messages"] if message["role"] == "assistant"]
    assert json.loads(reply["tool_calls"][0]["function"]["arguments"])["order_id"] == 1182


def test_a_conversation_is_not_scorable_while_a_calls_messages_are_awaited(post, conversation_of, settings):
    settings.CONVERSATION_QUIET_MINUTES = 0
    spans, records = two_turns_in_log_records()
    send_spans(post, spans[:3])
    send_logs(post, records[:-7])  # the first two calls' messages
    assert conversation_of("conv-otlp")["scorable"] is True

    send_spans(post, spans[3:])  # the third call: its messages come later
    awaiting = conversation_of("conv-otlp")
    assert (awaiting["scorable"], awaiting["not_scorable_reason"]) == (False, "content_awaited")
    assert Conversation.objects.get(external_id="conv-otlp").content_awaited_since is not None

    send_logs(post, records[-7:])
    whole = conversation_of("conv-otlp")
    assert (whole["scorable"], whole["not_scorable_reason"]) == (True, None)
    assert len(whole["active_path"]) == len(awaiting["active_path"]) + 2


def test_a_resent_span_after_its_call_was_written_waits_for_nothing(post, conversation_of):
    spans, records = two_turns_in_log_records()
    send_spans(post, spans)
    send_logs(post, records)
    before = conversation_of("conv-otlp")

    resent = send_spans(post, spans)
    assert not resent.HasField("partial_success")
    again = send_logs(post, records)
    assert not again.HasField("partial_success")
    assert conversation_of("conv-otlp") == before
    assert Conversation.objects.get(external_id="conv-otlp").content_awaited_since is None


def test_a_logs_request_failing_after_the_join_leaves_its_calls_waiting_and_their_resend_writes_them(
    post, conversation_of, monkeypatch
):
    """The records that complete a call go straight into its conversation: a request that fails before writing it
    (here a limit another writer reached in between) leaves the call waiting for them, never whole without them."""
    spans, records = two_turns_in_log_records()
    first_call = [record for record in records if record.span_id == records[0].span_id]
    send_spans(post, spans[:1])

    def refused(**_) -> None:
        raise LimitExceeded("MAX_MESSAGES_PER_CONVERSATION", 1, "another writer filled the conversation")

    with monkeypatch.context() as patched:
        patched.setattr("grading.otlp.pending.traces_ingest", refused)
        assert post("logs", logs_request(*first_call).SerializeToString()).status_code == 413
    [(_, _, span_seen_at, events, stored_bytes, replied, refused_why)] = kept()
    assert span_seen_at is not None and (events, stored_bytes, replied, refused_why) == (0, 0, False, "")
    assert not PendingEvent.objects.exists()
    assert not Conversation.objects.filter(external_id="conv-otlp").exists()

    send_logs(post, first_call)  # the exporter's retry
    assert [m["role"] for m in conversation_of("conv-otlp")["messages"]] == ["system", "user", "assistant"]
    assert PendingCall.objects.get().written_at is not None


def test_a_resent_batch_of_a_calls_first_records_adds_no_message_twice(post, conversation_of):
    """An exporter resends a batch it got no answer for: the records it holds are already kept."""
    spans, records = two_turns_in_log_records()
    first_call = records[:3]
    send_logs(post, first_call[:2])
    send_logs(post, first_call[:2])  # resent before the reply's record and the span came
    send_spans(post, spans[:1])
    send_logs(post, first_call[2:])
    assert [m["role"] for m in conversation_of("conv-otlp")["messages"]] == ["system", "user", "assistant"]


def test_every_answer_warns_of_calls_whose_messages_are_overdue(post, settings):
    settings.OTLP_CONTENT_WAIT_MINUTES = 10
    spans, records = two_turns_in_log_records()
    send_spans(post, spans)
    PendingCall.objects.update(span_seen_at=timezone.now() - timedelta(minutes=11))
    answer = send_logs(post, [log_record(9, "gen_ai.user.message", {"content": "unrelated"})])
    assert "3 model call(s) have waited over OTLP_CONTENT_WAIT_MINUTES (10)" in answer.partial_success.error_message
    assert "OTEL_LOGS_EXPORTER=otlp" in answer.partial_success.error_message

    send_logs(post, records)
    assert "waited over" not in send_logs(post, []).partial_success.error_message


def test_log_records_without_message_content_are_rejected_naming_the_setting(post):
    """The instrumentations' real default: the events are sent with no content unless capture is asked for."""
    spans, records = two_turns_in_log_records()
    send_spans(post, spans[:3])
    send_logs(post, records[:-7])
    send_spans(post, spans[3:])  # the third call's span: its conversation now awaits its messages
    stored = Message.objects.count()
    bare = [
        log_record(4, "gen_ai.system.message", None),
        log_record(4, "gen_ai.user.message", None),
        log_record(4, "gen_ai.choice", {"index": 0, "finish_reason": "stop", "message": {"role": "assistant"}}),
    ]
    answer = send_logs(post, bare)
    assert answer.partial_success.rejected_log_records == 1
    assert "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true" in answer.partial_success.error_message
    assert Message.objects.count() == stored
    # Its last reply is not known, and will not be: the record stays incomplete, and says so.
    assert Conversation.objects.get(external_id="conv-otlp").content_awaited_since is not None


def test_a_details_record_without_messages_completing_a_call_is_rejected_like_one_without_content(post):
    send_spans(post, [bare_chat_span(1)])
    answer = send_logs(post, [log_record(1, DETAILS, {"gen_ai.operation.name": "chat"})])
    assert answer.partial_success.rejected_log_records == 1
    assert "carry no message content" in answer.partial_success.error_message


def test_json_gzip_and_the_event_name_attribute_of_older_sdks_are_read(post, conversation_of):
    spans, records = two_turns_in_log_records()
    send_spans(post, spans)
    older = []
    for record in records:
        copy = log_record(int.from_bytes(record.span_id, "big"), record.event_name, None, event_name_field=False)
        copy.body.CopyFrom(record.body)
        older.append(copy)
    document = as_otlp_json(logs_request(*older))
    response = post("logs", gzipped(json.dumps(document).encode()), "application/json", HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 200 and response.json() == {}
    assert len(conversation_of("conv-otlp")["active_path"]) == 7


def test_records_that_are_not_genai_content_are_ignored_and_those_naming_no_span_rejected(post):
    app_log = log_record(1, "", None)
    app_log.body.string_value = "GET /orders/1182 200"
    no_span = log_record(1, "gen_ai.user.message", {"content": "Hello"})
    no_span.span_id = b""
    answer = send_logs(post, [app_log, no_span])
    assert answer.partial_success.rejected_log_records == 1
    assert "names no span" in answer.partial_success.error_message
    assert not PendingCall.objects.exists()


def test_another_orgs_records_never_join_this_orgs_spans(post, other_org):
    spans, records = two_turns_in_log_records()
    send_spans(post, spans)
    outsider = api_key_create(org=other_org, name="outsider").plaintext
    assert logs_ok(post("logs", logs_request(*records).SerializeToString(), auth=outsider))
    assert not Message.objects.exists()
    assert PendingCall.objects.filter(org=other_org, span_seen_at=None).count() == 3  # kept apart, for a day


def test_the_orgs_waiting_calls_stop_at_the_cap_and_what_completes_a_call_is_still_taken(post, settings):
    settings.OTLP_PENDING_MAX_CALLS = 2
    spans, records = two_turns_in_log_records()
    answer = send_spans(post, spans)  # three bare chat spans: each would wait for its messages
    assert answer.partial_success.rejected_spans == 1
    assert f"model call span {span_id(4)}: not kept" in answer.partial_success.error_message
    assert "OTLP_PENDING_MAX_CALLS (2)" in answer.partial_success.error_message

    full = send_logs(post, records)  # the store is full: the two calls it holds are made whole all the same
    assert full.partial_success.rejected_log_records == 7  # call 4's: its span was not kept either
    assert "OTLP_PENDING_MAX_CALLS (2)" in full.partial_success.error_message
    assert Message.objects.count() == 5
    assert PendingCall.objects.filter(written_at=None).count() == 0


def test_the_bytes_waiting_calls_hold_are_capped_and_a_call_that_cannot_fit_is_refused_whole(post, settings):
    settings.OTLP_PENDING_MAX_BYTES = 1_000
    long = "x" * 600
    first = send_logs(post, [log_record(1, "gen_ai.user.message", {"content": long})])
    assert not first.partial_success.rejected_log_records
    other = send_logs(post, [log_record(2, "gen_ai.user.message", {"content": long})])
    assert other.partial_success.rejected_log_records == 1
    assert "not kept" in other.partial_success.error_message
    assert "OTLP_PENDING_MAX_BYTES (1000 bytes)" in other.partial_success.error_message

    grown = send_logs(post, [log_record(1, "gen_ai.user.message", {"content": long + "y"})])
    assert grown.partial_success.rejected_log_records == 1
    assert f"model call span {span_id(1)}: refused" in grown.partial_success.error_message
    # Its reply and span come: the call is missing a message, so it is refused too, never written without it.
    reply = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Hi"}}
    assert send_logs(post, [log_record(1, "gen_ai.choice", reply)]).partial_success.rejected_log_records == 1
    late = send_spans(post, [bare_chat_span(1)])
    assert late.partial_success.rejected_spans == 1 and "OTLP_PENDING_MAX_BYTES" in late.partial_success.error_message
    assert not Conversation.objects.exists()


def test_a_message_over_the_size_limit_is_refused_when_it_comes_and_its_reply_later_is_not_a_413(post, settings):
    settings.MAX_MESSAGE_BYTES = 1_000
    send_spans(post, [bare_chat_span(1)])
    big = send_logs(post, [log_record(1, "gen_ai.user.message", {"content": "z" * 2_000})])
    assert big.partial_success.rejected_log_records == 1
    assert "MAX_MESSAGE_BYTES (1000)" in big.partial_success.error_message

    reply = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Hi"}}
    answer = send_logs(post, [log_record(1, "gen_ai.choice", reply)])  # an exporter's later batch: 200, not 413
    assert answer.partial_success.rejected_log_records == 1
    assert f"model call span {span_id(1)}: refused, a message of it is" in answer.partial_success.error_message
    assert not Conversation.objects.exists()


def test_a_calls_records_are_bounded_by_the_messages_a_conversation_may_hold(post, settings):
    settings.MAX_MESSAGES_PER_CONVERSATION = 3
    messages = [log_record(1, "gen_ai.user.message", {"content": f"part {n}"}) for n in range(4)]
    assert not send_logs(post, messages[:2]).partial_success.rejected_log_records
    over = send_logs(post, messages[2:])
    assert over.partial_success.rejected_log_records == 2
    assert "MAX_MESSAGES_PER_CONVERSATION (3)" in over.partial_success.error_message
    again = send_logs(post, messages[2:])  # resent: still refused, and nothing of the call is kept
    assert again.partial_success.rejected_log_records == 2
    assert PendingCall.objects.get().event_count == 0


def test_a_waiting_calls_records_are_appended_without_reading_back_what_it_holds(post):
    for batch in range(3):
        send_logs(post, [log_record(1, "gen_ai.user.message", {"content": f"{batch}-{n}"}) for n in range(5)])
    with CaptureQueriesContext(connection) as queries:
        send_logs(post, [log_record(1, "gen_ai.user.message", {"content": f"3-{n}"}) for n in range(5)])
    reads = [query["sql"] for query in queries if query["sql"].lstrip().upper().startswith("SELECT")]
    assert not [sql for sql in reads if '"events"' in sql or '"values"' in sql]
    assert PendingCall.objects.get().event_count == 20


@pytest.fixture
def worker():
    """Tasks sent on commit run in this process."""
    import grading.otlp.tasks  # noqa: F401 - registered, so the task sent by name runs eagerly here

    eager = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = eager


def test_log_records_completing_calls_of_more_conversations_than_a_request_writes_are_written_by_a_worker(
    post, settings, worker, django_capture_on_commit_callbacks
):
    settings.MAX_OTLP_CONVERSATIONS_PER_REQUEST = 2
    records = []
    for n, trace in enumerate(["6c" * 16, "7d" * 16, "8e" * 16]):
        spans, calls = two_turns_in_log_records(conversation=f"conv-{n}", trace=trace)
        send_spans(post, spans[:1])  # accepted: one conversation a request
        records += calls[:3]
    with django_capture_on_commit_callbacks(execute=True):
        answer = send_logs(post, records)  # whole calls of three conversations: never refused for that
        assert answer.partial_success.rejected_log_records == 0
        assert "1 model call(s) this request made whole" in answer.partial_success.error_message
        assert "MAX_OTLP_CONVERSATIONS_PER_REQUEST (2): a worker writes them" in answer.partial_success.error_message
        assert Conversation.objects.count() == 2
    assert sorted(Conversation.objects.values_list("external_id", flat=True)) == ["conv-0", "conv-1", "conv-2"]
    assert not PendingCall.objects.filter(written_at=None).exists()


def test_a_conversation_a_limit_refuses_refuses_only_its_own_calls_of_a_logs_request(post, conversation_of, settings):
    settings.MAX_MESSAGES_PER_CONVERSATION = 2

    def details(trace: str, inputs: list[dict]) -> object:
        answer = [{"role": "assistant", "parts": [text("Hello")]}]
        body = {"gen_ai.input.messages": json.dumps(inputs), "gen_ai.output.messages": json.dumps(answer)}
        return log_record(1, DETAILS, body, trace=trace)

    send_spans(post, [bare_chat_span(1, conversation="long", trace="6c" * 16)])
    send_spans(post, [bare_chat_span(1, conversation="short", trace="7d" * 16)])
    asked = [{"role": "user", "parts": [text("Hi")]}]
    records = [
        details("6c" * 16, [{"role": "system", "parts": [text("Be brief.")]}, *asked]),
        details("7d" * 16, asked),
    ]
    answer = send_logs(post, records)
    assert answer.partial_success.rejected_log_records == 1
    assert "MAX_MESSAGES_PER_CONVERSATION" in answer.partial_success.error_message
    assert len(conversation_of("short")["messages"]) == 2
    assert not Conversation.objects.filter(external_id="long").exists()
    assert send_logs(post, records[:1]).partial_success.rejected_log_records == 1  # resent: refused, not a 413


@pytest.mark.parametrize(
    ("record", "named"),
    [
        (log_record(1, "gen_ai.user.message", {"content": "nul \x00 here"}), "NUL"),
        (log_record(1, "gen_ai.tool.message", {"content": "no id"}), "without the id of the call"),
        (log_record(1, "gen_ai.choice", {"index": "first", "message": {"role": "assistant"}}), "index"),
        (log_record(1, "gen_ai.user.message", {"content": 42}), "content must be"),
    ],
)
def test_malformed_content_is_400_naming_the_record_and_keeps_nothing(post, record, named):
    send_spans(post, two_turns_in_log_records()[0])
    before = kept()
    response = post("logs", logs_request(record).SerializeToString())
    assert response.status_code == 400, response.content[:300]
    assert named in response.content.decode(errors="replace")
    assert "logRecords[0]" in response.content.decode(errors="replace")
    assert kept() == before


def test_more_records_than_a_request_may_hold_is_413_naming_the_limit(post, settings):
    settings.MAX_OTLP_LOG_RECORDS_PER_REQUEST = 3
    records = [log_record(1, "gen_ai.user.message", {"content": f"m{n}"}) for n in range(4)]
    response = post("logs", logs_request(*records).SerializeToString())
    assert response.status_code == 413
    assert b"MAX_OTLP_LOG_RECORDS_PER_REQUEST" in response.content
    assert not PendingCall.objects.exists()


def test_a_gzip_bomb_and_other_content_types_are_refused_as_for_traces(post, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1_000_000
    bomb = gzipped(b"\x0a" * 5_000_000)
    assert post("logs", bomb, HTTP_CONTENT_ENCODING="gzip").status_code == 413
    assert post("logs", b"{}", "text/plain").status_code == 415
    assert post("logs", b"\xff\xff", HTTP_CONTENT_ENCODING="br").status_code == 415


VALID = logs_request(*two_turns_in_log_records()[1]).SerializeToString()


@hypothesis_settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    cuts=st.lists(st.tuples(st.integers(0, len(VALID) - 1), st.integers(0, 255)), min_size=1, max_size=8),
    truncate=st.integers(1, len(VALID)),
)
def test_hostile_protobuf_never_answers_5xx_and_a_refusal_keeps_nothing(post, cuts, truncate):
    body = bytearray(VALID[:truncate])
    for position, byte in cuts:
        if position < len(body):
            body[position] = byte
    before = kept()
    response = post("logs", bytes(body))
    assert response.status_code in (200, 400, 413), response.content[:300]
    if response.status_code != 200:
        assert kept() == before


def test_a_trace_id_that_is_not_hex_is_400(post):
    document = as_otlp_json(logs_request(log_record(1, "gen_ai.user.message", {"content": "hi"})))
    document["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0]["traceId"] = "zz" * 16
    response = post("logs", json.dumps(document).encode(), "application/json")
    assert response.status_code == 400
    assert "resourceLogs[0].scopeLogs[0].logRecords[0].traceId" in response.json()["message"]


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=30,
)
RECORD_FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "traceId": st.sampled_from(["5b" * 16, "", "zz", 5]) | JSON_VALUES,
        "spanId": st.sampled_from([span_id(1), "00", None]) | JSON_VALUES,
        "eventName": st.sampled_from(["gen_ai.user.message", "gen_ai.choice", DETAILS]) | JSON_VALUES,
        "timeUnixNano": st.sampled_from(["1", "-5", "99999999999999999999", 1.5]) | JSON_VALUES,
        "body": st.fixed_dictionaries(
            {},
            optional={
                "kvlistValue": st.fixed_dictionaries(
                    {"values": st.lists(st.fixed_dictionaries({"key": st.text(max_size=8), "value": JSON_VALUES}))}
                ),
                "stringValue": JSON_VALUES,
            },
        ),
        "attributes": JSON_VALUES,
    },
)


@hypothesis_settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(records=st.lists(RECORD_FIELDS, max_size=3), resource=JSON_VALUES)
def test_hostile_otlp_json_logs_never_answer_5xx_and_a_refusal_keeps_nothing(post, records, resource):
    document = {"resourceLogs": [{"resource": resource, "scopeLogs": [{"logRecords": records}]}]}
    before = kept()
    response = post("logs", json.dumps(document).encode(), "application/json")
    assert response.status_code in (200, 400, 413), response.content[:300]
    if response.status_code != 200:
        assert kept() == before

"""The OTLP/HTTP logs endpoint: a model call's messages sent as log records (the instrumentations' default) are
joined to its span, whichever arrives first, and its conversation is not scorable while they are awaited."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from grading.api.keys import api_key_create
from grading.models import Conversation, Message
from grading.otlp.models import PendingCall
from tests.builders.otlp_spans import (
    as_otlp_json,
    export_request,
    gzipped,
    log_record,
    logs_request,
    span_id,
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
    before = list(PendingCall.objects.values_list("span_id", "events"))
    response = post("logs", logs_request(record).SerializeToString())
    assert response.status_code == 400, response.content[:300]
    assert named in response.content.decode(errors="replace")
    assert "logRecords[0]" in response.content.decode(errors="replace")
    assert list(PendingCall.objects.values_list("span_id", "events")) == before


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
    before = list(PendingCall.objects.values_list("trace_id", "span_id", "events"))
    response = post("logs", bytes(body))
    assert response.status_code in (200, 400, 413), response.content[:300]
    if response.status_code != 200:
        assert list(PendingCall.objects.values_list("trace_id", "span_id", "events")) == before


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
    before = list(PendingCall.objects.values_list("trace_id", "span_id", "events"))
    response = post("logs", json.dumps(document).encode(), "application/json")
    assert response.status_code in (200, 400, 413), response.content[:300]
    if response.status_code != 200:
        assert list(PendingCall.objects.values_list("trace_id", "span_id", "events")) == before

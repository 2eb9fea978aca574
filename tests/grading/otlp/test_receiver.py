"""The OTLP/HTTP trace receiver: GenAI spans become conversations through the JSON API's write path."""

import json
import threading
import zlib

import pytest
from django.db import OperationalError, connection, connections, transaction
from django.utils import timezone
from google.rpc import status_pb2
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from grading.api.keys import api_key_create
from grading.models import Conversation, Message
from grading.models.otlp import SpanLink
from grading.otlp.receiver import CONVERSATIONS_PER_TRANSACTION
from tests.builders.database import table_analysed
from tests.builders.otlp_spans import (
    TRACE,
    as_otlp_json,
    chat_span,
    export_request,
    gzipped,
    raw_span,
    span_id,
    text,
    tool_span,
    two_turns_with_a_tool,
)

pytestmark = pytest.mark.django_db
PROTOBUF = "application/x-protobuf"
URL = "/api/v1/otlp/v1/traces"


@pytest.fixture
def key(org) -> str:
    return api_key_create(org=org, name="collector").plaintext


@pytest.fixture
def send(client, key):
    def post(body: bytes, content_type: str = PROTOBUF, **headers):
        return client.post(URL, body, content_type=content_type, HTTP_AUTHORIZATION=f"Bearer {key}", **headers)

    return post


@pytest.fixture
def api(client, key):
    def call(method: str, path: str, body=None):
        kwargs = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
        if body is not None:
            kwargs.update(data=json.dumps(body), content_type="application/json")
        return getattr(client, method)(f"/api/v1{path}", **kwargs)

    return call


def ok(response) -> ExportTraceServiceResponse:
    assert response.status_code == 200, response.content[:500]
    assert response["Content-Type"] == PROTOBUF
    return ExportTraceServiceResponse.FromString(response.content)


def failure(response, status: int) -> str:
    assert response.status_code == status, response.content[:500]
    if response["Content-Type"] == "application/json":
        return response.json()["message"]
    return status_pb2.Status.FromString(response.content).message


def snapshot() -> tuple:
    """Every stored row the receiver can write, with its values."""
    return (
        sorted(Conversation.objects.values_list("external_id", "fingerprint", "updated_at", "last_activity_at")),
        sorted(
            Message.objects.values_list("conversation__external_id", "external_id", "parent_external_id", "content")
        ),
        sorted(SpanLink.objects.values_list("message_external_id", "span_id")),
    )


def path_of(api, external_id: str) -> list[dict]:
    return api("get", f"/conversations/{external_id}").json()["messages"]


def test_spans_of_a_tool_using_exchange_become_one_conversation_on_the_active_path(send, api):
    response = ok(send(export_request(*two_turns_with_a_tool()).SerializeToString()))
    assert not response.HasField("partial_success")
    body = api("get", "/conversations/conv-otlp").json()
    s1, s2, s3, s4 = (span_id(n) for n in (1, 2, 3, 4))
    assert body["active_path"] == [f"{s1}:in0", f"{s1}:in1", f"{s1}:out0", f"{s2}:tool", f"{s3}:out0",
                                   f"{s4}:in5", f"{s4}:out0"]  # fmt: skip
    assert body["branch_count"] == 1
    roles = [(m["role"], m["content"]) for m in body["messages"]]
    assert roles[0] == ("system", "You are the support agent.")
    assert body["messages"][2]["tool_calls"] == [
        {"id": "call_1", "type": "function", "function": {"name": "order_status", "arguments": '{"order":1182}'}}
    ]
    tool = {"role": "tool", "content": '{"status":"shipped"}', "tool_call_id": "call_1", "tool_calls": None}
    assert body["messages"][3] == {"id": f"{s2}:tool", "name": None, **tool}
    conversation = Conversation.objects.get(external_id="conv-otlp")
    assert conversation.application == "support-bot"
    assert SpanLink.objects.get(message_external_id=f"{s4}:out0").response_id == "chatcmpl-4"


def test_it_has_the_fingerprint_of_the_same_exchange_posted_as_json(send, api):
    ok(send(export_request(*two_turns_with_a_tool()).SerializeToString()))
    otlp = api("get", "/conversations/conv-otlp").json()
    as_json = {
        "external_id": "conv-json",
        "application": "support-bot",
        "messages": [
            {**m, "parent_id": previous["id"] if previous else None}
            for previous, m in zip([None, *otlp["messages"]], otlp["messages"], strict=False)
        ],
    }
    posted = api("post", "/conversations", as_json).json()
    assert posted["fingerprint"] == otlp["fingerprint"]
    assert posted["active_path"] == otlp["active_path"]
    assert (posted["scorable"], posted["not_scorable_reason"]) == (otlp["scorable"], otlp["not_scorable_reason"])


def test_protobuf_and_json_bodies_give_identical_conversations(send, api):
    request = export_request(*two_turns_with_a_tool())
    ok(send(request.SerializeToString()))
    by_protobuf = api("get", "/conversations/conv-otlp").json()
    Conversation.objects.all().delete()
    response = send(json.dumps(as_otlp_json(request)).encode(), content_type="application/json")
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert response.json() == {}
    assert api("get", "/conversations/conv-otlp").json() == by_protobuf


def test_a_gzipped_body_is_read(send, api):
    response = send(gzipped(export_request(*two_turns_with_a_tool()).SerializeToString()), HTTP_CONTENT_ENCODING="gzip")
    ok(response)
    assert len(api("get", "/conversations/conv-otlp").json()["active_path"]) == 7


def test_a_resent_batch_changes_no_row(send):
    body = export_request(*two_turns_with_a_tool()).SerializeToString()
    ok(send(body))
    before = snapshot()
    ok(send(body))
    assert snapshot() == before


def test_batches_in_turn_extend_the_same_path(send, api):
    spans = two_turns_with_a_tool()
    for span in spans:
        ok(send(export_request(span).SerializeToString()))
    one_by_one = api("get", "/conversations/conv-otlp").json()
    assert len(one_by_one["active_path"]) == 7 and one_by_one["branch_count"] == 1


def test_a_regenerated_reply_becomes_a_branch_beside_the_first(send, api):
    user = {"role": "user", "parts": [text("Write me a haiku.")]}
    ok(
        send(
            export_request(
                chat_span(1, [user], [{"role": "assistant", "parts": [text("First try.")]}])
            ).SerializeToString()
        )
    )
    ok(
        send(
            export_request(
                chat_span(2, [user], [{"role": "assistant", "parts": [text("Second try.")]}])
            ).SerializeToString()
        )
    )
    body = api("get", "/conversations/conv-otlp").json()
    assert body["branch_count"] == 2
    assert body["active_path"] == [f"{span_id(1)}:in0", f"{span_id(2)}:out0"]
    first = Message.objects.get(external_id=f"{span_id(1)}:out0")
    assert first.parent_external_id == f"{span_id(1)}:in0"
    assert Message.objects.count() == 3  # one user message, two replies: no second copy of the history


def test_the_next_call_continues_the_branch_the_agent_kept(send, api):
    user = {"role": "user", "parts": [text("Write me a haiku.")]}
    first = {"role": "assistant", "parts": [text("First try.")]}
    second = {"role": "assistant", "parts": [text("Second try.")]}
    more = {"role": "user", "parts": [text("Another one.")]}
    spans = [
        chat_span(1, [user], [first]),
        chat_span(2, [user], [second]),
        chat_span(3, [user, first, more], [{"role": "assistant", "parts": [text("Third.")]}]),
    ]
    ok(send(export_request(*spans).SerializeToString()))
    body = api("get", "/conversations/conv-otlp").json()
    assert body["active_path"] == [f"{span_id(1)}:in0", f"{span_id(1)}:out0", f"{span_id(3)}:in2", f"{span_id(3)}:out0"]


def test_without_a_conversation_id_the_trace_is_the_conversation(send, api):
    user = {"role": "user", "parts": [text("Hello")]}
    ok(
        send(
            export_request(
                chat_span(1, [user], [{"role": "assistant", "parts": [text("Hi")]}], conversation=None)
            ).SerializeToString()
        )
    )
    assert api("get", f"/conversations/{TRACE}").status_code == 200


def test_spans_without_genai_content_are_acknowledged_and_ignored(send):
    response = ok(
        send(
            export_request(
                raw_span(1, {"http.request.method": "GET"}), raw_span(2, {"gen_ai.operation.name": "embeddings"})
            ).SerializeToString()
        )
    )
    assert not response.HasField("partial_success")
    assert Conversation.objects.count() == 0


def test_a_span_whose_operation_name_is_not_a_string_is_ignored(send):
    span = chat_span(1, [], [{"role": "assistant", "parts": [text("ok")]}], extra={"gen_ai.operation.name": ["chat"]})
    response = ok(send(export_request(span).SerializeToString()))
    assert not response.HasField("partial_success") and Conversation.objects.count() == 0


def test_model_calls_without_content_await_it_and_tool_results_answering_no_call_are_rejected(send):
    user = {"role": "user", "parts": [text("Hello")]}
    spans = [
        raw_span(1, {"gen_ai.operation.name": "chat", "gen_ai.conversation.id": "conv-otlp"}),
        chat_span(2, [user], [{"role": "assistant", "parts": [text("Hi")]}]),
        tool_span(3, "call_nobody_made", "42"),
    ]
    response = ok(send(export_request(*spans).SerializeToString()))
    assert response.partial_success.rejected_spans == 1
    assert "call_nobody_made" in response.partial_success.error_message
    assert "1 model call(s) of this request wait" in response.partial_success.error_message  # in OTLP logs
    assert Message.objects.count() == 2  # the good call is stored
    assert Conversation.objects.get(external_id="conv-otlp").content_awaited_since is not None


def test_model_calls_in_a_convention_that_is_not_read_are_named_not_taken_silently(send):
    spans = [
        raw_span(1, {"langfuse.observation.type": "generation", "langfuse.observation.input": "[]"}),
        raw_span(2, {"mlflow.spanType": '"CHAT_MODEL"', "mlflow.spanInputs": "{}"}),
        raw_span(3, {"langfuse.observation.type": "span"}),  # not a model call: acknowledged
    ]
    response = ok(send(export_request(*spans).SerializeToString()))
    assert response.partial_success.rejected_spans == 2
    message = response.partial_success.error_message
    assert f"(span {span_id(1)}) is a model call in Langfuse's own convention, which is not read" in message
    assert f"(span {span_id(2)}) is a model call in MLflow's own convention" in message


def test_the_deprecated_indexed_attributes_give_the_same_conversation(send, api):
    ok(send(export_request(*two_turns_with_a_tool()).SerializeToString()))
    current = [(m["role"], m["content"], m["tool_calls"], m["tool_call_id"]) for m in path_of(api, "conv-otlp")]
    legacy = {
        "gen_ai.conversation.id": "conv-legacy",
        "gen_ai.prompt.0.role": "system", "gen_ai.prompt.0.content": "You are the support agent.",
        "gen_ai.prompt.1.role": "user", "gen_ai.prompt.1.content": "Where is order 1182?",
        "gen_ai.prompt.2.role": "assistant", "gen_ai.prompt.2.tool_calls.0.id": "call_1",
        "gen_ai.prompt.2.tool_calls.0.name": "order_status", "gen_ai.prompt.2.tool_calls.0.arguments": '{"order":1182}',
        "gen_ai.prompt.3.role": "tool", "gen_ai.prompt.3.tool_call_id": "call_1",
        "gen_ai.prompt.3.content": '{"status":"shipped"}',
        "gen_ai.prompt.4.role": "assistant", "gen_ai.prompt.4.content": "It has shipped.",
        "gen_ai.prompt.5.role": "user", "gen_ai.prompt.5.content": "Thanks!",
        "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": "You are welcome.",
    }  # fmt: skip
    ok(send(export_request(raw_span(9, legacy)).SerializeToString()))
    assert [
        (m["role"], m["content"], m["tool_calls"], m["tool_call_id"]) for m in path_of(api, "conv-legacy")
    ] == current


def test_the_deprecated_span_events_give_the_same_conversation(send, api):
    user = {"role": "user", "parts": [text("Where is order 1182?")]}
    call = {
        "role": "assistant",
        "parts": [{"type": "tool_call", "id": "call_1", "name": "order_status", "arguments": {"order": 1182}}],
    }
    result = {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_1", "response": "shipped"}]}
    ok(
        send(
            export_request(
                chat_span(1, [user, call, result], [{"role": "assistant", "parts": [text("Shipped.")]}])
            ).SerializeToString()
        )
    )
    events = [
        ("gen_ai.user.message", {"content": "Where is order 1182?"}),
        (
            "gen_ai.assistant.message",
            {
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "order_status", "arguments": '{"order":1182}'},
                    }
                ]
            },
        ),
        ("gen_ai.tool.message", {"content": "shipped", "id": "call_1"}),
        (
            "gen_ai.choice",
            {"index": 0, "finish_reason": "stop", "message": json.dumps({"role": "assistant", "content": "Shipped."})},
        ),
    ]
    ok(
        send(
            export_request(
                raw_span(5, {"gen_ai.conversation.id": "conv-events", "gen_ai.system": "openai"}, events=events)
            ).SerializeToString()
        )
    )
    keys = ("role", "content", "tool_calls", "tool_call_id")
    assert [[m[k] for k in keys] for m in path_of(api, "conv-events")] == [
        [m[k] for k in keys] for m in path_of(api, "conv-otlp")
    ]


def test_parallel_tool_results_are_chained_after_the_call(send, api):
    user = {"role": "user", "parts": [text("Check 1 and 2")]}
    calls = {"role": "assistant", "parts": [
        {"type": "tool_call", "id": "a", "name": "order_status", "arguments": {"order": 1}},
        {"type": "tool_call", "id": "b", "name": "order_status", "arguments": {"order": 2}},
    ]}  # fmt: skip
    results = [
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": c, "response": c.upper()}]} for c in "ab"
    ]
    spans = [
        chat_span(1, [user], [calls]),
        tool_span(2, "a", "A"),
        tool_span(3, "b", "B"),
        chat_span(4, [user, calls, *results], [{"role": "assistant", "parts": [text("Both fine.")]}]),
    ]
    ok(send(export_request(*spans).SerializeToString()))
    body = api("get", "/conversations/conv-otlp").json()
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "tool", "tool", "assistant"]
    assert body["branch_count"] == 1 and body["scorable"] is False  # open and recent: in progress, not incomplete
    assert body["not_scorable_reason"] == "in_progress"


def test_an_api_key_is_required_and_scopes_the_org(client, org, other_org):
    body = export_request(*two_turns_with_a_tool()).SerializeToString()
    assert client.post(URL, body, content_type=PROTOBUF).status_code == 401
    other_key = api_key_create(org=other_org, name="theirs").plaintext
    ok(client.post(URL, body, content_type=PROTOBUF, HTTP_AUTHORIZATION=f"Bearer {other_key}"))
    assert Conversation.objects.get().org == other_org


# --- refused requests: 4xx naming the problem, nothing written ------------------------------------------


def test_another_content_type_is_415(send):
    assert "Content-Type" in failure(send(b"{}", content_type="text/plain"), 415)


def test_another_content_encoding_is_415(send):
    assert "br" in failure(send(b"x", HTTP_CONTENT_ENCODING="br"), 415)


def test_a_gzip_bomb_stops_at_the_limit_with_413(send, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1_000_000
    bomb = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    body = bomb.compress(b"\0" * 50_000_000) + bomb.flush()
    assert len(body) < 100_000
    assert "MAX_REQUEST_BYTES" in failure(send(body, HTTP_CONTENT_ENCODING="gzip"), 413)


def test_a_body_over_the_limit_is_413(send, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1_000_000
    assert "MAX_REQUEST_BYTES" in failure(send(b"\0" * 1_000_001), 413)


def test_an_enormous_message_is_413_naming_the_limit(send, settings):
    settings.MAX_MESSAGE_BYTES = 10_000
    user = {"role": "user", "parts": [text("x" * 20_000)]}
    message = failure(send(export_request(chat_span(1, [user], [])).SerializeToString()), 413)
    assert "MAX_MESSAGE_BYTES" in message
    assert Conversation.objects.count() == 0


@pytest.mark.parametrize(
    ("body", "content_type", "named"),
    [
        (b"\x0a\xff\xff\xff", PROTOBUF, "ExportTraceServiceRequest"),
        (b"not json", "application/json", "not JSON"),
        (b'{"resourceSpans": {}}', "application/json", "resourceSpans must be a JSON array"),
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": 5}]}]}]}', "application/json", "name field"),
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "xyz"}]}]}]}', "application/json", "traceId"),
        (
            b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "a"}]}]}]}',
            "application/json",
            "traceId must be 16 bytes",
        ),
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "\xff"}]}]}]}', "application/json", "not UTF-8"),
        (b"\x1f\x8b\x08\x00garbage", PROTOBUF, "gzip"),
    ],
)
def test_malformed_otlp_is_400_naming_what_is_wrong(send, body, content_type, named):
    encoding = {"HTTP_CONTENT_ENCODING": "gzip"} if body.startswith(b"\x1f\x8b") else {}
    assert named in failure(send(body, content_type=content_type, **encoding), 400)


@pytest.mark.parametrize(
    ("body", "named"),
    [
        (b'{"resourceSpans": ' + b"[" * 1000 + b"]" * 1000 + b"}", "nested deeper than 64 levels"),
        (b'{"resourceSpans": [], "x": ' + b"9" * 5000 + b"}", "longer than 100 digits"),
        (b'{"resourceSpans": [], "x": NaN}', "NaN, which is not JSON"),
    ],
)
def test_otlp_json_too_deep_too_long_or_not_json_is_named_as_the_api_names_it(send, body, named):
    assert named in failure(send(body, content_type="application/json"), 400)
    assert Conversation.objects.count() == 0


def test_invalid_utf8_in_a_protobuf_string_is_400(send):
    body = export_request(*two_turns_with_a_tool()).SerializeToString().replace(b"Thanks!", b"Thanks\xff")
    assert "UTF-8" in failure(send(body), 400)
    assert Conversation.objects.count() == 0


def test_a_json_failure_is_a_json_status(send):
    response = send(b"[]", content_type="application/json")
    assert response.status_code == 400 and response.json()["code"] == 3 and "JSON object" in response.json()["message"]


def test_a_nul_in_content_refuses_the_whole_request_and_writes_nothing(send):
    user = {"role": "user", "parts": [text("fine")]}
    bad = {"role": "user", "parts": [text("a\x00b")]}
    spans = [
        chat_span(1, [user], [{"role": "assistant", "parts": [text("ok")]}], conversation="good"),
        chat_span(2, [bad], [], conversation="bad"),
    ]
    message = failure(send(export_request(*spans).SerializeToString()), 400)
    assert "NUL" in message and span_id(2) in message
    assert Conversation.objects.count() == 0 and Message.objects.count() == 0


@pytest.mark.parametrize(
    ("attribute", "value", "named"),
    [
        ("gen_ai.input.messages", "[{", "not valid JSON"),
        ("gen_ai.input.messages", '{"role": "user"}', "JSON array"),
        ("gen_ai.input.messages", '[{"role": "wizard", "parts": []}]', "wizard"),
        (
            "gen_ai.input.messages",
            '[{"role": "user", "parts": [{"type": "text", "content": 5}]}]',
            "content must be a string",
        ),
        (
            "gen_ai.input.messages",
            '[{"role": "tool", "parts": [{"type": "text", "content": "x"}]}]',
            "tool_call_response",
        ),
        ("gen_ai.conversation.id", "x" * 201, "gen_ai.conversation.id"),
    ],
)
def test_unreadable_genai_content_is_400_naming_the_span_and_attribute(send, attribute, value, named):
    span = chat_span(1, [], [{"role": "assistant", "parts": [text("ok")]}], extra={attribute: value})
    message = failure(send(export_request(span).SerializeToString()), 400)
    assert named in message and "spans[0]" in message
    assert Conversation.objects.count() == 0


def test_unknown_json_fields_are_ignored_as_the_otlp_specification_requires(send, api):
    document = as_otlp_json(export_request(*two_turns_with_a_tool()))
    document["futureField"] = {"x": 1}
    document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["newSpanField"] = [1, 2]
    ok_response = send(json.dumps(document).encode(), content_type="application/json")
    assert ok_response.status_code == 200
    assert len(api("get", "/conversations/conv-otlp").json()["active_path"]) == 7


VALID = export_request(*two_turns_with_a_tool()).SerializeToString()


@hypothesis_settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    cuts=st.lists(st.tuples(st.integers(0, len(VALID) - 1), st.integers(0, 255)), min_size=1, max_size=8),
    truncate=st.integers(1, len(VALID)),  # the test client drops the Content-Type of an empty body
)
def test_hostile_protobuf_never_answers_5xx_and_a_refusal_writes_nothing(send, cuts, truncate):
    body = bytearray(VALID[:truncate] if truncate < len(VALID) else VALID)
    for position, byte in cuts:
        if position < len(body):
            body[position] = byte
    before = snapshot()
    response = send(bytes(body))
    assert response.status_code in (200, 400, 413), response.content[:300]
    if response.status_code != 200:
        assert snapshot() == before


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=30,
)
SPAN_FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "traceId": st.sampled_from([TRACE, TRACE, "", "zz", 5]) | JSON_VALUES,
        "spanId": st.sampled_from([span_id(1), span_id(2), "00", None]) | JSON_VALUES,
        "name": JSON_VALUES,
        "startTimeUnixNano": st.sampled_from(["1", "-5", "99999999999999999999", 1.5]) | JSON_VALUES,
        "attributes": st.lists(
            st.fixed_dictionaries(
                {"key": st.sampled_from(["gen_ai.operation.name", "gen_ai.input.messages", "gen_ai.conversation.id"])},
                optional={
                    "value": st.fixed_dictionaries(
                        {},
                        optional={
                            "stringValue": JSON_VALUES,
                            "intValue": JSON_VALUES,
                            "arrayValue": st.fixed_dictionaries(
                                {"values": st.lists(st.fixed_dictionaries({"stringValue": st.text(max_size=5)}))}
                            ),
                        },
                    )
                },
            ),
            max_size=4,
        ),
        "events": JSON_VALUES,
    },
)


@hypothesis_settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(spans=st.lists(SPAN_FIELDS, max_size=3), resource=JSON_VALUES)
def test_hostile_otlp_json_never_answers_5xx_and_a_refusal_writes_nothing(send, spans, resource):
    document = {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": spans}]}]}
    before = snapshot()
    response = send(json.dumps(document).encode(), content_type="application/json")
    assert response.status_code in (200, 400, 413), response.content[:300]
    if response.status_code != 200:
        assert snapshot() == before


def test_it_finds_a_conversation_by_its_external_id_in_one_index_probe_even_in_a_generic_plan(org):
    """A request's lookups of its conversations are prepared statements; a generic plan made while the org was small
    must not read every conversation of the org (it did, through the org_id index: the 2,980th new conversation of
    one request read the 2,979 before it, so a request's cost grew with its square). A sequential scan is turned
    off because the planner rightly prefers one for the few rows a test run holds: what is asked is which index. On an
    all but empty table both indexes cost the same and the planner took either as the suite's order left the
    statistics: the org gets a few hundred conversations, analysed, as an org has that a request meets."""
    now = timezone.now()
    Conversation.objects.bulk_create(
        Conversation(org=org, external_id=f"c-{n}", application="billing", started_at=now, last_activity_at=now)
        for n in range(300)
    )
    table_analysed(Conversation._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(
            "EXPLAIN (GENERIC_PLAN) SELECT id FROM grading_conversation WHERE org_id = $1 AND external_id = $2 "
            "LIMIT 1 FOR UPDATE"
        )
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "conversation_unique_external_id" in plan and "Filter" not in plan, plan


def one_call_conversations(count: int, *, first: int = 1) -> list:
    """`count` chat spans, each the first model call of its own conversation (conv-000, conv-001, ...)."""
    user = {"role": "user", "parts": [text("Where is my order?")]}
    answer = {"role": "assistant", "parts": [text("It has shipped.")]}
    return [chat_span(first + n, [user], [answer], conversation=f"conv-{n:03d}") for n in range(count)]


def test_it_answers_413_naming_the_limit_to_more_spans_than_a_request_may_hold(send, settings):
    settings.MAX_OTLP_SPANS_PER_REQUEST = 3
    body = export_request(*two_turns_with_a_tool()).SerializeToString()
    response = send(body)
    message = failure(response, 413)
    assert "4 spans" in message and "MAX_OTLP_SPANS_PER_REQUEST (3)" in message
    assert "Retry-After" not in response  # the OTLP specification: a client must not retry a 413
    assert Conversation.objects.count() == 0
    as_json = send(json.dumps(as_otlp_json(export_request(*two_turns_with_a_tool()))).encode(), "application/json")
    assert "MAX_OTLP_SPANS_PER_REQUEST (3)" in failure(as_json, 413)
    settings.MAX_OTLP_SPANS_PER_REQUEST = 4
    ok(send(body))


def test_it_answers_413_naming_the_limit_to_spans_of_more_conversations_than_a_request_may_write(send, settings):
    settings.MAX_OTLP_CONVERSATIONS_PER_REQUEST = 2
    response = send(export_request(*one_call_conversations(3)).SerializeToString())
    message = failure(response, 413)
    assert "at most 2 conversations; its spans belong to 3" in message
    assert "MAX_OTLP_CONVERSATIONS_PER_REQUEST" in message
    assert "Retry-After" not in response and Conversation.objects.count() == 0
    ok(send(export_request(*one_call_conversations(2)).SerializeToString()))
    assert Conversation.objects.count() == 2


def test_it_refuses_a_message_over_the_limit_in_its_last_conversation_before_writing_the_first(send, settings):
    settings.MAX_MESSAGE_BYTES = 10_000
    count = 2 * CONVERSATIONS_PER_TRANSACTION + 1
    user = {"role": "user", "parts": [text("x" * 20_000)]}
    spans = [*one_call_conversations(count - 1), chat_span(count, [user], [], conversation="conv-zzz")]
    assert "MAX_MESSAGE_BYTES" in failure(send(export_request(*spans).SerializeToString()), 413)
    assert Conversation.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_it_commits_a_large_request_in_bounded_transactions_holding_no_lock_for_all_of_it(send):
    """While the request writes its last conversation, its first is committed and no longer locked."""
    count = 2 * CONVERSATIONS_PER_TRANSACTION + 1
    last = f"conv-{count - 1:03d}"
    seen: list = []

    def probe() -> None:
        try:
            with transaction.atomic():
                first = Conversation.objects.select_for_update(nowait=True).filter(external_id="conv-000").first()
                seen.append("committed and free" if first else "not committed")
        except OperationalError:
            seen.append("locked")
        finally:
            connections.close_all()

    def watch(execute, sql, params, many, context):
        if sql.startswith('INSERT INTO "grading_conversation"') and last in (params or ()) and not seen:
            other = threading.Thread(target=probe)
            other.start()
            other.join(timeout=30)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(watch):
        ok(send(export_request(*one_call_conversations(count)).SerializeToString()))
    assert seen == ["committed and free"]
    assert Conversation.objects.count() == count

"""Vercel AI SDK telemetry, as a real agent on the SDK exported it (tests/fixtures/otlp/README.md): provider calls
read as model calls, `ai.toolCall` spans as tool results, the session as the conversation, and the outer spans
acknowledged and not read."""

import json
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from grading.api.keys import api_key_create
from tests.builders.otlp_spans import export_request, raw_span

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "otlp"
URL = "/api/v1/otlp/v1/traces"
SYSTEM = "You are the support agent of Northwind. Look orders up before you answer."


def call(call_id: str, order: int) -> list[dict]:
    return [
        {"id": call_id, "type": "function", "function": {"name": "order_status", "arguments": f'{{"order":{order}}}'}}
    ]


def result(order: int) -> str:
    return json.dumps({"order": order, "status": "shipped", "carrier": "DHL"}, separators=(",", ":"))


# The agent's transcript (ai-sdk-two-turns.transcript.json) in the OpenAI shape, after its system prompt.
EXPECTED = [
    ("system", SYSTEM, None, None),
    ("user", "Where is my order 1182?", None, None),
    ("assistant", None, call("call_1", 1182), None),
    ("tool", result(1182), None, "call_1"),
    ("assistant", "Order 1182 has shipped with DHL.", None, None),
    ("user", "Thanks. Can you also check order 1183?", None, None),
    ("assistant", None, call("call_2", 1183), None),
    ("tool", result(1183), None, "call_2"),
    ("assistant", "Order 1183 is on its way.", None, None),
]


@pytest.fixture
def key(org) -> str:
    return api_key_create(org=org, name="ai sdk agent").plaintext


def send(client, key: str, body: bytes):
    return client.post(URL, body, content_type="application/x-protobuf", HTTP_AUTHORIZATION=f"Bearer {key}")


def test_an_ai_sdk_agents_export_becomes_the_conversation_it_had(client, key):
    recording = (FIXTURES / "ai-sdk-two-turns.pb").read_bytes()
    answer = send(client, key, recording)
    assert answer.status_code == 200
    assert not ExportTraceServiceResponse.FromString(answer.content).HasField("partial_success")

    body = client.get("/api/v1/conversations/support-1", HTTP_AUTHORIZATION=f"Bearer {key}").json()
    by_id = {m["id"]: m for m in body["messages"]}
    path = [by_id[i] for i in body["active_path"]]
    assert [(m["role"], m["content"], m["tool_calls"], m["tool_call_id"]) for m in path] == EXPECTED
    assert path[3]["id"].endswith(":tool")  # from the ai.toolCall span
    assert (body["branch_count"], len(body["messages"])) == (1, len(EXPECTED))
    transcript = json.loads((FIXTURES / "ai-sdk-two-turns.transcript.json").read_text())
    assert [m["role"] for m in transcript] == [role for role, *_ in EXPECTED[1:]]

    assert send(client, key, recording).status_code == 200  # a re-sent export changes nothing
    again = client.get("/api/v1/conversations/support-1", HTTP_AUTHORIZATION=f"Bearer {key}").json()
    assert (again["fingerprint"], len(again["messages"])) == (body["fingerprint"], len(body["messages"]))

    # The same messages posted as JSON under the same ids: the same evidence.
    as_json = {"external_id": "support-1-json", "application": "support-bot", "messages": [
        {**m, "parent_id": parent} for m, parent in zip(path, [None, *body["active_path"]], strict=False)
    ]}  # fmt: skip
    posted = client.post(
        "/api/v1/conversations", json.dumps(as_json), content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {key}",
    ).json()  # fmt: skip
    assert (posted["fingerprint"], posted["active_path"]) == (body["fingerprint"], body["active_path"])


def test_the_outer_spans_are_acknowledged_and_a_call_without_its_prompt_is_named(client, key):
    recording = ExportTraceServiceRequest.FromString((FIXTURES / "ai-sdk-two-turns.pb").read_bytes())
    outer = [
        span
        for resource_spans in recording.resource_spans
        for scope_spans in resource_spans.scope_spans
        for span in scope_spans.spans
        if span.name == "ai.generateText"
    ]
    assert len(outer) == 2
    answer = ExportTraceServiceResponse.FromString(
        send(client, key, export_request(*outer).SerializeToString()).content
    )
    assert not answer.HasField("partial_success")

    unrecorded = raw_span(80, {"ai.operationId": "ai.generateText.doGenerate", "ai.response.text": "Hi."})
    answer = ExportTraceServiceResponse.FromString(
        send(client, key, export_request(unrecorded).SerializeToString()).content
    )
    assert answer.partial_success.rejected_spans == 1
    assert "carries no message content" in answer.partial_success.error_message


@pytest.mark.parametrize(
    ("prompt", "named"),
    [
        ("[{", "ai.prompt.messages is not valid JSON"),
        ('{"role": "user"}', "ai.prompt.messages must be a JSON array"),
        ('[{"role": "user", "content": [{"type": "text", "text": NaN}]}]', "NaN is not JSON"),
        ('[{"role": "critic", "content": "hi"}]', "role 'critic' is not one of"),
        ('[{"role": "user", "content": 7}]', "must be text or an array of parts"),
    ],
)
def test_an_unreadable_prompt_is_400_naming_the_span_and_attribute(client, key, prompt, named):
    span = raw_span(81, {"ai.operationId": "ai.generateText.doGenerate", "ai.prompt.messages": prompt})
    response = send(client, key, export_request(span).SerializeToString())
    assert response.status_code == 400
    assert named in response.content.decode(errors="replace")

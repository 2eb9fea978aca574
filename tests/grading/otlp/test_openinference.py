"""OpenInference spans (Arize Phoenix's convention) read as model calls and tool results: the same exchange gives
the same conversation as the OpenTelemetry GenAI conventions; other span kinds are acknowledged and not read."""

import json

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from grading.api.keys import api_key_create
from grading.models import Conversation
from tests.builders.otlp_spans import export_request, raw_span, span_id, two_turns_with_a_tool

pytestmark = pytest.mark.django_db
URL = "/api/v1/otlp/v1/traces"
SESSION = {"openinference.span.kind": "LLM", "session.id": "conv-oi", "llm.model_name": "support-model"}


@pytest.fixture
def send(client, org):
    key = api_key_create(org=org, name="collector").plaintext

    def post(*spans):
        body = export_request(*spans).SerializeToString()
        return client.post(URL, body, content_type="application/x-protobuf", HTTP_AUTHORIZATION=f"Bearer {key}")

    return post


@pytest.fixture
def conversation(client, org):
    key = api_key_create(org=org, name="reader").plaintext

    def get(external_id: str) -> dict:
        return client.get(f"/api/v1/conversations/{external_id}", HTTP_AUTHORIZATION=f"Bearer {key}").json()

    return get


def accepted(response) -> ExportTraceServiceResponse:
    assert response.status_code == 200, response.content[:500]
    return ExportTraceServiceResponse.FromString(response.content)


def messages(side: str, *turns: dict) -> dict:
    """OpenInference's flattened `llm.<side>_messages.<i>.message.*` attributes of OpenAI-shaped messages."""
    flat = {}
    for index, turn in enumerate(turns):
        prefix = f"llm.{side}_messages.{index}.message"
        for field in ("role", "content", "tool_call_id", "name"):
            if turn.get(field) is not None:
                flat[f"{prefix}.{field}"] = turn[field]
        for k, call in enumerate(turn.get("tool_calls") or []):
            flat[f"{prefix}.tool_calls.{k}.tool_call.id"] = call["id"]
            flat[f"{prefix}.tool_calls.{k}.tool_call.function.name"] = call["function"]["name"]
            flat[f"{prefix}.tool_calls.{k}.tool_call.function.arguments"] = call["function"]["arguments"]
    return flat


SYSTEM = {"role": "system", "content": "You are the support agent."}
USER1 = {"role": "user", "content": "Where is order 1182?"}
CALL = {"role": "assistant", "tool_calls": [
    {"id": "call_1", "type": "function", "function": {"name": "order_status", "arguments": '{"order":1182}'}}
]}  # fmt: skip
RESULT = {"role": "tool", "tool_call_id": "call_1", "content": '{"status":"shipped"}'}
ANSWER = {"role": "assistant", "content": "It has shipped."}
USER2 = {"role": "user", "content": "Thanks!"}
GOODBYE = {"role": "assistant", "content": "You are welcome."}


def openinference_two_turns() -> list:
    """The exchange of `two_turns_with_a_tool`, as the OpenInference OpenAI instrumentation records it, with a
    TOOL span for the tool's run and the agent's CHAIN span around it all."""
    return [
        raw_span(21, SESSION | messages("input", SYSTEM, USER1) | messages("output", CALL)),
        raw_span(
            22,
            {
                "openinference.span.kind": "TOOL",
                "session.id": "conv-oi",
                "tool.name": "order_status",
                "tool.id": "call_1",
                "output.value": '{"status":"shipped"}',
            },
        ),  # fmt: skip
        raw_span(23, SESSION | messages("input", SYSTEM, USER1, CALL, RESULT) | messages("output", ANSWER)),
        raw_span(
            24, SESSION | messages("input", SYSTEM, USER1, CALL, RESULT, ANSWER, USER2) | messages("output", GOODBYE)
        ),  # fmt: skip
        raw_span(
            25,
            {
                "openinference.span.kind": "CHAIN",
                "session.id": "conv-oi",
                "input.value": "Where is order 1182?",
                "output.value": "You are welcome.",
            },
        ),  # fmt: skip
    ]


def canonical(body: dict) -> list[tuple]:
    by_id = {m["id"]: m for m in body["messages"]}
    return [
        tuple(by_id[i].get(f) for f in ("role", "content", "tool_calls", "tool_call_id", "name"))
        for i in body["active_path"]
    ]


def test_the_same_exchange_gives_the_same_conversation_as_the_genai_conventions(send, conversation):
    answer = accepted(send(*openinference_two_turns()))
    assert not answer.HasField("partial_success")
    accepted(send(*two_turns_with_a_tool()))

    oi, genai = conversation("conv-oi"), conversation("conv-otlp")
    assert canonical(oi) == canonical(genai)
    s21, s22, s23, s24 = (span_id(n) for n in (21, 22, 23, 24))
    assert oi["active_path"] == [f"{s21}:in0", f"{s21}:in1", f"{s21}:out0", f"{s22}:tool", f"{s23}:out0",
                                 f"{s24}:in5", f"{s24}:out0"]  # fmt: skip
    assert (oi["branch_count"], Conversation.objects.get(external_id="conv-oi").application) == (1, "support-bot")


def test_content_parts_become_openai_content_parts(send, conversation):
    parts = {
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.contents.0.message_content.type": "text",
        "llm.input_messages.0.message.contents.0.message_content.text": "What is on this map?",
        "llm.input_messages.0.message.contents.1.message_content.type": "image",
        "llm.input_messages.0.message.contents.1.message_content.image.image.url": "https://example.com/map.png",
    }
    accepted(send(raw_span(31, SESSION | parts | messages("output", {"role": "assistant", "content": "Paris."}))))
    first = conversation("conv-oi")["messages"][0]
    assert first["content"] == [
        {"type": "text", "text": "What is on this map?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/map.png"}},
    ]

    # One text part alone is the content as text, as every convention gives it.
    alone = {
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.contents.0.message_content.type": "text",
        "llm.input_messages.0.message.contents.0.message_content.text": "And Rome?",
    }
    accepted(send(raw_span(32, SESSION | {"session.id": "conv-oi-2"} | alone)))
    assert conversation("conv-oi-2")["messages"][0]["content"] == "And Rome?"


def test_other_kinds_are_acknowledged_and_an_llm_span_without_content_is_named(send):
    others = [
        raw_span(40 + n, {"openinference.span.kind": kind, "session.id": "conv-oi", "input.value": "q"})
        for n, kind in enumerate(("CHAIN", "AGENT", "RETRIEVER", "EMBEDDING", "RERANKER", "TOOL"))
    ]
    assert not accepted(send(*others)).HasField("partial_success")
    assert not Conversation.objects.exists()

    bare = accepted(send(raw_span(50, SESSION)))
    assert bare.partial_success.rejected_spans == 1
    assert f"LLM span {span_id(50)}) carries no message content" in bare.partial_success.error_message


@pytest.mark.parametrize(
    ("attribute", "value", "named"),
    [
        ("llm.input_messages.0.message.role", "critic", "llm.input_messages.0.role 'critic' is not one of"),
        ("llm.input_messages.0.message.content", 7, "llm.input_messages.0.content must be a string"),
        ("llm.input_messages.0.message.tool_calls.0.tool_call.id", "", "tool_calls[0].id must be the tool call's id"),
    ],
)
def test_unreadable_content_is_400_naming_the_span_and_attribute(send, attribute, value, named):
    attributes = SESSION | messages("input", USER1) | {attribute: value}
    if "tool_calls" in attribute:
        attributes["llm.input_messages.0.message.tool_calls.0.tool_call.function.name"] = "order_status"
    response = send(raw_span(60, attributes))
    assert response.status_code == 400
    assert named in response.content.decode(errors="replace"), response.content
    assert not Conversation.objects.exists()


def test_a_tool_span_whose_call_id_is_not_text_is_refused(send):
    tool = {"openinference.span.kind": "TOOL", "tool.id": 7, "output.value": json.dumps({"ok": True})}
    assert send(raw_span(70, tool)).status_code == 400

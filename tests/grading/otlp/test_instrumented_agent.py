"""A real producer: an agent on the OpenAI SDK, instrumented by opentelemetry-instrumentation-openai-v2 and
exporting with the OpenTelemetry SDK's OTLP/HTTP exporter to a running Tollgate (pytest-django's live server),
configured only by the standard environment variables docs/opentelemetry.md gives."""

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from urllib.parse import quote

import pytest
from django.test import Client

from grading.api.keys import api_key_create
from grading.models import Conversation, Message
from grading.models.otlp import PendingCall, SpanLink
from tests.builders.processes import REPO_ROOT
from tests.fakes.openai_server import FakeLLM, text_reply, tool_call_reply

pytestmark = pytest.mark.django_db(transaction=True)
CANONICAL = ("role", "content", "tool_calls", "tool_call_id", "name")


@pytest.fixture
def key(org) -> str:
    return api_key_create(org=org, name="support agent").plaintext


@pytest.fixture(scope="module")
def agent_llm() -> Iterator[FakeLLM]:
    """The agent's own model server: the judge's server is shared with the session's Celery workers, which grade
    what the agent exports as soon as it arrives and would take the agent's scripted replies."""
    with FakeLLM() as server:
        yield server


@pytest.fixture
def run_agent(live_server, agent_llm, key):
    def run(
        conversation: str, *, regenerate: bool = False, convention: str = "genai", capture: str = "span_only"
    ) -> list[dict]:
        agent_llm.reset()  # each run answers from the start of the script
        agent_llm.script(
            tool_call_reply(("call_1", "order_status", '{"order":1182}')),
            text_reply("Order 1182 has shipped with DHL."),
            tool_call_reply(("call_2", "order_status", '{"order":1183}')),
            text_reply("Order 1183 is on its way."),
            text_reply("Order 1183 has shipped with DHL as well."),
        )
        env = os.environ | {
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"{live_server.url}/api/v1/otlp",
            "OTEL_EXPORTER_OTLP_HEADERS": f"Authorization={quote('Bearer ' + key)}",
            "OTEL_SERVICE_NAME": "support-bot",
            "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": capture,
        }
        command = [
            sys.executable,
            "-m",
            "tests.fakes.instrumented_agent",
            "--base-url",
            agent_llm.base_url,
            "--conversation",
            conversation,
            "--convention",
            convention,
        ]
        command += ["--regenerate"] if regenerate else []  # fmt: skip
        done = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-3000:]
        assert "Failed to export" not in done.stderr, done.stderr[-3000:]
        return json.loads(done.stdout)

    return run


@pytest.fixture
def api(key):
    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")

    def call(method: str, path: str, body=None):
        if body is None:
            return getattr(client, method)(f"/api/v1{path}")
        return getattr(client, method)(f"/api/v1{path}", json.dumps(body), content_type="application/json")

    return call


def canonical(message: dict) -> tuple:
    return tuple(message.get(field) for field in CANONICAL)


def test_a_multi_turn_exchange_with_tool_calls_arrives_as_the_conversation_the_agent_had(run_agent, api, settings):
    settings.CONVERSATION_QUIET_MINUTES = 0  # scorable as soon as it is written, for both sides
    transcript = run_agent("support-4711")

    otlp = api("get", "/conversations/support-4711").json()
    assert [canonical(m) for m in otlp["messages"]] == [canonical(m) for m in transcript]
    assert [m["role"] for m in otlp["messages"]] == [
        "system", "user", "assistant", "tool", "assistant", "user", "assistant", "tool", "assistant"
    ]  # fmt: skip
    call, result = otlp["messages"][2], otlp["messages"][3]
    assert call["tool_calls"][0]["function"] == {"name": "order_status", "arguments": '{"order":1182}'}
    assert result["tool_call_id"] == "call_1" and json.loads(result["content"])["status"] == "shipped"
    assert result["id"].endswith(":tool")  # from the execute_tool span
    assert otlp["branch_count"] == 1 and otlp["scorable"] is True
    conversation = Conversation.objects.get(external_id="support-4711")
    assert conversation.application == "support-bot"
    answer_link = SpanLink.objects.get(conversation=conversation, message_external_id=otlp["active_path"][-1])
    assert answer_link.response_id.startswith("chatcmpl-") and len(answer_link.trace_id) == 32

    # The same exchange posted as JSON, the agent's own messages under the same ids: the same evidence.
    as_json = {"external_id": "support-4711-json", "application": "support-bot", "messages": [
        {**m, "id": mid, "parent_id": parent}
        for m, mid, parent in zip(transcript, otlp["active_path"], [None, *otlp["active_path"]], strict=False)
    ]}  # fmt: skip
    posted = api("post", "/conversations", as_json).json()
    assert posted["fingerprint"] == otlp["fingerprint"]
    assert posted["active_path"] == otlp["active_path"]
    assert (posted["scorable"], posted["not_scorable_reason"]) == (otlp["scorable"], otlp["not_scorable_reason"])


def test_a_regenerated_answer_is_a_branch_and_the_kept_one_is_on_the_active_path(run_agent, api):
    transcript = run_agent("support-4712", regenerate=True)

    body = api("get", "/conversations/support-4712").json()
    assert [canonical(m) for m in body["messages"]] == [canonical(m) for m in transcript]
    assert body["messages"][-1]["content"] == "Order 1183 has shipped with DHL as well."
    assert body["branch_count"] == 2
    abandoned = Message.objects.get(conversation__external_id="support-4712", content="Order 1183 is on its way.")
    assert abandoned.parent_external_id == body["active_path"][-2]  # a sibling of the kept answer
    assert Message.objects.filter(conversation__external_id="support-4712").count() == len(transcript) + 1


def test_an_agent_instrumented_with_openinference_arrives_as_the_same_conversation(run_agent, api, settings):
    """openinference-instrumentation-openai in its defaults (LLM spans, `session.id`), TOOL spans as agent
    frameworks record them: the same exchange as under the official instrumentation, message for message."""
    settings.CONVERSATION_QUIET_MINUTES = 0
    genai_transcript = run_agent("support-genai")
    transcript = run_agent("support-oi", convention="openinference")
    assert transcript == genai_transcript

    oi, genai = api("get", "/conversations/support-oi").json(), api("get", "/conversations/support-genai").json()
    by_id = {m["id"]: m for m in oi["messages"]}
    assert [canonical(by_id[i]) for i in oi["active_path"]] == [canonical(m) for m in transcript]
    assert [canonical(m) for m in oi["messages"]] == [canonical(m) for m in genai["messages"]]
    assert oi["messages"][3]["id"].endswith(":tool")  # from the TOOL span
    assert (oi["branch_count"], oi["scorable"]) == (1, True)
    assert Conversation.objects.get(external_id="support-oi").application == "support-bot"

    # Posted as JSON under the same ids: the same evidence.
    as_json = {"external_id": "support-oi-json", "application": "support-bot", "messages": [
        {**m, "parent_id": parent} for m, parent in zip(oi["messages"], [None, *oi["active_path"]], strict=False)
    ]}  # fmt: skip
    posted = api("post", "/conversations", as_json).json()
    assert (posted["fingerprint"], posted["active_path"]) == (oi["fingerprint"], oi["active_path"])


def test_an_agent_whose_messages_go_to_otlp_log_records_arrives_as_the_same_conversation(run_agent, api, settings):
    """The official instrumentation with its messages as log records (`event_only`: one
    gen_ai.client.inference.operation.details record per call), exported by the SDK's OTLP log exporter after the
    spans: each bare chat span waits for its record, and the exchange is the one the spans alone give."""
    settings.CONVERSATION_QUIET_MINUTES = 0
    spans_transcript = run_agent("support-spans")
    transcript = run_agent("support-logs", capture="event_only")
    assert transcript == spans_transcript

    logs, spans = api("get", "/conversations/support-logs").json(), api("get", "/conversations/support-spans").json()
    assert [canonical(m) for m in logs["messages"]] == [canonical(m) for m in transcript]
    assert [canonical(m) for m in logs["messages"]] == [canonical(m) for m in spans["messages"]]
    assert (logs["branch_count"], logs["scorable"]) == (1, True)
    assert Conversation.objects.get(external_id="support-logs").content_awaited_since is None
    assert PendingCall.objects.filter(written_at__isnull=False).count() == 4  # every call came by the join
    assert not PendingCall.objects.filter(written_at=None).exists()

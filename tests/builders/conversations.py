"""Builders for conversation payloads and scripted judge replies, shared by the conversation tests."""

from datetime import UTC, datetime, timedelta

from grading.conversations.ingest import conversation_upsert
from grading.core.schemas import ConversationIn
from grading.judge.backends import OpenAIJudge
from grading.judge.client import ChatJudgeClient
from grading.models import Org
from tests.fakes.openai_server import FakeLLM, json_reply

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def message(mid: str, role: str, content, parent: str | None, minute: int, **extra) -> dict:
    return {
        "id": mid,
        "parent_id": parent,
        "role": role,
        "content": content,
        "created_at": (T0 + timedelta(minutes=minute)).isoformat(),
        **extra,
    }


def support_conversation(external_id: str = "cv-1", *, closed: bool = True, application: str = "billing") -> dict:
    """A refund request with a tool call and result, and an abandoned regenerated reply (m4b)."""
    return {
        "external_id": external_id,
        "application": application,
        "closed": closed,
        "messages": [
            message("m1", "user", "Please refund order 1182, it arrived broken.", None, 0),
            message(
                "m2",
                "assistant",
                None,
                "m1",
                1,
                tool_calls=[
                    {"id": "call_1", "type": "function", "function": {"name": "refund", "arguments": '{"order": 1182}'}}
                ],
            ),
            message("m3", "tool", '{"status": "refunded", "amount": "49.90"}', "m2", 2, tool_call_id="call_1"),
            message("m4b", "assistant", "I could not do that.", "m3", 3),
            message("m4", "assistant", "Done: order 1182 was refunded, 49.90 is on its way.", "m3", 4),
        ],
        "active_message_id": "m4",
    }


PATH_IDS = ["m1", "m2", "m3", "m4"]


def upsert(org: Org, payload: dict):
    return conversation_upsert(org=org, payload=ConversationIn.model_validate(payload))


def verdicts(ids: list[str], *, grounded: str = "pass", complete: str = "pass", usable: str = "pass") -> dict:
    return {
        name: {"verdict": verdict, "message_ids": ids, "rationale": f"{name} {verdict}"}
        for name, verdict in (("grounded", grounded), ("complete", complete), ("usable", usable))
    }


def verdicts_reply(ids: list[str], **outcomes: str):
    return json_reply(
        verdicts(ids, **outcomes), usage={"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
    )


def llm_judge(fake_llm: FakeLLM) -> OpenAIJudge:
    """The production judge backend, pointed at the loopback server, asking for log-probabilities as production
    does, with no real sleeping between retries."""
    client = ChatJudgeClient(
        base_url=fake_llm.base_url,
        model="judge-test",
        api_key="k",
        timeout=2.0,
        max_retries=1,
        want_logprobs=True,
        sleep=lambda _: None,
    )
    return OpenAIJudge(client)


def applications_of(org: Org, *applications: str) -> None:
    """A conversation in each of `applications`, so the org has them: an org admin scopes people to known ones."""
    for application in applications:
        upsert(org, support_conversation(f"cv-{application}", application=application))

"""The MCP server over stdio (`manage.py mcp`), driven by the `mcp` SDK's own client: one server process for the
module, so everything it is asked is asked in one test."""

import os
import sys

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from reviewer.models import Membership, Role
from tests.builders.agents import TOOLS, agent_world, result_data
from tests.builders.event_loops import run_apart
from tests.builders.people import make_person
from tests.builders.processes import REPO_ROOT, database_url
from tests.builders.tokens import token_of

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.slow
def test_it_serves_every_tool_and_the_criteria_to_a_local_agent(org, other_org):
    world = agent_world(org, other_org)
    server = StdioServerParameters(
        command=sys.executable,
        args=["manage.py", "mcp"],
        cwd=REPO_ROOT,
        env=dict(os.environ)
        | {
            "DATABASE_URL": database_url(settings.DATABASES["default"]),
            "REDIS_URL": settings.REDIS_URL,
            "TOLLGATE_TOKEN": world.token,
        },  # fmt: skip
    )

    async def session():
        async with Client(server) as client:
            return {
                "tools": {tool.name for tool in (await client.list_tools()).tools},
                "search": await client.call_tool("search_items", {"kind": "draft"}),
                "verdict": await client.call_tool("read_verdict", {"conversation": world.hostile_id}),
                "theirs": await client.call_tool("read_verdict", {"conversation": world.others_id}),
                "dashboard": await client.call_tool("read_dashboard", {}),
                "queue": await client.call_tool("list_queue", {"limit": 1}),
                "submitted": await client.call_tool("submit_draft", {"draft": {
                    "external_id": "agent-1", "title": "Cutting costs", "slug": "cutting-costs", "body": "Answer."}}),
                "versions": await client.read_resource("tollgate://criteria"),
                "version": await client.read_resource("tollgate://criteria/conversation/1"),
            }  # fmt: skip

    answers = run_apart(session())
    assert answers["tools"] == TOOLS
    assert [item["id"] for item in result_data(answers["search"])["data"]["items"]] == [world.queued_draft_id]
    assert result_data(answers["verdict"])["data"]["external_id"] == world.hostile_id
    assert answers["theirs"].is_error
    assert set(result_data(answers["dashboard"])["data"]) >= {"quality", "gate", "queue"}
    queue = result_data(answers["queue"])["data"]
    assert [row["item"] for row in queue["waiting"]] == [world.queued_draft_id] and queue["next_after"] is not None
    assert result_data(answers["submitted"])["data"]["route"] == "pending"
    versions = result_data(answers["versions"])["data"]
    assert {(v["kind"], v["number"]) for v in versions["versions"]} == {("draft", 1), ("conversation", 1)}
    version = result_data(answers["version"])["data"]
    assert version["kind"] == "conversation" and version["criteria_version"] == 1 and version["checks"]


def test_it_will_not_start_without_a_live_token(org, monkeypatch):
    left = make_person("lou", org, Role.OPERATOR)
    lous = token_of(left, org)
    Membership.objects.filter(user=left).delete()
    for token, complaint in (("", "is not set"), ("tg_unknown", "not a live Tollgate token"),
                             (lous, "lou is no longer a member")):  # fmt: skip
        monkeypatch.setenv("TOLLGATE_TOKEN", token)
        with pytest.raises(CommandError, match=complaint):
            call_command("mcp")

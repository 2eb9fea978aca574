"""The MCP server under a person's token, over HTTP with the SDK's own client against the live test server: the person
sees through the tools what they may see on the pages (their reach, blind review, the tools their roles open), and
a token that no longer stands for a member is refused."""

import json

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver.exceptions import ToolError

from grading.api.keys import api_key_create
from grading.models import Draft, RegressionRun, RunState
from grading.sets.build import set_build
from reviewer.mcp.principal import acting_as, mcp_principal
from reviewer.mcp.server import list_queue, read_dashboard
from reviewer.models import Membership, PersonalToken, Role
from reviewer.tokens.services import token_revoke
from tests.builders.agents import TOOLS, result_data
from tests.builders.blind_world import blind_world, machine_said
from tests.builders.conversations import PATH_IDS, verdicts_reply
from tests.builders.event_loops import run_apart
from tests.builders.people import make_person
from tests.builders.processes import wait_until
from tests.builders.queue_items import conversation_item
from tests.builders.tokens import token_of

pytestmark = pytest.mark.django_db(transaction=True)

NEW_DRAFT = {"external_id": "agent-1", "title": "Cutting costs", "slug": "cutting-costs", "body": "Answer first."}


def _session(live_server, token: str, work):
    """Run `work(client)` in an MCP client session over HTTP as `token`, and return what it returns."""

    async def session():
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http,
            Client(streamable_http_client(f"{live_server.url}/mcp", http_client=http)) as client,
        ):
            return await work(client)

    return run_apart(session())


def _refusal(result) -> str:
    assert result.is_error, result.content[0].text[:300]
    return result.content[0].text


def test_a_persons_token_reads_what_their_reach_covers_and_nothing_else(live_server, org):
    world = blind_world(org)  # billing conversations and a draft, all out of rae's reach
    conversation_item(org, "cv-ship", application="shipping")
    rae = make_person("rae", org)
    Membership.objects.create(user=rae, org=org, role=Role.OPERATOR, applications=["shipping"], drafts=False)

    async def work(client):
        return {
            "tools": {tool.name for tool in (await client.list_tools()).tools},
            "search": await client.call_tool("search_items", {}),
            "mine": await client.call_tool("read_verdict", {"conversation": "cv-ship"}),
            "billing": await client.call_tool("read_verdict", {"conversation": "cv-open"}),
            "draft": await client.call_tool("read_verdict", {"draft": world.reviews["draft"].draft_id}),
            "queue": await client.call_tool("list_queue", {}),
            "dashboard": await client.call_tool("read_dashboard", {"section": "queue"}),
        }

    answers = _session(live_server, token_of(rae, org), work)
    assert answers["tools"] == TOOLS
    assert [item["external_id"] for item in result_data(answers["search"])["data"]["items"]] == ["cv-ship"]
    mine = result_data(answers["mine"])["data"]
    assert mine["external_id"] == "cv-ship" and mine["blind"] is False and mine["review"]["route"] == "human"
    assert "no conversation cv-open" in _refusal(answers["billing"])  # as absent as another org's
    assert "no draft" in _refusal(answers["draft"])
    assert [row["item"] for row in result_data(answers["queue"])["data"]["waiting"]] == ["cv-ship"]
    queue_figures = result_data(answers["dashboard"])["data"]["queue"]
    assert queue_figures is not None and "cv-open" not in str(queue_figures)


def test_a_blind_audit_items_verdict_is_withheld_from_an_operator_and_shown_to_the_org_key(live_server, org):
    world = blind_world(org)
    draft_id = world.reviews["draft"].draft_id

    async def work(client):
        return {
            "conversation": await client.call_tool("read_verdict", {"conversation": "cv-open"}),
            "draft": await client.call_tool("read_verdict", {"draft": draft_id}),
            "decided": await client.call_tool("read_verdict", {"conversation": "cv-agreed"}),
            "search": await client.call_tool("search_items", {"text": "cv-open"}),
            "by_verdict": await client.call_tool("search_items", {"verdict": "human", "kind": "conversation"}),
            "queue": await client.call_tool("list_queue", {"kind": "conversation"}),
        }

    ann = _session(live_server, token_of(world.people["ann"], org), work)
    key = _session(live_server, api_key_create(org=org, name="agent").plaintext, work)

    for name in ("conversation", "draft", "search", "by_verdict", "queue"):
        text = ann[name].content[0].text
        assert "MACHINE-SAID" not in text and "reason-open" not in text, name
    conversation = result_data(ann["conversation"])["data"]
    assert conversation["blind"] is True
    assert conversation["review"]["route"] is None and conversation["review"]["checks"] is None
    assert conversation["review"]["identity"]["criteria_version"] == 1  # which item and version it is, still
    draft = result_data(ann["draft"])["data"]
    assert draft["blind"] is True and draft["id"] == draft_id
    assert (draft["route"], draft["score"], draft["sub_scores"], draft["findings"]) == (None, None, None, None)
    decided = result_data(ann["decided"])["data"]
    assert decided["blind"] is False and machine_said("agreed") in ann["decided"].content[0].text
    [row] = result_data(ann["search"])["data"]["items"]
    assert (row["external_id"], row["verdict"], row["blind"]) == ("cv-open", None, True)
    found_by_verdict = {item["external_id"] for item in result_data(ann["by_verdict"])["data"]["items"]}
    assert "cv-open" not in found_by_verdict  # matching it by its verdict would tell the verdict
    rows = {row["item"]: row for row in result_data(ann["queue"])["data"]["waiting"]}
    assert rows["cv-open"]["blind"] is True and rows["cv-open"]["reason"] is None

    assert machine_said("open") in key["conversation"].content[0].text
    assert machine_said("draft") in key["draft"].content[0].text
    assert result_data(key["conversation"])["data"]["review"]["route"] == "human"
    assert "cv-open" in {item["external_id"] for item in result_data(key["by_verdict"])["data"]["items"]}


def test_each_tool_keeps_to_the_roles_that_open_it(live_server, org):
    world = blind_world(org)

    async def stakeholder(client):
        return await client.call_tool("list_queue", {}), await client.call_tool("read_dashboard", {})

    async def operator(client):
        return (
            await client.call_tool("submit_draft", {"draft": NEW_DRAFT}),
            await client.call_tool("run_regression_set", {"name": "refunds", "version": 1}),
        )

    queue, dashboard = _session(live_server, token_of(world.people["sam"], org), stakeholder)
    assert "do not include this: it takes lead, operator" in _refusal(queue)
    assert not dashboard.is_error
    submitted, run = _session(live_server, token_of(world.people["ann"], org), operator)
    assert "takes the org's API key" in _refusal(submitted)
    assert "it takes criteria admin" in _refusal(run)
    assert not Draft.objects.filter(external_id="agent-1").exists()


def test_a_criteria_admins_token_runs_a_set_and_reads_the_run(live_server, org, celery_worker, fake_llm):
    """The run is read once the workers have graded it: read while it runs, the tool and the API may answer either
    side of the worker's last write."""
    world = blind_world(org)
    ada = world.people["ada"]
    set_build(org=org, name="refunds", kind="conversation", source="decisions", external_ids=["cv-agreed"], actor=ada)
    token = token_of(ada, org)
    fake_llm.script(verdicts_reply(PATH_IDS))

    async def start(client):
        return {
            "started": await client.call_tool("run_regression_set", {"name": "refunds", "version": 1,
                                                                     "min_agreement": 0.9}),
            "no_version": await client.call_tool("run_regression_set", {"name": "refunds", "version": 7}),
            "bad_bar": await client.call_tool("run_regression_set", {"name": "refunds", "version": 1,
                                                                     "min_agreement": 2}),
        }  # fmt: skip

    answers = _session(live_server, token, start)
    started = result_data(answers["started"])["data"]
    assert (started["set"], started["criteria_version"], started["min_agreement"]) == ("refunds", 1, 0.9)
    run = RegressionRun.objects.get()
    assert run.pk == started["id"] and run.started_by == ada
    assert "version: the org has no conversation criteria version 7" in _refusal(answers["no_version"])
    assert "min_agreement" in _refusal(answers["bad_bar"])
    assert RegressionRun.objects.count() == 1  # the refused runs started nothing
    wait_until(lambda: RegressionRun.objects.filter(pk=run.pk, state=RunState.DONE).exists(), message="run done")

    async def read(client):
        return {
            "read": await client.call_tool("read_regression_run", {"name": "refunds", "run_id": run.pk}),
            "no_set": await client.call_tool("read_regression_run", {"name": "nope", "run_id": run.pk}),
        }

    answers = _session(live_server, token, read)
    api = httpx.get(f"{live_server.url}/api/v1/sets/refunds/runs/{run.pk}",
                    headers={"Authorization": f"Bearer {token}"}).json()  # fmt: skip
    assert (api["state"], api["graded"], api["errors"]) == ("done", 1, 0)
    assert result_data(answers["read"])["data"] == api
    assert "no set named 'nope'" in _refusal(answers["no_set"])


def test_a_revoked_token_and_a_person_who_left_the_org_are_refused(live_server, org, operator):
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    revoked = token_of(operator, org, name="old laptop")
    token_revoke(token=PersonalToken.objects.get(name="old laptop"), actor=operator)
    left = make_person("lou", org, Role.OPERATOR)
    lous = token_of(left, org)
    Membership.objects.filter(user=left).delete()

    def post(token: str) -> httpx.Response:
        return httpx.post(f"{live_server.url}/mcp", json=listing, headers={"Authorization": f"Bearer {token}"})

    assert post(revoked).status_code == 401
    refused = post(lous)
    assert refused.status_code == 403 and "no longer a member" in refused.json()["detail"]


def test_each_call_reads_the_persons_roles_afresh_as_the_stdio_server_does(org, operator):
    token = token_of(operator, org)
    with acting_as(lambda: mcp_principal(token)):  # what `manage.py mcp` serves its calls under
        assert json.loads(list_queue())["data"]["waiting"] == []
        Membership.objects.filter(user=operator).update(role=Role.STAKEHOLDER)
        with pytest.raises(ToolError, match="it takes lead, operator"):
            list_queue()
        token_revoke(token=PersonalToken.objects.get(user=operator), actor=operator)
        with pytest.raises(ToolError, match="no longer live"):
            read_dashboard()

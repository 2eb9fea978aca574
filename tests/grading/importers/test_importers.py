"""Conversation importers: export files to canonical `POST /api/v1/conversations` payloads (no Django needed)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field

from grading.importers import FORMATS, ImportFormatError, ParsedConversation, ParseFailure, parse_file

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "imports"
REPO = Path(__file__).resolve().parents[3]


# --- the contract every payload must satisfy -------------------------------------------------------------------


class ContractMessage(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    id: str = Field(min_length=1)
    parent_id: str | None
    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None
    tool_calls: list[dict[str, Any]] | None
    tool_call_id: str | None
    name: str | None
    created_at: str | None
    hidden: bool
    truncated: bool


class ContractPayload(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    external_id: str = Field(min_length=1)
    application: str | None
    closed: Literal[True]
    active_message_id: str | None
    messages: list[ContractMessage] = Field(min_length=1)
    metadata: dict[str, str] | None = None


def assert_meets_contract(payload: dict[str, Any]) -> None:
    ContractPayload.model_validate(payload)
    json.dumps(payload, allow_nan=False)  # the API must be able to send it back out
    ids = [item["id"] for item in payload["messages"]]
    assert len(ids) == len(set(ids))
    assert payload["active_message_id"] is None or payload["active_message_id"] in ids
    seen: set[str] = set()
    for item in payload["messages"]:
        if item["created_at"] is not None:
            assert datetime.fromisoformat(item["created_at"]).utcoffset() is not None
        for call in item["tool_calls"] or []:
            assert isinstance(call.get("id"), str)
        # Parents come first, so the upsert can insert in one pass (dangling or cyclic links excepted).
        if item["parent_id"] in ids and item["parent_id"] not in seen:
            assert _in_cycle(payload["messages"], item["id"])
        seen.add(item["id"])


def _in_cycle(messages: list[dict[str, Any]], start: str) -> bool:
    parents = {item["id"]: item["parent_id"] for item in messages}
    seen: set[str] = set()
    current: str | None = start
    while current is not None and current in parents:
        if current in seen:
            return True
        seen.add(current)
        current = parents[current]
    return False


# --- helpers ----------------------------------------------------------------------------------------------------


def parse_fixture(fmt: Literal["openai", "chatgpt", "openwebui"], name: str) -> list[ParsedConversation | ParseFailure]:
    return parse_file(fmt, FIXTURES / name)


def payloads(results: list[ParsedConversation | ParseFailure]) -> dict[str, dict[str, Any]]:
    return {r.payload["external_id"]: r.payload for r in results if isinstance(r, ParsedConversation)}


def failures(results: list[ParsedConversation | ParseFailure]) -> list[ParseFailure]:
    return [r for r in results if isinstance(r, ParseFailure)]


def by_id(payload: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {item["id"]: item for item in payload["messages"]}


def active_path(payload: dict[str, Any]) -> list[str]:
    messages = by_id(payload)
    path: list[str] = []
    current = payload["active_message_id"]
    while current is not None:
        path.append(current)
        current = messages[current]["parent_id"]
    return path[::-1]


def parse_text(fmt: Literal["openai", "chatgpt", "openwebui"], value: Any) -> list[ParsedConversation | ParseFailure]:
    return parse_file(fmt, json.dumps(value))


FIXTURE_FILES = [
    # format, file, conversations that parse, conversations that fail
    ("chatgpt", "chatgpt-librechat-sample.json", 1, 0),
    ("chatgpt", "chatgpt-tools-branches.json", 2, 1),
    ("openwebui", "openwebui-librechat-sample.json", 3, 0),
    ("openwebui", "openwebui-branches.json", 2, 1),
    ("openai", "openai-tools.jsonl", 3, 2),
    ("openai", "openai-branches.json", 2, 0),
]


# --- every format -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("fmt", "name", "parsed", "failed"), FIXTURE_FILES)
def test_it_parses_each_fixture_into_payloads_that_meet_the_contract(fmt, name, parsed, failed):
    results = parse_fixture(fmt, name)

    assert len(payloads(results)) == parsed
    assert len(failures(results)) == failed
    for payload in payloads(results).values():
        assert_meets_contract(payload)
        assert payload["closed"] is True


@pytest.mark.parametrize(("fmt", "name", "parsed", "failed"), FIXTURE_FILES)
def test_it_gives_identical_results_when_parsing_the_same_file_twice(fmt, name, parsed, failed):
    text = (FIXTURES / name).read_text(encoding="utf-8")

    assert parse_file(fmt, text) == parse_file(fmt, text) == parse_fixture(fmt, name)


@pytest.mark.parametrize(("fmt", "name", "parsed", "failed"), FIXTURE_FILES)
def test_it_resolves_every_parent_except_the_roots(fmt, name, parsed, failed):
    for payload in payloads(parse_fixture(fmt, name)).values():
        ids = set(by_id(payload))
        for item in payload["messages"]:
            assert item["parent_id"] is None or item["parent_id"] in ids


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("text", ["", "   \n", "hello there", "[1, 2", '{"id": "x",\n "mapping": {', "<html></html>"])
def test_it_raises_import_format_error_for_a_file_that_is_not_json(fmt, text):
    with pytest.raises(ImportFormatError):
        parse_file(fmt, text)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("text", ["42", '"conversations"', "null", "true", "NaN", '[{"content": NaN}]'])
def test_it_raises_import_format_error_for_json_that_cannot_hold_conversations(fmt, text):
    with pytest.raises(ImportFormatError):
        parse_file(fmt, text)


def test_it_raises_import_format_error_for_an_unknown_format():
    with pytest.raises(ImportFormatError, match="unknown format"):
        parse_file("claude", "[]")  # type: ignore[arg-type]


def test_it_reads_a_path_as_utf8_even_with_a_byte_order_mark(tmp_path):
    path = tmp_path / "export.json"
    path.write_bytes(b"\xef\xbb\xbf" + (FIXTURES / "openwebui-librechat-sample.json").read_bytes())

    assert parse_file("openwebui", path) == parse_fixture("openwebui", "openwebui-librechat-sample.json")


def test_it_raises_import_format_error_for_a_file_that_is_not_utf8(tmp_path):
    path = tmp_path / "export.json"
    path.write_bytes(b'[{"id": "\xff\xfe"}]')

    with pytest.raises(ImportFormatError, match="not UTF-8"):
        parse_file("chatgpt", path)


def test_it_returns_nothing_for_an_empty_array():
    assert parse_file("chatgpt", "[]") == []


def test_it_does_not_import_django():
    code = "import sys, grading.importers; print(sorted(m for m in sys.modules if m.split('.')[0] == 'django'))"

    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)

    assert result.stdout.strip() == "[]"


# --- ChatGPT ----------------------------------------------------------------------------------------------------


def test_it_takes_the_active_leaf_from_chatgpt_current_node_and_keeps_every_message_node():
    raw = json.loads((FIXTURES / "chatgpt-librechat-sample.json").read_text())[0]
    payload = payloads(parse_fixture("chatgpt", "chatgpt-librechat-sample.json"))[raw["id"]]

    assert payload["active_message_id"] == raw["current_node"] == "f63b8e17-aa5c-4ca6-a1bf-d4d285e269b8"
    with_message = {key for key, node in raw["mapping"].items() if node["message"] is not None}
    assert set(by_id(payload)) == with_message
    assert "aaa1f70c-100e-46f0-999e-10c8565f047f" not in by_id(payload)  # the message-less root
    assert by_id(payload)["d38605d2-7b2c-43de-b044-22ce472c749b"]["parent_id"] is None  # child of that root
    assert active_path(payload)[0] == "d38605d2-7b2c-43de-b044-22ce472c749b"
    assert active_path(payload)[-3:] == [
        "db88eddf-3622-4246-8527-b6eaf0e9e8cd",
        "aaa20127-b9e3-44f6-afbe-a2475838625a",
        "f63b8e17-aa5c-4ca6-a1bf-d4d285e269b8",
    ]


def test_it_flags_hidden_chatgpt_nodes_and_keeps_them_on_the_active_path():
    sample = payloads(parse_fixture("chatgpt", "chatgpt-librechat-sample.json"))
    tools = payloads(parse_fixture("chatgpt", "chatgpt-tools-branches.json"))["cg-tools-1"]

    (sample_payload,) = sample.values()
    assert [m["id"] for m in sample_payload["messages"] if m["hidden"]] == ["d38605d2-7b2c-43de-b044-22ce472c749b"]
    assert [m["id"] for m in tools["messages"] if m["hidden"]] == ["sys-1", "ctx-1"]
    assert active_path(tools)[:3] == ["sys-1", "ctx-1", "u1"]
    assert by_id(tools)["ctx-1"]["content"] == "I run a bakery in Lyon.\n\nAnswer briefly."


def test_it_turns_chatgpt_recipients_into_tool_calls_answered_by_the_named_tool():
    tools = payloads(parse_fixture("chatgpt", "chatgpt-tools-branches.json"))["cg-tools-1"]
    messages = by_id(tools)

    assert messages["a1"]["content"] is None
    assert messages["a1"]["tool_calls"] == [
        {
            "id": "a1",
            "type": "function",
            "function": {"name": "browser", "arguments": 'search("Lyon weather tomorrow")'},
        }
    ]
    assert (messages["t1"]["role"], messages["t1"]["name"], messages["t1"]["tool_call_id"]) == ("tool", "browser", "a1")
    assert messages["t1"]["content"] == "# Lyon forecast\nTomorrow: 21C, sunny, wind 10 km/h"
    assert messages["a3"]["tool_calls"] is None


def test_it_keeps_the_text_of_a_chatgpt_code_call_and_its_execution_output():
    messages = by_id(payloads(parse_fixture("chatgpt", "chatgpt-tools-branches.json"))["cg-tools-1"])

    call = messages["a2"]["tool_calls"][0]
    assert call["function"] == {
        "name": "python",
        "arguments": "temps = [18, 19, 21, 20, 22, 21, 19]\nprint(max(temps))",
    }
    assert (messages["t2"]["tool_call_id"], messages["t2"]["name"], messages["t2"]["content"]) == ("a2", "python", "22")


def test_it_describes_non_text_chatgpt_parts_as_dict_parts():
    result = payloads(parse_fixture("chatgpt", "chatgpt-tools-branches.json"))
    photo = by_id(result["cg-tools-1"])["u2"]["content"]
    drawn = by_id(result["cg-dalle-3"])["d-t1"]

    assert photo[0]["type"] == "image_asset_pointer"
    assert photo[0]["asset_pointer"] == "file-service://file-croissant"
    assert photo[1] == {"type": "text", "text": "What is in this photo?"}
    assert drawn["tool_call_id"] == "d-a1"
    assert drawn["content"][0]["asset_pointer"] == "file-service://file-cat"


def test_it_marks_unfinished_chatgpt_replies_truncated_but_not_replies_cut_by_the_length_limit():
    (sample,) = payloads(parse_fixture("chatgpt", "chatgpt-librechat-sample.json")).values()
    dalle = by_id(payloads(parse_fixture("chatgpt", "chatgpt-tools-branches.json"))["cg-dalle-3"])

    assert [m["id"] for m in sample["messages"] if m["truncated"]] == ["ada93f81-f59e-4b31-933d-1357efd68bfc"]
    assert dalle["d-a3b"]["truncated"] is True  # status in_progress, finish_details interrupted
    assert dalle["d-a3"]["truncated"] is False  # finish_details max_tokens: delivered as is


def test_it_converts_chatgpt_epoch_seconds_to_utc_iso():
    (sample,) = payloads(parse_fixture("chatgpt", "chatgpt-librechat-sample.json")).values()
    messages = by_id(sample)

    assert messages["aaa297ba-e2da-440e-84f4-e62e7be8b003"]["created_at"] == "2024-05-01T17:37:11.150442+00:00"
    assert messages["d38605d2-7b2c-43de-b044-22ce472c749b"]["created_at"] is None


def test_it_uses_conversation_id_when_a_chatgpt_conversation_has_no_id():
    result = payloads(parse_fixture("chatgpt", "chatgpt-tools-branches.json"))

    assert result["cg-dalle-3"]["active_message_id"] == "d-a3"


def test_it_reports_a_chatgpt_conversation_without_mapping_and_parses_the_others():
    results = parse_fixture("chatgpt", "chatgpt-tools-branches.json")

    assert isinstance(results[0], ParsedConversation)
    assert results[1] == ParseFailure(
        external_id="cg-no-mapping-2",
        index=1,
        reason="the conversation has no mapping, so it has no messages to import",
    )
    assert isinstance(results[2], ParsedConversation)


def chatgpt_node(key: str, parent: str | None, role: str | None, text: str = "x", **message: Any) -> dict[str, Any]:
    body = None
    if role is not None:
        body = {"id": key, "author": {"role": role}, "content": {"content_type": "text", "parts": [text]}, **message}
    return {"id": key, "parent": parent, "children": [], "message": body}


def chatgpt_conversation(*nodes: dict[str, Any], current_node: str | None, cid: str = "c1") -> dict[str, Any]:
    return {"id": cid, "mapping": {node["id"]: node for node in nodes}, "current_node": current_node}


def test_it_attaches_children_of_message_less_nodes_to_the_nearest_message_ancestor():
    conversation = chatgpt_conversation(
        chatgpt_node("root", None, None),
        chatgpt_node("u1", "root", "user"),
        chatgpt_node("gap", "u1", None),
        chatgpt_node("a1", "gap", "assistant"),
        chatgpt_node("tail", "a1", None),
        current_node="tail",
    )

    (result,) = parse_text("chatgpt", [conversation])

    assert [(m["id"], m["parent_id"]) for m in result.payload["messages"]] == [("u1", None), ("a1", "u1")]
    assert result.payload["active_message_id"] == "a1"


def test_it_keeps_a_dangling_chatgpt_parent_for_the_evidence_code_to_report():
    conversation = chatgpt_conversation(chatgpt_node("a1", "lost-node", "assistant"), current_node="a1")

    (result,) = parse_text("chatgpt", [conversation])

    assert result.payload["messages"][0]["parent_id"] == "lost-node"


@pytest.mark.parametrize(
    ("conversation", "reason"),
    [
        (chatgpt_conversation(chatgpt_node("u1", None, "user"), current_node="gone"), "current_node 'gone' is not in"),
        (chatgpt_conversation(chatgpt_node("u1", None, "critic"), current_node="u1"), "unknown role 'critic'"),
        (chatgpt_conversation(chatgpt_node("r", None, None), current_node="r"), "no node with a message"),
        (
            chatgpt_conversation(
                chatgpt_node("u1", "loop-a", "user"),
                chatgpt_node("loop-a", "loop-b", None),
                chatgpt_node("loop-b", "loop-a", None),
                current_node="u1",
            ),
            "cycle",
        ),
        ({"id": "c1", "mapping": {"u1": {"parent": ["r"], "message": None}}}, "parent must be a non-empty string"),
        ({"title": "no id", "mapping": {}}, "no id or conversation_id"),
    ],
)
def test_it_fails_a_chatgpt_conversation_the_contract_cannot_use_with_a_reason(conversation, reason):
    (result,) = parse_text("chatgpt", [conversation])

    assert isinstance(result, ParseFailure)
    assert reason in result.reason
    assert result.index == 0


def test_it_links_a_tool_result_to_the_nearest_call_of_the_same_tool_in_the_turn():
    conversation = chatgpt_conversation(
        chatgpt_node("u1", None, "user"),
        chatgpt_node("c1", "u1", "assistant", "search('a')", recipient="browser"),
        chatgpt_node("r1", "c1", "tool", "result a"),
        chatgpt_node("c2", "r1", "assistant", "print(1)", recipient="python"),
        chatgpt_node("c3", "c2", "assistant", "search('b')", recipient="browser"),
        chatgpt_node("r2", "c3", "tool", "1"),
        chatgpt_node("r3", "r2", "tool", "result b"),
        current_node="r3",
    )
    conversation["mapping"]["r1"]["message"]["author"]["name"] = "browser"
    conversation["mapping"]["r2"]["message"]["author"]["name"] = "python"
    conversation["mapping"]["r3"]["message"]["author"]["name"] = "browser"

    (result,) = parse_text("chatgpt", [conversation])

    linked = {m["id"]: m["tool_call_id"] for m in result.payload["messages"] if m["role"] == "tool"}
    assert linked == {"r1": "c1", "r2": "c2", "r3": "c3"}


# --- OpenAI -----------------------------------------------------------------------------------------------------


def test_it_links_openai_tool_results_to_their_calls_and_keeps_parts_content():
    weather = payloads(parse_fixture("openai", "openai-tools.jsonl"))["weather-1"]
    messages = weather["messages"]

    assert weather["application"] == "support-bot"
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "tool", "assistant"]
    assert [c["id"] for c in messages[2]["tool_calls"]] == ["call_paris", "call_rome"]
    assert [messages[3]["tool_call_id"], messages[4]["tool_call_id"]] == ["call_paris", "call_rome"]
    assert messages[1]["content"][1] == {"type": "image_url", "image_url": {"url": "https://example.com/map.png"}}
    assert messages[1]["created_at"] == "2024-05-01T10:00:00+00:00"
    assert messages[2]["created_at"] == "2024-05-01T10:00:01+00:00"


def test_it_generates_linear_ids_when_openai_messages_have_none():
    weather = payloads(parse_fixture("openai", "openai-tools.jsonl"))["weather-1"]

    assert [(m["id"], m["parent_id"]) for m in weather["messages"]] == [
        ("m0", None),
        ("m1", "m0"),
        ("m2", "m1"),
        ("m3", "m2"),
        ("m4", "m3"),
        ("m5", "m4"),
    ]
    assert weather["active_message_id"] is None  # one leaf: the evidence code finds it


def test_it_turns_a_legacy_openai_function_call_into_a_linked_tool_call():
    (legacy,) = [
        p for key, p in payloads(parse_fixture("openai", "openai-tools.jsonl")).items() if key.startswith("openai-")
    ]
    messages = by_id(legacy)

    assert messages["m2"]["tool_calls"] == [
        {"id": "m2-call", "type": "function", "function": {"name": "lookup_order", "arguments": '{"order": "A17"}'}}
    ]
    assert (messages["m3"]["role"], messages["m3"]["name"], messages["m3"]["tool_call_id"]) == (
        "tool",
        "lookup_order",
        "m2-call",
    )


def test_it_derives_a_stable_external_id_from_the_content_when_an_openai_conversation_has_none():
    conversation = [{"role": "user", "content": "Say hi."}, {"role": "assistant", "content": "Hi!"}]

    (first,) = parse_text("openai", [conversation])
    (again,) = parse_file("openai", json.dumps([conversation], indent=4))
    (other,) = parse_text("openai", [[*conversation, {"role": "user", "content": "Again."}]])

    assert first.payload["external_id"] == again.payload["external_id"]
    assert first.payload["external_id"].startswith("openai-")
    assert len(first.payload["external_id"]) == len("openai-") + 16
    assert other.payload["external_id"] != first.payload["external_id"]


def test_it_accepts_a_bare_list_of_messages_as_one_openai_conversation():
    (result,) = parse_text("openai", [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi"}])

    assert [m["content"] for m in result.payload["messages"]] == ["Hello", "Hi"]


def test_it_maps_developer_to_system_and_function_to_tool():
    (result,) = parse_text(
        "openai",
        [[{"role": "developer", "content": "Rules."}, {"role": "function", "name": "f", "content": "42"}]],
    )

    assert [m["role"] for m in result.payload["messages"]] == ["system", "tool"]


def test_it_reports_an_openai_conversation_with_an_unknown_role_and_a_bad_jsonl_line_and_keeps_the_rest():
    results = parse_fixture("openai", "openai-tools.jsonl")

    assert [type(r).__name__ for r in results] == [
        "ParsedConversation",
        "ParsedConversation",
        "ParseFailure",
        "ParseFailure",
        "ParsedConversation",
    ]
    assert results[2] == ParseFailure(
        external_id="bad-role-3", index=2, reason="message 'm1' has unknown role 'critic'"
    )
    assert results[3].index == 3
    assert "line 4 is not valid JSON" in results[3].reason
    assert results[4].payload["external_id"] == "after-broken-5"


def test_it_keeps_explicit_openai_branches_parents_first_and_the_active_message():
    branchy = payloads(parse_fixture("openai", "openai-branches.json"))["branchy-1"]

    assert branchy["active_message_id"] == "a2b"
    assert branchy["application"] == "docs-bot"
    assert [m["id"] for m in branchy["messages"]] == ["s", "u1", "a1", "u2", "a2", "a2b", "u2x", "a2x"]
    assert active_path(branchy) == ["s", "u1", "a1", "u2", "a2b"]


@pytest.mark.parametrize(
    ("conversation", "reason"),
    [
        ({"id": "c", "messages": []}, "no messages"),
        ({"id": "c", "messages": "hi"}, "messages must be a list"),
        ({"id": "c", "messages": [{"content": "no role"}]}, "has no role"),
        ({"id": "c", "messages": [{"id": "x", "role": "user"}, {"id": "x", "role": "user"}]}, "more than once"),
        ({"id": "c", "active_message_id": "zz", "messages": [{"role": "user"}]}, "active_message_id 'zz'"),
        ({"id": "c", "messages": [{"role": "user", "content": 7}]}, "content must be text"),
        ({"id": "c", "messages": [{"role": "user", "parent_id": 1.5}]}, "parent_id must be"),
        ({"id": "c", "messages": [{"role": "assistant", "tool_calls": [{"type": "function"}]}]}, "without an id"),
        ({"id": "c", "application": ["x"], "messages": [{"role": "user"}]}, "application must be"),
        ("just text", "must be a list of messages or an object"),
    ],
)
def test_it_fails_an_openai_conversation_the_contract_cannot_use_with_a_reason(conversation, reason):
    results = parse_text("openai", [conversation, [{"role": "user", "content": "fine"}]])

    assert isinstance(results[0], ParseFailure)
    assert reason in results[0].reason
    assert isinstance(results[1], ParsedConversation)


# --- Open WebUI -------------------------------------------------------------------------------------------------


def test_it_takes_the_active_leaf_from_openwebui_current_id():
    raw = json.loads((FIXTURES / "openwebui-librechat-sample.json").read_text())
    result = payloads(parse_fixture("openwebui", "openwebui-librechat-sample.json"))

    for chat in raw:
        payload = result[chat["id"]]
        assert payload["active_message_id"] == chat["chat"]["history"]["currentId"]
        assert set(by_id(payload)) == set(chat["chat"]["history"]["messages"])


def test_it_keeps_openwebui_branches_and_details_blocks_verbatim():
    raw = json.loads((FIXTURES / "openwebui-branches.json").read_text())[0]["chat"]["history"]["messages"]
    branchy = payloads(parse_fixture("openwebui", "openwebui-branches.json"))["owui-branch-1"]
    messages = by_id(branchy)

    assert active_path(branchy) == ["b-u1", "b-a1b", "b-u2", "b-a2"]
    assert messages["b-a1"]["parent_id"] == "b-u1"  # the abandoned branch is kept
    assert messages["b-a1b"]["content"] == raw["b-a1b"]["content"]
    assert messages["b-a1b"]["content"].startswith('<details type="tool_calls"')
    assert all(m["tool_calls"] is None and m["name"] is None for m in branchy["messages"])


def test_it_keeps_openwebui_reasoning_blocks_verbatim():
    result = payloads(parse_fixture("openwebui", "openwebui-librechat-sample.json"))

    assert by_id(result["reasoning-chat"])["ra2"]["content"].startswith('<details type="reasoning"')


def test_it_marks_unfinished_openwebui_replies_truncated():
    messages = by_id(payloads(parse_fixture("openwebui", "openwebui-branches.json"))["owui-branch-1"])

    assert [key for key, m in messages.items() if m["truncated"]] == ["b-a1"]


def test_it_converts_openwebui_seconds_and_milliseconds_to_utc_iso():
    sample = payloads(parse_fixture("openwebui", "openwebui-librechat-sample.json"))
    branchy = payloads(parse_fixture("openwebui", "openwebui-branches.json"))

    assert by_id(sample["simple-chat"])["sa1"]["created_at"] == "2023-11-14T22:46:40+00:00"
    assert by_id(branchy["owui-branch-1"])["b-u1"]["created_at"] == "2024-05-01T21:46:40+00:00"


def test_it_reads_an_older_openwebui_messages_list_as_a_chain():
    legacy = payloads(parse_fixture("openwebui", "openwebui-branches.json"))["owui-legacy-2"]

    assert [(m["id"], m["parent_id"], m["role"]) for m in legacy["messages"]] == [
        ("m0", None, "system"),
        ("m1", "m0", "user"),
        ("m2", "m1", "assistant"),
    ]


def test_it_accepts_a_single_openwebui_chat_object():
    chat = json.loads((FIXTURES / "openwebui-librechat-sample.json").read_text())[2]

    (result,) = parse_text("openwebui", chat)

    assert result.payload["external_id"] == "simple-chat"


def test_it_reports_an_openwebui_chat_with_an_unknown_role_by_its_id():
    results = parse_fixture("openwebui", "openwebui-branches.json")

    assert results[2] == ParseFailure(
        external_id="owui-bad-3", index=2, reason="message 'x1' has unknown role 'narrator'"
    )


@pytest.mark.parametrize(
    ("chat", "reason"),
    [
        ({"id": "w", "chat": {"title": "empty"}}, "no history.messages"),
        ({"id": "w", "chat": {"history": {"currentId": "q", "messages": {"a": {"role": "user"}}}}}, "currentId 'q'"),
        ({"id": "w", "chat": {"history": {"messages": {"a": {"role": "user", "parentId": []}}}}}, "parentId must be"),
        ({"id": "w", "chat": {"history": {"messages": {"a": "hello"}}}}, "must be an object"),
        ({"chat": {"history": {"messages": {"a": {"role": "user"}}}}}, "no id"),
    ],
)
def test_it_fails_an_openwebui_chat_the_contract_cannot_use_with_a_reason(chat, reason):
    (result,) = parse_text("openwebui", [chat])

    assert isinstance(result, ParseFailure)
    assert reason in result.reason


# --- junk never escapes as anything but ImportFormatError ------------------------------------------------------

VOCABULARY = [
    "id", "external_id", "conversation_id", "application", "active_message_id", "messages", "role", "content",
    "parts", "content_type", "text", "tool_calls", "tool_call_id", "function", "function_call", "name", "type",
    "parent_id", "created_at", "hidden", "truncated", "mapping", "message", "parent", "children", "current_node",
    "author", "recipient", "metadata", "status", "finish_details", "is_visually_hidden_from_conversation",
    "create_time", "chat", "history", "currentId", "parentId", "childrenIds", "timestamp", "done",
]  # fmt: skip
WORDS = ["user", "assistant", "system", "tool", "developer", "function", "all", "python", "a", "b", "c", "text", ""]
KEYS = ["a", "b", "c"]

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(WORDS)
    | st.text(max_size=8)
)
junk = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.sampled_from(VOCABULARY + KEYS) | st.text(max_size=4), children, max_size=6)
    ),
    max_leaves=40,
)


def _often(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """`strategy` about four times in five, else junk: mostly valid input reaches the deep code paths."""
    return st.one_of(strategy, strategy, strategy, strategy, junk)


contents = st.one_of(
    st.text(max_size=8),
    st.lists(st.text(max_size=4) | st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=4)})),
    st.fixed_dictionaries(
        {"content_type": st.sampled_from(["text", "code", "multimodal_text", "odd"])},
        optional={"parts": st.lists(st.text(max_size=4) | junk, max_size=3), "text": st.text(max_size=4)},
    ),
    junk,
)


def _tree_node(key_field: str, parent_field: str) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            key_field: st.sampled_from(KEYS),
            parent_field: _often(st.none() | st.sampled_from([*KEYS, "missing"])),
            "role": _often(st.sampled_from(WORDS)),
        },
        optional={
            "content": contents,
            "recipient": st.sampled_from(WORDS),
            "timestamp": _often(st.integers(min_value=0, max_value=2 * 10**12)),
            "done": junk,
            "status": st.sampled_from(["finished_successfully", "in_progress"]),
        },
    )


chatgpt_like = st.builds(
    lambda nodes, current, cid: {
        "id": cid,
        "current_node": current,
        "mapping": {
            n["id"]: {
                "parent": n["parent"],
                "message": None
                if n["role"] == ""
                else {"author": {"role": n["role"], "name": n.get("recipient")}, **{k: n[k] for k in n if k != "role"}},
            }
            for n in nodes
        },
    },
    st.lists(_tree_node("id", "parent"), min_size=1, max_size=5),
    _often(st.none() | st.sampled_from([*KEYS, "missing"])),
    _often(st.sampled_from(["c1", "c2"])),
)
openwebui_like = st.builds(
    lambda nodes, current: {
        "id": "w1",
        "chat": {"history": {"currentId": current, "messages": {n["id"]: n for n in nodes}}},
    },
    st.lists(_tree_node("id", "parentId"), min_size=1, max_size=5),
    _often(st.none() | st.sampled_from([*KEYS, "missing"])),
)
openai_like = st.lists(_tree_node("id", "parent_id"), min_size=1, max_size=5) | st.fixed_dictionaries(
    {"id": _often(st.sampled_from(["o1", "o2"])), "messages": st.lists(_tree_node("id", "parent_id"), max_size=5)}
)


def _check(fmt: Literal["openai", "chatgpt", "openwebui"], text: str) -> None:
    try:
        results = parse_file(fmt, text)
    except ImportFormatError:
        return
    assert isinstance(results, list)
    for index, result in enumerate(results):
        if isinstance(result, ParseFailure):
            assert result.index == index
            assert result.reason
        else:
            assert isinstance(result, ParsedConversation)
            assert_meets_contract(result.payload)
    assert parse_file(fmt, text) == results


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(fmt=st.sampled_from(FORMATS), value=junk)
def test_it_never_raises_anything_but_import_format_error_on_junk_json(fmt, value):
    _check(fmt, json.dumps(value))


@settings(max_examples=100)
@given(fmt=st.sampled_from(FORMATS), text=st.text(max_size=40))
def test_it_never_raises_anything_but_import_format_error_on_junk_text(fmt, text):
    _check(fmt, text)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=st.one_of(
        st.tuples(st.just("chatgpt"), st.lists(chatgpt_like, max_size=3)),
        st.tuples(st.just("openwebui"), st.lists(openwebui_like, max_size=3)),
        st.tuples(st.just("openai"), st.lists(openai_like, max_size=3)),
    ),
    as_jsonl=st.booleans(),
)
@pytest.mark.slow
def test_it_parses_or_reports_every_nearly_valid_conversation(case, as_jsonl):
    fmt, conversations = case
    text = "\n".join(json.dumps(c) for c in conversations) if as_jsonl else json.dumps(conversations)

    _check(fmt, text)


def test_it_links_a_tool_result_with_another_name_only_to_the_single_call_right_above_it():
    conversation = chatgpt_conversation(
        chatgpt_node("u1", None, "user"),
        chatgpt_node("c1", "u1", "assistant", "{'q': 'oslo'}", recipient="web.run"),
        chatgpt_node("r1", "c1", "tool", "results"),
        chatgpt_node("r2", "r1", "tool", "stray output"),
        current_node="r2",
    )
    conversation["mapping"]["r1"]["message"]["author"]["name"] = "web"

    (result,) = parse_text("chatgpt", [conversation])

    linked = {m["id"]: m["tool_call_id"] for m in result.payload["messages"] if m["role"] == "tool"}
    assert linked == {"r1": "c1", "r2": None}


# --- times the file gives but no one can read -------------------------------------------------------------------


def _with_time(fmt: str, value: Any) -> Any:
    """A conversation of `fmt` whose one message carries `value` as its time, in that format's own field."""
    if fmt == "openai":
        return [{"id": "t1", "messages": [{"id": "m1", "role": "user", "content": "hi", "created_at": value}]}]
    if fmt == "chatgpt":
        message = {"id": "m1", "author": {"role": "user"}, "content": {"content_type": "text", "parts": ["hi"]}}
        return [
            {"id": "t1", "mapping": {"m1": {"id": "m1", "parent": None, "message": message | {"create_time": value}}}}
        ]
    return [
        {"id": "t1", "chat": {"history": {"messages": {"m1": {"role": "user", "content": "hi", "timestamp": value}}}}}
    ]


TIME_FIELDS = {"openai": "created_at", "chatgpt": "create_time", "openwebui": "timestamp"}
OUT_OF_RANGE = {"openai": "9999-12-31T23:00:00-14:00", "chatgpt": -62135596801, "openwebui": 10**22}


@pytest.mark.parametrize("fmt", FORMATS)
def test_it_refuses_a_conversation_whose_time_is_outside_the_years_1_to_9999_naming_message_and_time(fmt):
    [result] = parse_text(fmt, _with_time(fmt, OUT_OF_RANGE[fmt]))

    assert result == ParseFailure(
        external_id="t1",
        index=0,
        reason=f"message 'm1' {TIME_FIELDS[fmt]} {OUT_OF_RANGE[fmt]!r} is outside the years 1 to 9999 once "
        "converted to UTC",
    )


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("value", ["yesterday", "", "2026-13-01", True, {"at": 1}])
def test_it_refuses_a_conversation_whose_time_is_not_a_time(fmt, value):
    [result] = parse_text(fmt, _with_time(fmt, value))

    assert isinstance(result, ParseFailure) and result.external_id == "t1"
    assert result.reason.startswith(f"message 'm1' {TIME_FIELDS[fmt]} ")
    assert result.reason.endswith(" is not a time")


@pytest.mark.parametrize("fmt", FORMATS)
def test_it_leaves_a_time_the_file_does_not_give_missing(fmt):
    [result] = parse_text(fmt, _with_time(fmt, None))

    assert result.payload["messages"][0]["created_at"] is None

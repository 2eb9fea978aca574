"""The prompt-injection corpus (issue 11, Build 7): tests/resilience/injection/*.json, one case a file.

Each case puts an injection somewhere a pipeline or an agent's user controls (a draft's body or title; a user,
assistant or tool message, a tool call's arguments, a message's name) and scripts the loopback judge to obey it:
to answer whatever the injection asks. The production client and backends talk to that judge over HTTP. Whatever
the judge then says:
- a draft with a remaining finding does not pass (the findings veto the model), and a reply outside the verdict
  schema is an error, never a made-up score;
- a conversation verdict can rest only on messages of the active path, so a judge told to cite an invented or an
  abandoned message, or none, yields unknown (a person decides), never pass;
- every request carries our system prompt and one user message, no tools, and the content sits inside the
  delimiter whose nonce the content cannot know: one opening and one closing marker, the nonce nowhere else.

A case file: `kind` (draft | conversation), `where`, `technique`, `injection` (the text), `obeyed` (the reply of a
judge that obeys it), `expect_route`, and for drafts `base_finding` (default true: the draft also has a banned
word, so there is a finding left for the injection to talk the judge past).
"""

import json
import re
from pathlib import Path

import pytest

from grading.gate import draft_grade
from grading.judge.conversation import SYSTEM_PROMPT as CONVERSATION_SYSTEM_PROMPT
from grading.judge.draft import SYSTEM_PROMPT as DRAFT_SYSTEM_PROMPT
from grading.models import Review
from grading.reviews import conversation_grade
from tests.fakes.openai_server import json_reply
from tests.grading.conversations import llm_judge, support_conversation, upsert
from tests.grading.drafts import CLEAN_BODY, llm_draft_judge, save_draft, setup_org_memory

pytestmark = pytest.mark.django_db
CASES = sorted((Path(__file__).parent / "injection").glob("*.json"))
ISOLATION_KEYS = ("tools", "functions", "tool_choice", "function_call")


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def grade_draft(org, case: dict, fake_llm) -> Review:
    setup_org_memory(org)
    body, title = CLEAN_BODY, "Cutting support costs with self-service"
    first_break = body.index("\n\n")
    if case["where"] == "body":
        body = f"{body[:first_break]}\n\n{case['injection']}{body[first_break:]}"
    else:
        title = f"{title} {case['injection']}"
    if case.get("base_finding", True):
        body += "\nWe delve into the numbers every quarter.\n"
    draft = save_draft(org, body)
    draft.title = title
    draft.save(update_fields=["title"])
    return draft_grade(draft_id=draft.pk, judge=llm_draft_judge(fake_llm))


def grade_conversation(org, case: dict, fake_llm) -> Review:
    payload = support_conversation()
    by_id = {message["id"]: message for message in payload["messages"]}
    injection = case["injection"]
    if case["where"] == "user":
        by_id["m1"]["content"] += "\n\n" + injection
    elif case["where"] == "assistant":
        by_id["m4"]["content"] += "\n\n" + injection
    elif case["where"] == "tool":
        by_id["m3"]["content"] = json.dumps({"status": "refunded", "amount": "49.90", "note": injection})
    elif case["where"] == "tool_arguments":
        by_id["m2"]["tool_calls"][0]["function"]["arguments"] = json.dumps({"order": 1182, "memo": injection})
    elif case["where"] == "name":
        by_id["m3"]["name"] = injection
    conversation = upsert(org, payload).conversation
    return conversation_grade(conversation_id=conversation.pk, judge=llm_judge(fake_llm))


def probe_of(case: dict) -> str:
    """The injection as the judge's prompt carries it (JSON-quoted where it travels inside JSON)."""
    injection = case["injection"]
    if case["kind"] == "conversation" and case["where"] in ("tool", "tool_arguments", "name"):
        return json.dumps(injection)[1:-1]
    return injection


def assert_content_inside_the_nonce_delimiter(request, case: dict) -> None:
    body = request.body
    assert not any(key in body for key in ISOLATION_KEYS)
    system, user = body["messages"]
    assert (system["role"], user["role"]) == ("system", "user")
    expected = DRAFT_SYSTEM_PROMPT if case["kind"] == "draft" else CONVERSATION_SYSTEM_PROMPT
    assert system["content"] == expected  # nothing of the content reaches the instructions
    text = user["content"]
    block = "DRAFT" if case["kind"] == "draft" else "EVIDENCE"
    # The template opens the block before any content, so the first opening marker is ours.
    opening = re.search(rf"^<<<{block} ([0-9a-f]{{24}})>>>$", text, re.MULTILINE)
    assert opening, text[:2000]
    nonce = opening.group(1)
    closing = f"<<<END {block} {nonce}>>>"
    # The nonce opens and closes the block, closes the draft prompt's memory block and marks each message's
    # header, and is nowhere in the content.
    ours = (opening.group(0), closing, f"<<<END MEMORY {nonce}>>>")
    assert all(line in ours or line.startswith(f"[message {nonce} id=") for line in text.splitlines() if nonce in line)
    assert text.rstrip("\n").endswith(closing)
    inside = text[opening.end() : text.index(closing)]
    # Line by line: a line that could pass for a marker or a header carries a backslash before it.
    for line in filter(None, map(str.strip, probe_of(case).splitlines())):
        assert line in inside
        assert line not in text[: opening.start()]


@pytest.mark.parametrize("path", CASES, ids=lambda path: path.stem)
def test_a_judge_that_obeys_the_injection_cannot_pass_it_and_the_content_stays_delimited(path, org, fake_llm):
    case = load(path)
    fake_llm.set_default(json_reply(case["obeyed"]))  # every request, the retry after a malformed reply included
    review = grade_draft(org, case, fake_llm) if case["kind"] == "draft" else grade_conversation(org, case, fake_llm)
    assert review.route != "pass"
    assert review.route == case["expect_route"], (review.route, review.reason, review.checks, review.findings)
    if review.route == "error":
        assert review.score is None  # never a made-up score
    if case["kind"] == "draft" and review.route == "fail":
        assert review.findings and review.findings[0]["code"] == "banned_word"
        assert review.score <= 10 - len(review.findings)
    if case["kind"] == "conversation" and review.route == "human":
        assert any(check["verdict"] == "unknown" for check in review.checks.values())
        assert all(check["verdict"] != "pass" or check["message_ids"] for check in review.checks.values())
    requests = fake_llm.chat_requests()
    assert requests
    for request in requests:
        assert_content_inside_the_nonce_delimiter(request, case)


def test_the_corpus_has_at_least_thirty_cases_over_every_technique_and_place():
    cases = [load(path) for path in CASES]
    assert len(cases) >= 30
    techniques = {case["technique"] for case in cases}
    assert {"instruction", "fake role tag", "fake delimiter", "guessed nonce", "fake JSON verdict"} <= techniques
    places = {(case["kind"], case["where"]) for case in cases}
    assert {("draft", "body"), ("draft", "title"), ("conversation", "user"), ("conversation", "tool")} <= places
    assert {("conversation", "assistant"), ("conversation", "tool_arguments"), ("conversation", "name")} <= places
    assert {case["expect_route"] for case in cases} <= {"fail", "error", "human"}

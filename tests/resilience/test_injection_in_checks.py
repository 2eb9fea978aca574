"""The prompt-injection corpus (tests/resilience/injection/*.json) through a criteria version's checks (issue 39): each
case's injection is written as the question of every check the version asks and as the guidance for its pass and its
fail. The version is published and an item graded under it by the loopback judge, scripted to obey the case.

The admin's words say what a check asks and are still data to the judge: whatever the judge says, a conversation's
answer rests only on the graded path and a draft's finding vetoes a pass; every request carries our system prompt;
the prompt's structural lines are exactly its own (markers, the path's message headers) and only they carry the
nonce; and every line of the injection sits in the CHECKS section under a label or indented, so none starts a line
of its own (a forged check, a forged heading), and none reaches the evidence being judged.
"""

import json
import re
from pathlib import Path

import pytest

from grading.checks.definitions import CONVERSATION_DEFAULTS, DRAFT_DEFAULTS, CheckSet
from grading.conversations.grader import conversation_grade
from grading.drafts.gate import draft_grade
from grading.judge.conversation import SYSTEM_PROMPT as CONVERSATION_SYSTEM_PROMPT
from grading.judge.draft import SYSTEM_PROMPT as DRAFT_SYSTEM_PROMPT
from grading.models import ItemKind, Review
from tests.builders.checks import version_with_checks
from tests.builders.conversations import PATH_IDS, llm_judge, support_conversation, upsert
from tests.builders.drafts import CLEAN_BODY, llm_draft_judge, save_draft, setup_org_memory
from tests.builders.prompts import header_lines, marker_lines, split_blocks
from tests.fakes.openai_server import json_reply

pytestmark = pytest.mark.django_db
CASES = sorted((Path(__file__).parent / "injection").glob("*.json"))
COPIES = 3 * 3  # three checks, each with the injection as its question and its guidance for pass and for fail
LABELS = ("question: ", 'guidance for "')


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def with_injection(checks: CheckSet, injection: str) -> CheckSet:
    """`checks` with the injection as every check's question and its guidance for a pass and for a fail."""
    injected = []
    for check in checks.checks:
        low, high = ("1", str(check.scale)) if check.kind == "score" else ("fail", "pass")
        guidance = {low: injection, high: injection}
        injected.append(check.model_copy(update={"question": injection, "guidance": guidance}))
    return CheckSet(checks=injected)


def assert_the_injection_stays_in_the_checks(request, case: dict) -> None:
    system, user = request.body["messages"]
    draft = case["kind"] == "draft"
    assert system["content"] == (DRAFT_SYSTEM_PROMPT if draft else CONVERSATION_SYSTEM_PROMPT)
    text = user["content"]
    markers = marker_lines(text)
    nonce = re.fullmatch(r"<<<END (?:DRAFT|EVIDENCE) ([0-9a-f]{24})>>>", markers[-1]).group(1)
    structure = [f"<<<EVIDENCE {nonce}>>>", f"<<<END EVIDENCE {nonce}>>>"]
    if draft:
        structure = ["<<<MEMORY>>>", f"<<<END MEMORY {nonce}>>>", f"<<<DRAFT {nonce}>>>", f"<<<END DRAFT {nonce}>>>"]
    assert markers == structure
    if not draft:
        headers = header_lines(text)
        read = [re.match(r'\[message (\S+) id="([^"]*)"', header) for header in headers]
        assert [match.groups() if match else None for match in read] == [(nonce, id) for id in PATH_IDS], headers
        structure += headers
    assert all(line in structure for line in text.splitlines() if nonce in line), "the nonce appears in the data"
    blocks, outside = split_blocks(text)
    # From the prompt's CHECKS heading to the prompt's next heading (the last of its name: a case may copy it).
    section = outside[outside.index("CHECKS (") : outside.rindex("RULES THE WRITER" if draft else "STAGE 1 of")]
    judged = blocks["DRAFT" if draft else "EVIDENCE"]
    # A line the prompt writes itself (a case copies the criteria heading) is outside once more: the prompt's own.
    own = outside.replace(section, "")
    for line in (line.strip() for line in case["injection"].splitlines()):
        if line:
            assert section.count(line) >= COPIES, line
            assert line not in judged and own.count(line) <= 1, line
    # The admin's text never starts a line of its own: each of its lines is labelled, or indented under its label.
    for line in filter(None, section.splitlines()[1:]):
        assert line.startswith((*LABELS, "  ", "name: ")) or re.match(r'\d+\. "[a-z_]+", ', line), line


@pytest.mark.parametrize("path", CASES, ids=lambda path: path.stem)
def test_an_injection_in_a_checks_question_and_guidance_is_data_and_cannot_pass_the_item(path, org, fake_llm):
    case = load(path)
    fake_llm.set_default(json_reply(case["obeyed"]))
    if case["kind"] == "draft":
        setup_org_memory(org)
        version_with_checks(org, ItemKind.DRAFT, with_injection(DRAFT_DEFAULTS, case["injection"]))
        graded = save_draft(org, CLEAN_BODY + "\nWe delve into the numbers every quarter.\n", external_id="fresh")
        review: Review = draft_grade(draft_id=graded.pk, judge=llm_draft_judge(fake_llm))
        if review.route == "fail":
            assert review.findings and review.findings[0]["code"] == "banned_word"
    else:
        version_with_checks(org, ItemKind.CONVERSATION, with_injection(CONVERSATION_DEFAULTS, case["injection"]))
        graded = upsert(org, support_conversation("cv-graded")).conversation
        review = conversation_grade(conversation_id=graded.pk, judge=llm_judge(fake_llm))
        if review.route == "human":
            assert all(check["verdict"] != "pass" or check["message_ids"] for check in review.checks.values())
    assert review.route == case["expect_route"], (review.route, review.reason, review.checks)
    requests = fake_llm.chat_requests()
    assert requests
    for request in requests:
        assert_the_injection_stays_in_the_checks(request, case)

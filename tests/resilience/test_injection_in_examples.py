"""The prompt-injection corpus (tests/resilience/injection/*.json) through a criteria version's worked examples
(issue 23): each case's injection is written into an example three times, as the person's note, as the criteria
admin's explanation and in the quoted evidence (a user message of the decided conversation, or the decided draft's
body). The version is published and a fresh item graded under it by the loopback judge, scripted to obey the case.

Whatever the judge says, a conversation verdict rests only on the graded path and a draft's finding vetoes a pass;
and the injection stays data: every request carries our system prompt, the prompt's structural lines are exactly its
own (the EXAMPLES markers among them; the only message headers are the graded path's), only they carry the nonce,
and every line of the injection lies inside the EXAMPLES block, never outside it or in the evidence being judged.
"""

import json
import re
from pathlib import Path

import pytest
from django.utils import timezone

from grading.conversations.grader import conversation_grade
from grading.drafts.gate import draft_grade
from grading.judge.conversation import SYSTEM_PROMPT as CONVERSATION_SYSTEM_PROMPT
from grading.judge.draft import SYSTEM_PROMPT as DRAFT_SYSTEM_PROMPT
from grading.models import ItemKind, Review
from grading.reviews.examples import criteria_example_add, criteria_example_explain
from grading.reviews.services import PersonVerdict, decision_record
from grading.reviews.versions import criteria_new_version, criteria_publish
from tests.builders.conversations import PATH_IDS, llm_judge, support_conversation, upsert, verdicts_reply
from tests.builders.drafts import CLEAN_BODY, llm_draft_judge, save_draft, setup_org_memory
from tests.builders.prompts import header_lines, marker_lines, split_blocks
from tests.builders.queue_items import draft_item
from tests.fakes.openai_server import json_reply

pytestmark = pytest.mark.django_db
CASES = sorted((Path(__file__).parent / "injection").glob("*.json"))
COPIES = 3  # the note, the explanation and the quoted evidence


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def conversation_example(org, operator, injection: str, fake_llm) -> None:
    """A published conversation version whose one example carries the injection three times."""
    payload = support_conversation("cv-example")
    payload["messages"][0]["content"] += "\n\n" + injection
    decided = upsert(org, payload).conversation
    fake_llm.set_default(verdicts_reply(PATH_IDS, complete="unknown"))
    review = conversation_grade(conversation_id=decided.pk, judge=llm_judge(fake_llm))
    checks = {"grounded": "fail", "complete": "pass", "usable": "pass"}
    decision_record(
        review_id=review.pk,
        decided_by=operator,
        decided_at=timezone.now(),
        verdict=PersonVerdict(checks=checks, note=injection),
    )
    version = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    example = criteria_example_add(version=version, subject=decided, check="grounded")
    criteria_example_explain(example=example, explanation=injection)
    criteria_publish(version=version)
    fake_llm.reset()


def draft_example(org, operator, injection: str) -> None:
    """A published draft version whose one example carries the injection three times."""
    first_break = CLEAN_BODY.index("\n\n")
    body = f"{CLEAN_BODY[:first_break]}\n\n{injection}{CLEAN_BODY[first_break:]}"
    review = draft_item(org, "decided-draft", body=body)
    decision_record(
        review_id=review.pk,
        decided_by=operator,
        decided_at=timezone.now(),
        verdict=PersonVerdict(outcome="reject", note=injection),
    )
    version = criteria_new_version(org=org, kind=ItemKind.DRAFT)
    example = criteria_example_add(version=version, subject=review.draft, check="pass_fail")
    criteria_example_explain(example=example, explanation=injection)
    criteria_publish(version=version)


def assert_the_injection_stays_in_the_examples(request, case: dict, criteria_number: int) -> None:
    system, user = request.body["messages"]
    assert (system["role"], user["role"]) == ("system", "user")
    draft = case["kind"] == "draft"
    assert system["content"] == (DRAFT_SYSTEM_PROMPT if draft else CONVERSATION_SYSTEM_PROMPT)
    text = user["content"]
    markers = marker_lines(text)
    nonce = re.fullmatch(r"<<<END (?:DRAFT|EVIDENCE) ([0-9a-f]{24})>>>", markers[-1]).group(1)
    structure = ["<<<EXAMPLES>>>", f"<<<END EXAMPLES {nonce}>>>"]
    if draft:
        structure += ["<<<MEMORY>>>", f"<<<END MEMORY {nonce}>>>", f"<<<DRAFT {nonce}>>>", f"<<<END DRAFT {nonce}>>>"]
    else:
        structure += [f"<<<EVIDENCE {nonce}>>>", f"<<<END EVIDENCE {nonce}>>>"]
    assert markers == structure
    if not draft:
        headers = header_lines(text)
        read = [re.match(r'\[message (\S+) id="([^"]*)"', header) for header in headers]
        assert [match.groups() if match else None for match in read] == [(nonce, id) for id in PATH_IDS], headers
        structure += headers
    assert all(line in structure for line in text.splitlines() if nonce in line), "the nonce appears in the data"
    blocks, outside = split_blocks(text)
    judged = blocks["DRAFT" if draft else "EVIDENCE"]
    # A line the prompt writes itself (a case copies the criteria heading) is outside once: the prompt's own.
    own = [f"CRITERIA (version {criteria_number})"]
    for line in (line.strip() for line in case["injection"].splitlines()):
        if line:
            assert blocks["EXAMPLES"].count(line) >= COPIES, line
            assert outside.count(line) == own.count(line) and line not in judged, line


@pytest.mark.parametrize("path", CASES, ids=lambda path: path.stem)
def test_an_injection_in_an_example_is_data_and_a_judge_that_obeys_it_cannot_pass_the_item(
    path, org, operator, fake_llm
):
    case = load(path)
    if case["kind"] == "draft":
        setup_org_memory(org)
        draft_example(org, operator, case["injection"])
        graded = save_draft(org, CLEAN_BODY + "\nWe delve into the numbers every quarter.\n", external_id="fresh")
        fake_llm.set_default(json_reply(case["obeyed"]))
        review: Review = draft_grade(draft_id=graded.pk, judge=llm_draft_judge(fake_llm))
        assert review.route == case["expect_route"], (review.route, review.reason)
        if review.route == "fail":
            assert review.findings and review.findings[0]["code"] == "banned_word"
    else:
        conversation_example(org, operator, case["injection"], fake_llm)
        graded = upsert(org, support_conversation("cv-graded")).conversation
        fake_llm.set_default(json_reply(case["obeyed"]))
        review = conversation_grade(conversation_id=graded.pk, judge=llm_judge(fake_llm))
        assert review.route == case["expect_route"], (review.route, review.reason, review.checks)
        if review.route == "human":
            assert all(check["verdict"] != "pass" or check["message_ids"] for check in review.checks.values())
    assert review.route != "pass"
    assert review.criteria_version.examples.count() == 1
    requests = fake_llm.chat_requests()
    assert requests
    for request in requests:
        assert_the_injection_stays_in_the_examples(request, case, review.criteria_version.number)

"""A draft version asks checks of its own (issue 39, item 2): the draft judge is asked exactly them, its sub-scores
are the version's score checks, and a required check can fail a draft or send it to people."""

import pytest

from grading.checks.definitions import AnswerKind, CheckDefinition, CheckSet
from grading.drafts.gate import draft_grade
from grading.models import ItemKind, Review
from tests.builders.checks import version_with_checks
from tests.builders.drafts import llm_draft_judge, save_draft, setup_org_memory
from tests.fakes.openai_server import json_reply

pytestmark = pytest.mark.django_db

DRAFT_CHECKS = CheckSet(
    checks=[
        CheckDefinition(
            key="clarity", name="Clarity", question="How clear is it?", kind=AnswerKind.SCORE, scale=10, pass_from=6
        ),
        CheckDefinition(key="cites_sources", name="Cites sources", question="Does every figure name its source?"),
        CheckDefinition(
            key="audience",
            name="Audience",
            question="Who is it written for?",
            kind=AnswerKind.CATEGORY,
            categories=["leaders", "agents"],
            required=False,
        ),
    ]
)
QUOTE = "Acme Logistics cut ticket volume by 38% in one quarter"


def reply(**changes) -> dict:
    return {
        "overall": 8,
        "clarity": 8,
        "cites_sources": {"verdict": "pass", "quotes": [QUOTE], "rationale": "the study is linked"},
        "audience": {"verdict": "leaders", "quotes": ["Support teams spend most of their week"], "rationale": "costs"},
        "passed": True,
        "issues": [],
    } | changes


def grade(org, fake_llm, answer: dict) -> Review:
    setup_org_memory(org)
    version_with_checks(org, ItemKind.DRAFT, DRAFT_CHECKS)
    fake_llm.script(json_reply(answer))
    return draft_grade(draft_id=save_draft(org).pk, judge=llm_draft_judge(fake_llm))


def test_it_grades_a_draft_on_the_versions_own_checks(org, fake_llm):
    review = grade(org, fake_llm, reply())

    assert review.route == "pass"
    assert review.sub_scores == {"clarity": 8}
    assert review.checks["cites_sources"] == {
        "verdict": "pass",
        "quotes": [QUOTE],
        "rationale": "the study is linked",
    }
    assert review.checks["audience"]["verdict"] == "leaders"


def test_it_asks_the_draft_judge_exactly_the_versions_checks(org, fake_llm):
    grade(org, fake_llm, reply())

    [request] = fake_llm.chat_requests()
    schema = request.body["response_format"]["json_schema"]["schema"]
    assert list(schema["properties"]) == ["overall", "clarity", "cites_sources", "audience", "passed", "issues"]
    user = request.body["messages"][1]["content"]
    assert all(check.question in user for check in DRAFT_CHECKS.checks)
    assert '"aeo"' not in user and '"aeo"' not in request.body["messages"][0]["content"]
    assert user.index("CHECKS") < user.index("<<<MEMORY>>>")  # in the prefix every draft of the version shares


@pytest.mark.parametrize(
    ("changes", "route", "reason"),
    [
        ({"cites_sources": {"verdict": "fail", "quotes": [QUOTE], "rationale": "no source"}}, "fail", ""),
        ({"clarity": 5}, "fail", ""),  # below the lowest passing score
        ({"clarity": None}, "human", "unknown_check"),  # the judge could not tell
        (
            {"cites_sources": {"verdict": "pass", "quotes": ["a sentence it never wrote"], "rationale": ""}},
            "human",
            "unknown_check",
        ),  # fmt: skip
        ({"audience": {"verdict": "unknown", "quotes": [], "rationale": ""}}, "pass", ""),  # not required
    ],
)
def test_a_required_check_fails_the_draft_or_sends_it_to_people(org, fake_llm, changes, route, reason):
    review = grade(org, fake_llm, reply(**changes))

    assert (review.route, review.reason) == (route, reason)

"""People's answers to a version's checks: what each kind allows, and what the answers come to for the item."""

import pytest

from grading.checks.answers import answer_reads_as, answers_refusal, item_outcome
from grading.checks.definitions import AnswerKind, CheckDefinition, CheckSet

CITES = CheckDefinition(key="cites", name="Cites", question="Cites the policy?")
INTENT = CheckDefinition(
    key="intent", name="Intent", question="Which?", kind=AnswerKind.CATEGORY, categories=["refund", "other"],
    passing=["refund"],
)  # fmt: skip
TOPIC = CheckDefinition(
    key="topic", name="Topic", question="About?", kind=AnswerKind.CATEGORY, categories=["a", "b"], required=False
)
HELPFUL = CheckDefinition(key="helpful", name="Helpful", question="1-10?", kind=AnswerKind.SCORE, scale=10, pass_from=7)
CHECKS = CheckSet(checks=[CITES, INTENT, TOPIC, HELPFUL])
ALL_PASS = {"cites": "pass", "intent": "refund", "topic": "b", "helpful": "7"}


@pytest.mark.parametrize(
    ("changes", "outcome"),
    [
        ({}, "pass"),
        ({"topic": "a"}, "pass"),  # not required: never fails the item
        ({"topic": "unknown"}, "pass"),
        ({"intent": "other"}, "fail"),  # a category that does not pass
        ({"helpful": "6"}, "fail"),  # below the lowest pass
        ({"helpful": "10"}, "pass"),
        ({"helpful": "unknown"}, "unknown"),
        ({"helpful": "unknown", "cites": "fail"}, "fail"),  # a fail beats an unknown
    ],
)
def test_the_answers_come_to_what_the_required_checks_say(changes, outcome):
    assert item_outcome(CHECKS, {**ALL_PASS, **changes}) == outcome


@pytest.mark.parametrize(
    ("answers", "says"),
    [
        ({**ALL_PASS, "grounded": "pass"}, "'grounded' is not a check of this criteria version"),
        ({**ALL_PASS, "helpful": "11"}, "'11' is not an answer of 'helpful': one of 1, 2, 3, 4, 5, 6, 7, 8, 9, 10"),
        ({**ALL_PASS, "helpful": 7}, "7 is not an answer of 'helpful'"),  # answers are stored as strings
        ({**ALL_PASS, "topic": "refund"}, "'refund' is not an answer of 'topic': one of a, b, unknown"),
        ({"cites": "pass"}, "missing intent, topic, helpful"),
    ],
)
def test_an_answer_the_version_does_not_have_is_refused_saying_what_it_allows(answers, says):
    assert says in answers_refusal(CHECKS, answers)


def test_every_answer_a_check_allows_is_accepted_and_unknown_for_every_kind():
    assert answers_refusal(CHECKS, ALL_PASS) is None
    assert answers_refusal(CHECKS, dict.fromkeys(CHECKS.keys, "unknown")) is None


def test_a_category_or_score_with_no_passing_answer_reads_as_neither_pass_nor_fail():
    assert answer_reads_as(TOPIC, "a") == "" and answer_reads_as(TOPIC, "unknown") == "unknown"
    assert (answer_reads_as(INTENT, "other"), answer_reads_as(HELPFUL, "9"), answer_reads_as(CITES, "fail")) == (
        "fail",
        "pass",
        "fail",
    )

"""A version's checks: what a definition may say, and how each kind of answer reads as pass, fail or unknown."""

import pytest
from pydantic import ValidationError

from grading.checks.definitions import (
    CONVERSATION_DEFAULTS,
    DRAFT_DEFAULTS,
    MAX_CHECKS,
    AnswerKind,
    CheckDefinition,
    CheckSet,
)
from grading.models import CriteriaVersion, ItemKind

INTENT = CheckDefinition(
    key="intent", name="Intent", question="What did the user want?", kind=AnswerKind.CATEGORY,
    categories=["billing", "refund", "other"], passing=["billing", "refund"],
)  # fmt: skip
HELPFUL = CheckDefinition(
    key="helpful", name="Helpful", question="How helpful, 1 to 5?", kind=AnswerKind.SCORE, pass_from=4
)


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"key": "Cites policy"}, "lower-case"),
        ({"key": "pass_fail"}, "reserved"),
        ({"kind": "category", "categories": ["only"], "required": False}, "two to eight"),
        ({"kind": "category", "categories": ["a", "unknown"], "required": False}, "not 'unknown'"),
        ({"kind": "category", "categories": ["a", "b"]}, "categories that pass"),
        ({"kind": "score", "pass_from": 6}, "1 to 5"),
        ({"kind": "score"}, "lowest passing score"),
        ({"guidance": {"maybe": "..."}}, "answers the check does not have"),
        ({"rules": [{"kind": "tool_called"}]}, "tool"),
    ],
)
def test_a_definition_that_cannot_be_asked_is_refused_saying_why(fields, says):
    with pytest.raises(ValidationError, match=says):
        CheckDefinition(**{"key": "cites", "name": "Cites", "question": "Cites the policy?", **fields})


def test_a_version_asks_at_most_twelve_checks_each_key_once():
    check = CONVERSATION_DEFAULTS.checks[0]
    with pytest.raises(ValidationError, match="used once"):
        CheckSet(checks=[check, check])
    many = [check.model_copy(update={"key": f"c{n}"}) for n in range(MAX_CHECKS + 1)]
    with pytest.raises(ValidationError, match="at most 12"):
        CheckSet(checks=many)


def test_each_kind_of_answer_reads_as_the_outcome_a_required_check_gives_an_item():
    verdict = CONVERSATION_DEFAULTS["grounded"]
    assert [verdict.outcome(a) for a in ("pass", "fail", "unknown", "maybe")] == ["pass", "fail", "unknown", "unknown"]
    assert [INTENT.outcome(a) for a in ("refund", "other", "unknown")] == ["pass", "fail", "unknown"]
    scores = ("5", "4", "3", "unknown", "6")
    assert [HELPFUL.outcome(a) for a in scores] == ["pass", "pass", "fail", "unknown", "unknown"]
    assert INTENT.answers == ("billing", "refund", "other", "unknown")
    assert HELPFUL.answers == ("1", "2", "3", "4", "5", "unknown")


@pytest.mark.django_db
def test_a_version_made_without_checks_asks_the_checks_of_today(org):
    conversation = CriteriaVersion.objects.create(org=org, kind=ItemKind.CONVERSATION, number=90, rubric="r")
    draft = CriteriaVersion.objects.create(org=org, kind=ItemKind.DRAFT, number=90, rubric="r")
    conversation.refresh_from_db()
    draft.refresh_from_db()
    assert conversation.check_set().keys == ("grounded", "complete", "usable")
    assert draft.check_set() == DRAFT_DEFAULTS
    assert {check.kind for check in draft.check_set().checks} == {AnswerKind.SCORE}


def test_a_pattern_the_linear_time_engine_cannot_take_is_refused_and_one_it_can_matches_any_case():
    with pytest.raises(ValidationError, match=r"linear time \(RE2\): invalid escape sequence"):
        CheckDefinition(key="card", name="Card", question="q", rules=[{"kind": "pattern", "pattern": r"(\d)\1"}])
    (rule,) = CheckDefinition(
        key="card", name="Card", question="q", rules=[{"kind": "pattern", "pattern": "refund"}]
    ).rules
    assert rule.compiled().search("We will REFUND you").group(0) == "REFUND"

"""The judge's confidence in each answer, read from hand-built token log-probabilities: however the tokenizer split
the JSON around the answer, and whichever answers share a first token."""

import pytest

from grading.checks.definitions import AnswerKind, CheckDefinition, CheckSet
from grading.judge.confidence import (
    answer_confidence,
    check_confidences,
    confidence_source,
    kept_confidences,
    pass_probability,
    verdict_confidence,
)
from grading.judge.conversation import combine_stage_confidences, combine_stages
from tests.builders.logprobs import tokens

VERDICT = ("pass", "fail", "unknown")
TEN = (*(str(n) for n in range(1, 11)), "unknown")
OPENING = ('{"', {}), ("grounded", {}), ('":', {}), (" {", {}), ('"', {}), ("verdict", {}), ('":', {})
CLOSING = ('",', {}), (' "message_ids": ["m4"], "rationale": "ok"}}', {})


def test_it_reads_the_answer_token_renormalised_over_the_allowed_answers():
    reply = tokens(*OPENING, (' "', {}), ("pass", {"pass": 0.6, "fail": 0.2, "unknown": 0.1, "Pass": 0.1}), *CLOSING)

    # "Pass" begins no allowed answer: left out.
    assert answer_confidence(reply, key="grounded", answer="pass", answers=VERDICT) == pytest.approx(0.6 / 0.9)


def test_it_reads_a_token_that_holds_the_quote_with_or_without_a_space_before_it():
    at_answer = {' "pass': 0.5, '"fail': 0.2, ' "un': 0.1, ' "': 0.1, "pass": 0.1}
    reply = tokens(*OPENING, (' "pass', at_answer), *CLOSING)

    # ` "` writes no answer yet (the tokenizer's split) and `pass` lacks the quote: both left out.
    assert answer_confidence(reply, key="grounded", answer="pass", answers=VERDICT) == pytest.approx(0.5 / 0.8)


def test_it_merges_alternatives_that_begin_the_same_answer_when_the_answer_is_split():
    reply = tokens(*OPENING, (' "', {}), ("p", {"p": 0.5, "pa": 0.2, "f": 0.2, "un": 0.1}), ("ass", {}), *CLOSING)

    assert answer_confidence(reply, key="grounded", answer="pass", answers=VERDICT) == pytest.approx(0.7)


def test_it_reads_an_answer_behind_a_fence_and_after_other_keys_of_its_check():
    reply = tokens(
        ("```json\n", {}), ('{"grounded": {"message_ids": ["m1"], "rationale": "a \\"verdict\\": \\"pass\\""', {}),
        (', "verdict": "', {}), ("fail", {"fail": 0.9, "pass": 0.1}), ('"}}', {}), ("\n```", {}),
    )  # fmt: skip

    assert answer_confidence(reply, key="grounded", answer="fail", answers=VERDICT) == pytest.approx(0.9)


def test_it_tells_one_from_ten_by_the_token_after_a_one():
    reply = tokens(*OPENING, (' "', {}), ("1", {"1": 0.6, "9": 0.3, "2": 0.1}), ('"', {'"': 0.75, "0": 0.25}), *CLOSING)

    one = 0.6 * 0.75
    assert answer_confidence(reply, key="grounded", answer="1", answers=TEN) == pytest.approx(one)

    ten = tokens(*OPENING, (' "', {}), ("1", {"1": 0.7, "9": 0.3}), ("0", {"0": 0.8, '"': 0.2}), *CLOSING)
    assert answer_confidence(ten, key="grounded", answer="10", answers=TEN) == pytest.approx(0.7 * 0.8)


def test_it_reads_a_one_as_one_where_the_tokenizer_writes_ten_in_one_token():
    reply = tokens(*OPENING, (' "', {}), ("10", {"10": 0.5, "1": 0.2, "9": 0.3}), *CLOSING)

    assert answer_confidence(reply, key="grounded", answer="10", answers=TEN) == pytest.approx(0.5)


def test_it_leaves_out_a_little_mass_it_cannot_place_and_gives_up_on_a_lot():
    """With "good" emitted as "go" "od", a "good" alternative may be good or the start of good_enough."""
    answers = ("good", "good_enough", "poor", "unknown")
    little = tokens(*OPENING, (' "', {}), ("go", {"go": 0.6, "poor": 0.35, "good": 0.05}), ("od", {}), *CLOSING)
    a_lot = tokens(*OPENING, (' "', {}), ("go", {"go": 0.5, "poor": 0.2, "good": 0.3}), ("od", {}), *CLOSING)

    # The emitted "go" may be either too: the token after it ("od", certain) and then the quote say it is "good".
    assert answer_confidence(little, key="grounded", answer="good", answers=answers) == pytest.approx(0.6 / 0.95)
    assert answer_confidence(a_lot, key="grounded", answer="good", answers=answers) is None


def test_it_has_no_confidence_without_the_answer_in_the_tokens():
    reply = tokens(*OPENING, (' "', {}), ("pass", {"pass": 0.6, "fail": 0.4}), *CLOSING)

    assert answer_confidence(reply, key="complete", answer="pass", answers=VERDICT) is None
    assert answer_confidence(reply, key="grounded", answer="fail", answers=VERDICT) is None
    assert answer_confidence(None, key="grounded", answer="pass", answers=VERDICT) is None


CHECKS = CheckSet(
    checks=[
        CheckDefinition(key="cites_policy", name="Cites", question="Cites the policy?"),
        CheckDefinition(
            key="intent", name="Intent", question="Why?", kind=AnswerKind.CATEGORY,
            categories=["refund", "shipping"], required=False,
        ),
        CheckDefinition(key="helpful", name="Helpful", question="How?", kind=AnswerKind.SCORE, pass_from=3),
    ]
)  # fmt: skip


def test_it_gives_each_check_of_a_conversation_reply_its_confidence():
    reply = tokens(
        ('{"cites_policy": {"verdict": "', {}), ("pass", {"pass": 0.8, "fail": 0.2}),
        ('", "message_ids": [], "rationale": ""}, "intent": {"verdict": "', {}),
        ("refund", {"refund": 0.7, "shipping": 0.2, "unknown": 0.1}),
        ('", "message_ids": [], "rationale": ""}, "helpful": {"verdict": "', {}),
        ("4", {"4": 0.5, "3": 0.5}), ('", "message_ids": [], "rationale": ""}}', {}),
    )  # fmt: skip

    confidences = check_confidences(reply, CHECKS, {"cites_policy": "pass", "intent": "refund", "helpful": "4"})

    assert confidences == pytest.approx({"cites_policy": 0.8, "intent": 0.7, "helpful": 0.5})
    assert confidence_source(confidences) == "logprobs"
    assert check_confidences(None, CHECKS, {"cites_policy": "pass"}) == {}
    assert confidence_source({}) == ""


def test_it_reads_a_draft_score_check_from_its_bare_number_and_skips_a_null():
    reply = tokens(
        ('{"overall": 7, "helpful": ', {}), ("4", {"4": 0.6, "5": 0.3, "six": 0.1}),
        (', "cites_policy": {"verdict": "', {}), ("fail", {"fail": 0.9, "pass": 0.1}),
        ('", "quotes": [], "rationale": ""}, "intent": null, "passed": true, "issues": []}', {}),
    )  # fmt: skip

    confidences = check_confidences(reply, CHECKS, {"helpful": 4, "cites_policy": "fail", "intent": None})

    assert confidences == pytest.approx({"helpful": 0.6 / 0.9, "cites_policy": 0.9})


def test_a_drafts_verdict_confidence_is_its_scores_mass_on_the_side_the_judge_took():
    distribution = {6: 0.2, 7: 0.5, 8: 0.3}

    assert pass_probability(distribution, threshold=7) == pytest.approx(0.8)
    assert verdict_confidence(distribution, threshold=7, passed=True) == pytest.approx(0.8)
    assert verdict_confidence(distribution, threshold=7, passed=False) == pytest.approx(0.2)
    assert verdict_confidence(distribution, threshold=7.5, passed=True) == pytest.approx(0.3)
    assert verdict_confidence(None, threshold=7, passed=True) is None


def test_an_answer_changed_after_the_judge_gave_it_keeps_no_confidence():
    judged = {"grounded": "pass", "complete": "fail", "usable": "pass"}
    stored = {"grounded": "unknown", "complete": "fail", "usable": "pass"}

    kept = kept_confidences({"grounded": 0.9, "complete": 0.8}, judged=judged, stored=stored)

    assert kept == {"complete": 0.8}


def _stage(**verdicts: str) -> dict[str, dict]:
    return {key: {"verdict": v, "message_ids": ["m1"], "rationale": key} for key, v in verdicts.items()}


def test_a_staged_answers_confidence_is_the_lowest_of_the_stages_behind_it():
    per_stage = [
        _stage(cites_policy="pass", intent="refund", helpful="4"),
        _stage(cites_policy="pass", intent="shipping", helpful="2"),
        _stage(cites_policy="fail", intent="refund", helpful="unknown"),
    ]
    confidences = [
        {"cites_policy": 0.9, "intent": 0.8, "helpful": 0.7},
        {"cites_policy": 0.6, "intent": 0.9, "helpful": 0.55},
        {"cites_policy": 0.75, "intent": 0.85, "helpful": 0.5},
    ]
    combined = combine_stages(per_stage, CHECKS)

    # A fail rests on the stage that failed it; the lowest score on the stage that gave it; the stages' categories
    # disagree, so the combination says unknown, which no stage said.
    assert {key: answer["verdict"] for key, answer in combined.items()} == {
        "cites_policy": "fail", "intent": "unknown", "helpful": "2",
    }  # fmt: skip
    assert combine_stage_confidences(per_stage, confidences, combined, CHECKS) == {
        "cites_policy": 0.75, "helpful": 0.55,
    }  # fmt: skip


def test_a_pass_over_stages_rests_on_every_stage_and_has_none_when_one_stage_has_none():
    per_stage = [_stage(cites_policy="pass", intent="refund", helpful="4")] * 2
    combined = combine_stages(per_stage, CHECKS)

    both = combine_stage_confidences(per_stage, [{"cites_policy": 0.9}, {"cites_policy": 0.7}], combined, CHECKS)
    one = combine_stage_confidences(per_stage, [{"cites_policy": 0.9}, {}], combined, CHECKS)

    assert both == {"cites_policy": 0.7}
    assert one == {}

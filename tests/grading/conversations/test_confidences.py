"""A conversation's review records how sure the judge was of each answer, read from the log-probabilities the
loopback judge returns, through the judge production builds (settings.JUDGES)."""

import pytest

from grading.checks.definitions import CheckSet
from grading.conversations.grader import conversation_grade
from grading.judge.backends import HeuristicJudge
from grading.models import ItemKind
from tests.builders.checks import CITES_POLICY, HELPFUL, INTENT, NO_PROMISE, answer, version_with_checks
from tests.builders.conversations import PATH_IDS, message, support_conversation, upsert, verdicts
from tests.builders.judges import configure_judges, judge_config
from tests.fakes.openai_server import json_reply

pytestmark = pytest.mark.django_db


@pytest.fixture
def judged_by_the_fake(settings, fake_llm):
    """The default judge answers at the loopback server, built as production builds it."""
    configure_judges(settings, default=judge_config(fake_llm))
    return fake_llm


def grade(org):
    conversation = upsert(org, support_conversation()).conversation
    return conversation_grade(conversation_id=conversation.pk)


def test_each_check_records_the_probability_the_judge_gave_its_answer(org, judged_by_the_fake):
    alternatives = {
        "grounded": {"pass": 0.8, "fail": 0.15, "unknown": 0.05},
        # "Pass" begins no allowed answer: the rest is renormalised without it.
        "complete": {"pass": 0.5, "fail": 0.3, "Pass": 0.2},
    }
    judged_by_the_fake.script(json_reply(verdicts(PATH_IDS), verdict_logprobs=alternatives))

    review = grade(org)

    assert judged_by_the_fake.chat_requests()[0].body["logprobs"] is True
    # usable's answer token came back certain (its only alternative itself).
    assert review.confidences == pytest.approx({"grounded": 0.8, "complete": 0.5 / 0.8, "usable": 1.0})
    assert review.confidence_source == "logprobs"


def test_an_answer_downgraded_for_citing_no_message_has_no_confidence(org, judged_by_the_fake):
    answers = verdicts(PATH_IDS) | {"complete": answer("fail", [])}
    judged_by_the_fake.script(json_reply(answers, verdict_logprobs={"complete": {"fail": 0.9, "pass": 0.1}}))

    review = grade(org)

    assert review.checks["complete"]["verdict"] == "unknown"
    assert review.confidences == {"grounded": 1.0, "usable": 1.0}


def test_an_answer_a_rule_changed_has_no_confidence_and_the_others_keep_theirs(org, judged_by_the_fake):
    version_with_checks(org, ItemKind.CONVERSATION, CheckSet(checks=[CITES_POLICY, INTENT, HELPFUL, NO_PROMISE]))
    answers = {
        "cites_policy": answer("fail", PATH_IDS[-1:]),
        "intent": answer("refund", PATH_IDS[:1]),
        "helpful": answer("4", PATH_IDS[-1:]),
        "no_promise": answer("pass", PATH_IDS[-1:]),  # the reply says "refunded": the rule fails it
    }
    alternatives = {
        "cites_policy": {"fail": 0.7, "pass": 0.3},
        "intent": {"refund": 0.6, "billing": 0.3, "other": 0.1},
        "helpful": {"4": 0.5, "5": 0.25, "3": 0.25},
        "no_promise": {"pass": 0.95, "fail": 0.05},
    }
    judged_by_the_fake.script(json_reply(answers, verdict_logprobs=alternatives))

    review = grade(org)

    assert review.checks["no_promise"]["verdict"] == "fail"
    assert review.confidences == pytest.approx({"cites_policy": 0.7, "intent": 0.6, "helpful": 0.5})


def test_an_answer_judged_in_stages_is_as_sure_as_its_least_sure_stage(org, judged_by_the_fake):
    judged_by_the_fake.context_tokens = 3_000  # a stage holds a chapter or two
    payload = support_conversation()
    payload["messages"] = [message("u0", "user", "Summarise each chapter.", None, 0)]
    for i in range(1, 13):
        parent = payload["messages"][-1]["id"]
        payload["messages"].append(message(f"a{i}", "assistant", f"Chapter {i}: " + "words " * 80, parent, i))
    payload["active_message_id"] = "a12"
    conversation = upsert(org, payload).conversation
    answers = verdicts(["u0"] + [f"a{i}" for i in range(1, 13)])
    # The first stage is sure of grounded, the second less so, the others certain.
    per_stage = iter([{"pass": 0.9, "fail": 0.1}, {"pass": 0.6, "fail": 0.4}])
    judged_by_the_fake.set_default(
        lambda _: json_reply(answers, verdict_logprobs={"grounded": next(per_stage, {"pass": 1.0})})
    )

    review = conversation_grade(conversation_id=conversation.pk)

    assert review.route == "pass" and review.stages > 2
    assert review.confidences == pytest.approx({"grounded": 0.6, "complete": 1.0, "usable": 1.0})


def test_a_judge_server_that_returns_no_logprobs_leaves_the_review_without_confidences(org, judged_by_the_fake):
    judged_by_the_fake.returns_logprobs = False
    judged_by_the_fake.script(json_reply(verdicts(PATH_IDS), verdict_logprobs={"grounded": {"pass": 0.8}}))

    review = grade(org)

    assert review.route == "pass"
    assert (review.confidences, review.confidence_source) == ({}, "")


def test_the_offline_heuristic_judge_gives_no_confidences(org):
    conversation = upsert(org, support_conversation()).conversation

    review = conversation_grade(conversation_id=conversation.pk, judge=HeuristicJudge())

    assert review.route in ("pass", "fail", "human")
    assert (review.confidences, review.confidence_source) == ({}, "")

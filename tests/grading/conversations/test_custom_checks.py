"""A conversation version asks checks of its own (issue 39, items 2 and 3): the judge is asked exactly them, the
outcome comes from the required ones, and the version's rules run first and only ever lower the judge's answer."""

import json

import pytest

from grading.checks.definitions import CONVERSATION_DEFAULTS, CheckSet, PatternRule, ToolCalledRule
from grading.conversations.grader import conversation_grade
from grading.judge.backends import HeuristicJudge
from grading.judge.examples import criteria_fingerprint
from grading.models import ItemKind, Review
from grading.reviews.examples import version_fingerprint
from grading.reviews.versions import criteria_active
from tests.builders.checks import (
    CITES_POLICY,
    CUSTOM_CHECKS,
    HELPFUL,
    INTENT,
    NO_PROMISE,
    answer,
    answers_reply,
    many_checks,
    version_with_checks,
)
from tests.builders.conversations import PATH_IDS, llm_judge, message, support_conversation, upsert
from tests.fakes.openai_server import tokenize

pytestmark = pytest.mark.django_db


def grade(org, fake_llm) -> Review:
    conversation = upsert(org, support_conversation()).conversation
    return conversation_grade(conversation_id=conversation.pk, judge=llm_judge(fake_llm))


def custom_answers(**changes: dict) -> dict:
    return {
        "cites_policy": answer("pass", ["m4"]),
        "intent": answer("refund", ["m1"]),
        "helpful": answer("4", ["m4"]),
        "tone": answer("pass", ["m4"]),
    } | changes


def test_it_grades_a_conversation_on_the_versions_own_checks(org, fake_llm):
    version_with_checks(org, ItemKind.CONVERSATION, CUSTOM_CHECKS)
    fake_llm.script(answers_reply(custom_answers()))

    review = grade(org, fake_llm)

    assert review.route == "pass"
    assert list(review.checks) == ["cites_policy", "intent", "helpful", "tone"]
    assert review.checks["intent"] == {"verdict": "refund", "message_ids": ["m1"], "rationale": "judged refund"}
    assert review.checks["helpful"]["verdict"] == "4"


def test_it_asks_the_judge_exactly_the_versions_checks_in_the_prompt_and_the_schema(org, fake_llm):
    version_with_checks(org, ItemKind.CONVERSATION, CUSTOM_CHECKS)
    fake_llm.script(answers_reply(custom_answers()))

    grade(org, fake_llm)

    [request] = fake_llm.chat_requests()
    schema = request.body["response_format"]["json_schema"]["schema"]
    assert list(schema["properties"]) == ["cites_policy", "intent", "helpful", "tone"]
    assert schema["required"] == ["cites_policy", "intent", "helpful", "tone"]
    answers = {key: _enum(schema, key) for key in schema["properties"]}
    assert answers == {
        "cites_policy": ["pass", "fail", "unknown"],
        "intent": ["refund", "billing", "other", "unknown"],
        "helpful": ["1", "2", "3", "4", "5", "unknown"],
        "tone": ["pass", "fail", "unknown"],
    }
    user = request.body["messages"][1]["content"]
    for check in CUSTOM_CHECKS.checks:
        assert f'"{check.key}"' in user and check.question in user
    assert "It names the policy by its title." in user and "Money back for an order." in user
    assert '"grounded"' not in user and "grounded" not in request.body["messages"][0]["content"]
    assert user.index("CHECKS") < user.index("<<<EVIDENCE")  # in the stable prefix, before the evidence


def _enum(schema: dict, key: str) -> list[str]:
    reference = schema["properties"][key]["$ref"].rsplit("/", 1)[-1]
    return schema["$defs"][reference]["properties"]["verdict"]["enum"]


@pytest.mark.parametrize(
    ("changes", "route"),
    [
        # An unknown goes to people even beside a fail, as it always did: a person may read the evidence either way.
        ({"cites_policy": answer("fail", ["m4"]), "intent": answer("unknown", [])}, "human"),
        ({"intent": answer("other", ["m1"])}, "fail"),  # a category that does not pass
        ({"helpful": answer("2", ["m4"])}, "fail"),  # a score below the lowest passing one
        ({"helpful": answer("unknown", [])}, "human"),
        ({"tone": answer("fail", ["m4"])}, "pass"),  # not required: counted and shown, never routes
        ({"tone": answer("unknown", [])}, "pass"),
    ],
)
def test_the_outcome_comes_from_the_required_checks(org, fake_llm, changes, route):
    version_with_checks(org, ItemKind.CONVERSATION, CUSTOM_CHECKS)
    fake_llm.script(answers_reply(custom_answers(**changes)))

    review = grade(org, fake_llm)

    assert review.route == route
    assert review.reason == ("unknown_check" if route == "human" else "")


def test_an_answer_that_cites_no_message_on_the_path_is_unknown_whatever_its_kind(org, fake_llm):
    version_with_checks(org, ItemKind.CONVERSATION, CUSTOM_CHECKS)
    fake_llm.script(answers_reply(custom_answers(intent=answer("refund", []), helpful=answer("5", ["m4b"]))))

    review = grade(org, fake_llm)

    assert review.route == "human"
    assert review.checks["intent"]["verdict"] == review.checks["helpful"]["verdict"] == "unknown"


def test_a_rules_fail_beats_the_judges_pass_and_its_findings_come_first(org, fake_llm):
    version_with_checks(org, ItemKind.CONVERSATION, CheckSet(checks=[CITES_POLICY, NO_PROMISE]))
    fake_llm.script(answers_reply({"cites_policy": answer("pass", ["m4"]), "no_promise": answer("pass", ["m1"])}))

    review = grade(org, fake_llm)

    assert review.route == "fail"
    promise = review.checks["no_promise"]
    assert promise["verdict"] == "fail" and promise["source"] == "rule"
    assert promise["findings"] == [  # m4: "Done: order 1182 was refunded, 49.90 is on its way."
        {"rule": 0, "message_id": "m4", "text": "refunded"},
        {"rule": 0, "message_id": "m4", "text": "on its way"},
    ]
    assert promise["message_ids"] == ["m4", "m1"]  # the rule's messages first, then the judge's
    assert promise["rationale"].startswith("[rule: promises a refund]")
    assert "source" not in review.checks["cites_policy"]
    assert len(fake_llm.chat_requests()) == 1  # the judge is still asked by default: figures stay comparable


def test_a_version_can_leave_the_judge_unasked_once_a_rule_has_failed_a_required_check(org, fake_llm):
    checks = CheckSet(checks=[CITES_POLICY, NO_PROMISE], judge_after_rule_fail=False)
    version_with_checks(org, ItemKind.CONVERSATION, checks)

    review = grade(org, fake_llm)

    assert fake_llm.chat_requests() == []
    assert (review.route, review.stages) == ("fail", 0)
    assert review.checks["no_promise"]["verdict"] == "fail"
    assert review.checks["cites_policy"]["verdict"] == "unknown"
    assert review.checks["cites_policy"]["rationale"].startswith("Not asked")


def test_a_rule_that_sets_unknown_sends_a_judged_pass_to_people(org, fake_llm):
    never_looked_up = ToolCalledRule(tool="lookup_order", sets="unknown", note="the order was never looked up")
    check = CITES_POLICY.model_copy(update={"rules": [never_looked_up]})
    version_with_checks(org, ItemKind.CONVERSATION, CheckSet(checks=[check]))
    fake_llm.script(answers_reply({"cites_policy": answer("pass", ["m4"])}))

    review = grade(org, fake_llm)

    assert (review.route, review.reason) == ("human", "unknown_check")
    assert review.checks["cites_policy"]["findings"] == [
        {"rule": 0, "message_id": None, "text": "lookup_order (never called)"}
    ]


def test_rules_lower_category_and_score_answers_as_the_admin_guide_says(org, fake_llm):
    amount = PatternRule(pattern=r"\d+\.\d\d", scopes=["assistant"], note="states an amount")
    helpful = HELPFUL.model_copy(update={"rules": [amount]})
    intent = INTENT.model_copy(update={"rules": [amount]})
    version_with_checks(org, ItemKind.CONVERSATION, CheckSet(checks=[intent, helpful]))
    fake_llm.script(answers_reply({"intent": answer("refund", ["m1"]), "helpful": answer("5", ["m4"])}))

    review = grade(org, fake_llm)

    assert review.checks["helpful"]["verdict"] == "2"  # the highest score that fails (a pass from 3)
    assert review.checks["intent"]["verdict"] == "unknown"  # a rule cannot pick a category
    assert review.checks["helpful"]["findings"] == [{"rule": 0, "message_id": "m4", "text": "49.90"}]
    assert review.route == "human"  # the category the rule left unknown is for people, beside the failing score


def test_rules_past_the_checks_cpu_budget_are_an_error_and_the_judge_is_not_asked(org, fake_llm, settings):
    settings.CHECKS_CPU_BUDGET_SECONDS = -1  # spent before the first message is read
    version_with_checks(org, ItemKind.CONVERSATION, CheckSet(checks=[NO_PROMISE]))

    review = grade(org, fake_llm)

    assert (review.route, review.reason) == ("error", "checks_budget")
    assert fake_llm.chat_requests() == []


def test_the_default_checks_still_grade_as_before(org, fake_llm):
    fake_llm.script(answers_reply({key: answer("pass", PATH_IDS) for key in ("grounded", "complete", "usable")}))

    review = grade(org, fake_llm)

    assert review.route == "pass" and list(review.checks) == ["grounded", "complete", "usable"]
    schema = fake_llm.chat_requests()[0].body["response_format"]["json_schema"]
    assert schema["name"] == "ConversationVerdicts" and schema["strict"] is True
    assert json.dumps(schema["schema"]).count('"enum": ["pass", "fail", "unknown"]') == 3


def test_the_criteria_fingerprint_covers_the_checks_and_keeps_todays_for_the_checks_of_today(org, fake_llm):
    today = criteria_active(org=org, kind=ItemKind.CONVERSATION)
    custom = version_with_checks(org, ItemKind.CONVERSATION, CUSTOM_CHECKS)
    edited = CheckSet(checks=[INTENT.model_copy(update={"question": "Why did they write?"})])
    reworded = version_with_checks(org, ItemKind.CONVERSATION, edited)

    fingerprints = [version_fingerprint(version) for version in (today, custom, reworded)]

    assert len(set(fingerprints)) == 3
    assert fingerprints[0] == criteria_fingerprint(rubric=today.rubric, rules=today.rules, examples=())


def test_the_offline_heuristic_judge_answers_unknown_for_a_check_it_cannot_read(org):
    version_with_checks(org, ItemKind.CONVERSATION, CheckSet(checks=[CITES_POLICY, *CONVERSATION_DEFAULTS.checks]))
    conversation = upsert(org, support_conversation()).conversation

    review = conversation_grade(conversation_id=conversation.pk, judge=HeuristicJudge())

    assert review.checks["cites_policy"]["verdict"] == "unknown"
    assert review.checks["usable"]["verdict"] == "pass"
    assert (review.route, review.reason) == ("human", "unknown_check")


def test_the_stage_budget_counts_the_versions_checks_so_no_stage_is_refused(org, fake_llm):
    fake_llm.context_tokens = 3_000  # the server says so, and refuses a longer prompt
    checks = many_checks(12)
    version_with_checks(org, ItemKind.CONVERSATION, checks)
    payload = support_conversation()
    payload["messages"] = [message("u0", "user", "Summarise each chapter.", None, 0)]
    for n in range(1, 13):
        payload["messages"].append(message(f"u{n}", "assistant", f"Chapter {n}: " + "words " * 80, f"u{n - 1}", n))
    payload["active_message_id"] = "u12"
    conversation = upsert(org, payload).conversation
    ids = conversation.active_path_ids
    fake_llm.set_default(answers_reply({key: answer("pass", ids) for key in checks.keys}))

    review = conversation_grade(conversation_id=conversation.pk, judge=llm_judge(fake_llm))

    requests = fake_llm.chat_requests()
    assert review.route == "pass" and review.stages == len(requests) > 1
    assert all(sum(len(tokenize(m["content"])) for m in r.body["messages"]) <= 3_000 for r in requests)
    budgets = [llm_judge(fake_llm).stage_budget(rubric="", criteria_number=1, checks=c, examples=()) for c in (
        CONVERSATION_DEFAULTS, checks)]  # fmt: skip
    assert budgets[1] < budgets[0]

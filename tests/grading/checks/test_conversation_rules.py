"""The deterministic rules on a conversation's checks (issue 39, item 3): what each kind of rule finds on a path, and
that what they find can only ever lower the judge's answer."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grading.checks.budget import ChecksOverBudget, checks_budget
from grading.checks.conversation_rules import MAX_FINDINGS, lowered, rules_run
from grading.checks.definitions import (
    UNKNOWN,
    AnswerKind,
    CheckDefinition,
    CheckSet,
    PatternRule,
    PhrasesRule,
    ToolCalledRule,
    ToolsAnsweredRule,
)
from grading.core.evidence import EvidenceMessage, Verdict

RANK = {Verdict.FAIL: 0, Verdict.UNKNOWN: 1, Verdict.PASS: 2}
WORDS = ["refund", "refunded", "policy", "card", "4111", "sorry", "done", "we", "promise"]


def call(call_id: str, name: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


PATH = [
    EvidenceMessage("m1", None, "user", "My card 4111 1111 1111 1111 was charged twice, refund it."),
    EvidenceMessage("m2", "m1", "assistant", None, tool_calls=[call("c1", "lookup_order"), call("c2", "refund")]),
    EvidenceMessage("m3", "m2", "tool", '{"status": "refunded"}', tool_call_id="c1"),
    EvidenceMessage("m4", "m3", "assistant", "Done: it was Refunded under the Refund Policy. We promise!"),
]


def ruled(*rules) -> dict:
    checks = CheckSet(checks=[CheckDefinition(key="k", name="K", question="Q?", rules=list(rules))])
    found = rules_run(checks, PATH)
    return {"sets": found["k"].sets, "findings": [f.as_json() for f in found["k"].findings]} if found else {}


def test_a_phrase_matches_whole_words_in_any_case_in_the_scopes_it_names():
    assert ruled(PhrasesRule(phrases=["refund policy", "promise"]))["findings"] == [
        {"rule": 0, "message_id": "m4", "text": "Refund Policy"},
        {"rule": 0, "message_id": "m4", "text": "promise"},
    ]
    assert ruled(PhrasesRule(phrases=["refund"], scopes=["assistant"]))["findings"] == [
        {"rule": 0, "message_id": "m4", "text": "Refund"}  # "Refunded" is another word
    ]
    assert ruled(PhrasesRule(phrases=["refund"], scopes=["user", "tool"]))["findings"] == [
        {"rule": 0, "message_id": "m1", "text": "refund"}
    ]


def test_a_pattern_reports_what_it_matched_in_each_message_of_its_scopes():
    card = PatternRule(pattern=r"\b(?:\d{4} ){3}\d{4}\b", scopes=["user", "assistant"], sets="unknown")
    assert ruled(card) == {
        "sets": "unknown",
        "findings": [{"rule": 0, "message_id": "m1", "text": "4111 1111 1111 1111"}],
    }
    assert ruled(PatternRule(pattern="refunded", case_sensitive=True)) == {}  # m4 says "Refunded"


def test_tool_rules_find_a_tool_called_or_never_called_and_a_call_left_unanswered():
    assert ruled(ToolCalledRule(tool="lookup_order")) == {}
    assert ruled(ToolCalledRule(tool="escalate"))["findings"] == [
        {"rule": 0, "message_id": None, "text": "escalate (never called)"}
    ]
    assert ruled(ToolCalledRule(tool="refund", must=False))["findings"] == [
        {"rule": 0, "message_id": "m2", "text": "refund"}
    ]
    assert ruled(ToolsAnsweredRule())["findings"] == [{"rule": 0, "message_id": "m2", "text": "refund (c2)"}]


def test_a_check_keeps_at_most_its_share_of_findings_however_long_the_path():
    path = [EvidenceMessage(f"m{n}", None, "assistant", "we promise") for n in range(3 * MAX_FINDINGS)]
    checks = CheckSet(checks=[CheckDefinition(key="k", name="K", question="Q?", rules=[PhrasesRule(phrases=["we"])])])
    assert len(rules_run(checks, path)["k"].findings) == MAX_FINDINGS


def test_rules_stop_at_the_checks_cpu_budget():
    checks = CheckSet(checks=[CheckDefinition(key="k", name="K", question="Q?", rules=[PhrasesRule(phrases=["x"])])])
    with pytest.raises(ChecksOverBudget), checks_budget(-1):
        rules_run(checks, PATH)


@st.composite
def checks_of_every_kind(draw) -> CheckDefinition:
    kind = draw(st.sampled_from(list(AnswerKind)))
    required = draw(st.booleans())
    rules = draw(
        st.lists(
            st.builds(
                PhrasesRule,
                phrases=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
                scopes=st.lists(st.sampled_from(["assistant", "tool", "user"]), min_size=1, max_size=3, unique=True),
                sets=st.sampled_from(["fail", "unknown"]),
            ),
            max_size=3,
        )
    )
    extra: dict = {}
    if kind == AnswerKind.CATEGORY:
        categories = ["a", "b", "c"]
        passing = draw(st.lists(st.sampled_from(categories), min_size=1 if required else 0, unique=True))
        extra = {"categories": categories, "passing": passing}
    elif kind == AnswerKind.SCORE:
        scale = draw(st.sampled_from([5, 10]))
        pass_from = draw(st.integers(1, scale)) if required else draw(st.none() | st.integers(1, scale))
        extra = {"scale": scale, "pass_from": pass_from}
    return CheckDefinition(key="k", name="K", question="Q?", kind=kind, required=required, rules=rules, **extra)


messages = st.lists(
    st.tuples(st.sampled_from(["assistant", "tool", "user"]), st.lists(st.sampled_from(WORDS), max_size=6)),
    max_size=6,
)


@settings(max_examples=400, deadline=None)
@given(check=checks_of_every_kind(), path=messages, data=st.data())
def test_a_rule_can_never_raise_the_judges_answer(check, path, data):
    evidence = [EvidenceMessage(f"m{n}", None, role, " ".join(words)) for n, (role, words) in enumerate(path)]
    judge_answer = data.draw(st.sampled_from(check.answers))
    judged = {"verdict": judge_answer, "message_ids": ["m0"], "rationale": "the judge's"}

    found = rules_run(CheckSet(checks=[check]), evidence)

    if "k" not in found:
        return  # no rule matched: the judge's answer stands as it is
    final = lowered(check, judged, found["k"])
    assert final["verdict"] in check.answers
    assert RANK[check.outcome(final["verdict"])] <= RANK[check.outcome(judge_answer)]
    if found["k"].sets == "fail" and check.kind == AnswerKind.VERDICT:
        assert final["verdict"] == "fail"  # a rule's fail beats any verdict of the judge
    assert final["findings"] and final["source"] == "rule"
    rule_ids = list(dict.fromkeys(f.message_id for f in found["k"].findings if f.message_id))
    assert final["message_ids"][: len(rule_ids)] == rule_ids  # the rule's messages come first
    assert final["rationale"].endswith("the judge's")


def test_a_rule_leaves_a_judges_fail_as_the_judge_gave_it():
    check = CheckDefinition(key="k", name="K", question="Q?", kind=AnswerKind.SCORE, pass_from=4)
    found = rules_run(CheckSet(checks=[check.model_copy(update={"rules": [PhrasesRule(phrases=["promise"])]})]), PATH)
    assert lowered(check, {"verdict": "2", "message_ids": [], "rationale": ""}, found["k"])["verdict"] == "2"
    assert lowered(check, {"verdict": UNKNOWN, "message_ids": [], "rationale": ""}, found["k"])["verdict"] == "3"


def test_a_rule_past_the_findings_kept_still_sets_its_check():
    """The first rule fills the check's findings; the second still matches, and its fail beats the first's unknown."""
    path = [EvidenceMessage(f"m{n}", None, "assistant", "we promise") for n in range(2 * MAX_FINDINGS)]
    rules = [PhrasesRule(phrases=["we"], sets="unknown"), PhrasesRule(phrases=["promise"], sets="fail", note="vows")]
    checks = CheckSet(checks=[CheckDefinition(key="k", name="K", question="Q?", rules=rules)])

    found = rules_run(checks, path)["k"]

    assert found.sets == "fail" and "vows" in found.notes
    assert len(found.findings) == MAX_FINDINGS

"""People's answers to a version's checks: which answers a decision, an answer or a label may give, and what they come
to for the item. Pure Python: the record (grading/reviews/services.py), the labels (grading/dashboard/labels.py) and the
queue's forms all read it, so a person, a labeller and an API client are refused alike and in the same words.

An answer is stored as the machine's is (grading/checks/definitions.py): a string, "pass"/"fail"/"unknown", one of a
category check's keys, or a score "1".."10"; "unknown" is an answer every check allows.
"""

from collections.abc import Mapping

from grading.checks.definitions import UNKNOWN, AnswerKind, CheckDefinition, CheckSet
from grading.core.evidence import Verdict


def answer_refusal(check: CheckDefinition, answer: object) -> str | None:
    """Why `answer` is not an answer `check` allows (naming those it does), or None."""
    if isinstance(answer, str) and answer in check.answers:
        return None
    return f"{answer!r} is not an answer of {check.key!r}: one of {', '.join(check.answers)}"


def unknown_check_refusal(check_set: CheckSet, key: str) -> str:
    return f"{key!r} is not a check of this criteria version: its checks are {', '.join(check_set.keys)}"


def answers_refusal(check_set: CheckSet, answers: Mapping[str, object]) -> str | None:
    """Why `answers` (check key -> answer) cannot be a person's answer to every check of `check_set`, or None: a key
    the version does not ask, an answer its check does not allow, a check left unanswered ("unknown" is an answer)."""
    for key, answer in answers.items():
        if key not in check_set.keys:
            return unknown_check_refusal(check_set, key)
        if refusal := answer_refusal(check_set[key], answer):
            return refusal
    if missing := [key for key in check_set.keys if key not in answers]:
        return f"give an answer for every check (unknown if the evidence leaves it open): missing {', '.join(missing)}"
    return None


def item_outcome(check_set: CheckSet, answers: Mapping[str, str]) -> Verdict:
    """What the answers come to for the item: fail if any required check's answer reads as a fail, else unknown if
    any required check's reads as unknown, else pass. A check that is not required never fails an item."""
    outcomes = {check.outcome(answers.get(check.key, UNKNOWN)) for check in check_set.checks if check.required}
    if Verdict.FAIL in outcomes:
        return Verdict.FAIL
    return Verdict.UNKNOWN if Verdict.UNKNOWN in outcomes else Verdict.PASS


def machine_outcome(check_set: CheckSet, answers: Mapping[str, str], *, judge_asked: bool = True) -> Verdict:
    """What the machine's answers come to for routing a conversation: unknown (people decide) if any required
    check's answer reads as unknown, even beside a fail, for a person may read the evidence either way; else fail
    if one reads as fail; else pass. (A person's decision, `item_outcome`, puts a fail first: nothing is left open
    for a machine to route.) A version that leaves the judge unasked once a rule fails a required check fails the
    item there: the checks nobody was asked are no doubt for people."""
    outcomes = {check.outcome(answers.get(check.key, UNKNOWN)) for check in check_set.checks if check.required}
    if Verdict.UNKNOWN in outcomes and (judge_asked or Verdict.FAIL not in outcomes):
        return Verdict.UNKNOWN
    return Verdict.FAIL if Verdict.FAIL in outcomes else Verdict.PASS


def answer_reads_as(check: CheckDefinition, answer: str) -> str:
    """How a page marks an answer: pass, fail or unknown as it reads for the item, or "" for a category or a score
    of a check that names no passing answers (counted and shown, never a pass or a fail)."""
    if answer != UNKNOWN and check.kind != AnswerKind.VERDICT and not (check.passing or check.pass_from is not None):
        return ""
    return check.outcome(answer).value

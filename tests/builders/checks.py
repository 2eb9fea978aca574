"""Criteria versions that ask checks of their own, and the judge's answers to them, scripted per check."""

from grading.checks.definitions import AnswerKind, CheckDefinition, CheckSet, PhrasesRule
from grading.models import CriteriaVersion, Org
from grading.reviews.versions import criteria_new_version, criteria_publish
from tests.fakes.openai_server import Reply, json_reply

CITES_POLICY = CheckDefinition(
    key="cites_policy",
    name="Cites the policy",
    question="Does the assistant name the refund policy that applies?",
    guidance={"pass": "It names the policy by its title.", "fail": "It grants or refuses with no policy named."},
)
INTENT = CheckDefinition(
    key="intent",
    name="Intent",
    question="What did the user come for?",
    kind=AnswerKind.CATEGORY,
    categories=["refund", "billing", "other"],
    passing=["refund", "billing"],
    guidance={"refund": "Money back for an order.", "other": "Anything else."},
)
HELPFUL = CheckDefinition(
    key="helpful",
    name="Helpful",
    question="How helpful was the assistant, 1 to 5?",
    kind=AnswerKind.SCORE,
    pass_from=3,
    guidance={"1": "No help at all.", "5": "Solved it in one reply."},
)
TONE = CheckDefinition(key="tone", name="Tone", question="Is the tone right for a child?", required=False)
NO_PROMISE = CheckDefinition(
    key="no_promise",
    name="No promise",
    question="Does the assistant avoid promising what it cannot do?",
    rules=[PhrasesRule(phrases=["refunded", "on its way"], note="promises a refund")],
)
CUSTOM_CHECKS = CheckSet(checks=[CITES_POLICY, INTENT, HELPFUL, TONE])


def version_with_checks(org: Org, kind: str, checks: CheckSet) -> CriteriaVersion:
    """A new version of `kind` asking `checks`, published (the active one)."""
    version = criteria_new_version(org=org, kind=kind)
    version.checks = checks.model_dump(mode="json")
    version.save(update_fields=["checks"])
    return criteria_publish(version=version)


def many_checks(count: int) -> CheckSet:
    """`count` verdict checks, c1 to c<count>."""
    return CheckSet(
        checks=[
            CheckDefinition(key=f"c{n}", name=f"Check {n}", question=f"Does the reply meet requirement {n}?")
            for n in range(1, count + 1)
        ]
    )


def answer(verdict: str, ids: list[str], rationale: str = "") -> dict:
    return {"verdict": verdict, "message_ids": ids, "rationale": rationale or f"judged {verdict}"}


def answers_reply(answers: dict[str, dict]) -> Reply:
    """The judge's reply: one answer per check key."""
    return json_reply(answers, usage={"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120})

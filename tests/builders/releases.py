"""An org running two releases of its agent at once: conversations carrying `release` and `environment` metadata,
graded by the production grader on the loopback judge, with grounding worse in the newer release. The org declares
both names as dimensions before anything is graded, so every review is filed under them."""

from dataclasses import dataclass
from datetime import timedelta

from grading.conversations.grader import conversation_grade
from grading.models import Org, Review
from tests.builders.conversations import llm_judge, upsert, verdicts_reply
from tests.builders.world import W48, conversation_payload

# (release, environment, grounded, complete) per conversation: 2.3 grounds 9 of 10 (one unknown on complete);
# 2.4 grounds 4 of 10 (two unknown on complete). `usable` passes throughout.
PLAN = (
    *[("2.3", "prod", "pass", "pass")] * 7,
    ("2.3", "staging", "pass", "pass"),
    ("2.3", "prod", "pass", "unknown"),
    ("2.3", "prod", "fail", "pass"),
    *[("2.4", "prod", "pass", "pass")] * 3,
    ("2.4", "staging", "pass", "unknown"),
    *[("2.4", "prod", "fail", "pass")] * 5,
    ("2.4", "staging", "fail", "unknown"),
)
DIMENSIONS = ["release", "environment"]


@dataclass
class Releases:
    org: Org
    reviews: list[Review]


def build_releases(org: Org, fake_llm, *, plan=PLAN, week=W48) -> Releases:
    """The plan's conversations in ISO week `week` (application billing), each graded once."""
    org.dimensions = DIMENSIONS
    org.save(update_fields=["dimensions"])
    judge = llm_judge(fake_llm)
    reviews = []
    for n, (release, environment, grounded, complete) in enumerate(plan):
        payload = conversation_payload(f"r{n}", "billing", week + timedelta(days=n % 5))
        payload["metadata"] = {"release": release, "environment": environment, "model": "gpt-x"}
        conversation = upsert(org, payload).conversation
        fake_llm.script(verdicts_reply(["m1", "m2"], grounded=grounded, complete=complete))
        reviews.append(conversation_grade(conversation_id=conversation.pk, judge=judge))
    return Releases(org, reviews)

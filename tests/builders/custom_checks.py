"""A conversation version that asks its own checks, one of each answer kind, and a queue item graded under it: shared by
the queue, double review, labels and worked-example tests of issue 39."""

from grading.checks.definitions import AnswerKind, CheckDefinition, CheckSet
from grading.models import CriteriaVersion, ItemKind, Review
from grading.reviews.versions import criteria_active
from tests.builders.conversations import PATH_IDS
from tests.builders.queue_items import conversation_item

# Admin-written text with markup in it: pages must show it as text.
POLICY_GUIDANCE = "Quotes the <b>refund policy</b> & names its section <script>alert(1)</script>"
SUPPORT_CHECKS = CheckSet(
    checks=[
        CheckDefinition(
            key="cites_policy",
            name="Cites the policy",
            question="Does the assistant cite the refund policy when it promises a refund?",
            guidance={"pass": POLICY_GUIDANCE, "fail": "Promises a refund with no policy named."},
        ),
        CheckDefinition(
            key="intent",
            name="Intent",
            question="What did the user come for?",
            kind=AnswerKind.CATEGORY,
            categories=["refund", "shipping", "other"],
            guidance={"refund": "Asks for money back."},
            required=False,
        ),
        CheckDefinition(
            key="helpful",
            name="Helpful",
            question="How helpful was the assistant, 1 to 5?",
            kind=AnswerKind.SCORE,
            pass_from=3,
            guidance={"1": "No help at all.", "5": "Solved it in one reply."},
        ),
    ]
)
# What the machine answered on the item: the queue form starts from it (unless blind).
MACHINE_SAID = {
    "cites_policy": {"verdict": "unknown", "message_ids": [PATH_IDS[-1]], "rationale": "No policy is named."},
    "intent": {"verdict": "refund", "message_ids": [PATH_IDS[0]], "rationale": "The user asks for a refund."},
    "helpful": {"verdict": "4", "message_ids": [PATH_IDS[-1]], "rationale": "The refund is done."},
}


def support_checks_ask(org, check_set: CheckSet = SUPPORT_CHECKS) -> CriteriaVersion:
    """The org's active conversation version (v1, seeded if need be) asks `check_set`."""
    version = criteria_active(org=org, kind=ItemKind.CONVERSATION)
    CriteriaVersion.objects.filter(pk=version.pk).update(checks=check_set.model_dump(mode="json"))
    version.refresh_from_db()
    return version


def custom_checks_item(org, external_id: str = "cv-1") -> Review:
    """A conversation waiting for people under a version that asks SUPPORT_CHECKS."""
    support_checks_ask(org)
    return conversation_item(org, external_id, checks=MACHINE_SAID)

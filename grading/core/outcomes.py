"""The names both sides use for what the machine and people decide: the verdicts, why an item went to people,
and what a person may decide (the checks are a criteria version's: grading/checks/definitions.py). Pure Python:
the judge, the gate, the queue pages and the forms all read these, and none of them should import another's module
for them."""

from grading.core.evidence import Verdict

VERDICTS = tuple(verdict.value for verdict in Verdict)  # pass, fail, unknown

# Why a review was routed to people (Review.reason when route is human).
BAND = "band"  # a draft's score in [threshold - band, threshold) with no remaining finding
JUDGE_CONTRADICTION = "judge_contradiction"  # the judge's pass verdict disagrees with its own score
SPREAD = "spread"  # the score's distribution straddles the threshold
UNKNOWN_CHECK = "unknown_check"  # a conversation check came back unknown
# The version has a certification target and the judge's confidence in an answer that decides the item stands below
# its certified threshold, or no threshold is certified yet (grading/certify/routing.py).
BELOW_CERTIFIED = "below_certified"
# A person approved the draft as they corrected it: the corrected revision waits for their approval to settle, which it
# does when the gate finds no hard finding in it, and otherwise waits for people (grading/drafts/corrections.py).
CORRECTED = "corrected"
HUMAN_REASONS = (BAND, UNKNOWN_CHECK, JUDGE_CONTRADICTION, SPREAD, BELOW_CERTIFIED, CORRECTED)
# Who sent an item to people beyond the machine's route and the audit sample (Review.sent): a person, from a list, the
# item's page or the API, with a reason the audit trail keeps (`review.send`). The machine's route and reason stay as
# it decided them: what it said is still compared with what people say. A criteria version's routing rules send with
# their own codes (grading/checks/routing.py).
SENT_BY_PERSON = "person"
# Why a review is an error without a judge's answer: the checks of the draft ran past their CPU budget.
CHECKS_BUDGET = "checks_budget"
# ... or its criteria version names a judge not configured (settings.JUDGES): no judge was called. Each grading pass
# tries it again, so the item is graded once the judge is configured again or another version is published.
JUDGE_UNKNOWN = "judge_unknown"

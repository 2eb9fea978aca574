"""Checks a criteria admin adds to a version, as the checks document the editor saves
(grading/checks/definitions.py)."""

from grading.models import CriteriaVersion

# A conversation check of the team's own: a verdict the judge answers, which a phrase in a reply fails outright.
CITES_POLICY = {
    "key": "cites_policy",
    "name": "Cites the policy",
    "question": "When the assistant tells the user what they are entitled to, does it cite the policy that says so?",
    "kind": "verdict",
    "guidance": {
        "pass": "Every entitlement stated names the policy it comes from.",
        "fail": "An entitlement is promised with no policy behind it.",
    },
    "required": True,
    "rules": [
        {
            "kind": "phrases",
            "phrases": ["guaranteed refund", "refund is guaranteed"],
            "scopes": ["assistant"],
            "sets": "fail",
            "note": "A refund is never guaranteed: the policy decides.",
        }
    ],
}

# A category check counted and shown, never routing an item.
INTENT = {
    "key": "intent",
    "name": "Intent",
    "question": "What did the user come for?",
    "kind": "category",
    "categories": ["refund", "order_status", "other"],
    "passing": [],
    "required": False,
}

HELPFUL = {
    "key": "helpful",
    "name": "Helpful",
    "question": "How helpful was the assistant, 1 to 5?",
    "kind": "score",
    "scale": 5,
    "pass_from": 3,
    "required": True,
}


def with_checks(version: CriteriaVersion, *added: dict, judge_after_rule_fail: bool = True) -> dict:
    """The version's checks document with `added` appended."""
    document = version.check_set().model_dump(mode="json")
    return document | {"checks": [*document["checks"], *added], "judge_after_rule_fail": judge_after_rule_fail}

"""The judge's probability that an item passes, as it said it: what the quality rate's interval corrects with people's
verdicts (grading/dashboard/certified.py, grading/certify/quality.py). Computed once, when the review is written,
and stored on it (`Review.pass_probability`), so the dashboard's counters can sum it (`certified` in
grading/figures/definitions.py) rather than a page computing it on every review of its scope.

A draft: the judge's confidence in its own verdict (`pass_fail`), turned toward a pass. A conversation: the product
over the version's required checks, in the version's order, of each one's probability of passing (its confidence
when its answer passes, one less it when it fails; 0.5 for an unknown or an answer the check does not have). An
answer without a confidence (no logprobs, or a rule's) counts as sure: 1 or 0 from what the machine said. None where
the judge could not grade the item (not scorable, an error): the audit sample does not draw those either.
"""

from __future__ import annotations

from collections.abc import Mapping

from grading.checks.definitions import CheckSet
from grading.core.evidence import Verdict
from grading.models import UNGRADED, ItemKind, Label, Review, Route


def item_pass_probability(
    *,
    kind: str,
    checks: CheckSet | None,
    route: str,
    judge_passed: bool | None,
    answers: object,
    confidences: object,
) -> float | None:
    """The judge's probability that the item passes (see the module), from the review's route, the judge's verdict
    (`judge_passed`, a draft's), its answers (`Review.checks`) and confidences, under `checks` (the review's
    version's; a draft's reads none)."""
    if route in UNGRADED:
        return None
    sure_of = confidences if isinstance(confidences, Mapping) else {}
    if kind == ItemKind.DRAFT:
        sure = _sure(sure_of, Label.PASS_FAIL)
        passed = judge_passed if judge_passed is not None else {Route.PASS: True, Route.FAIL: False}.get(route)
        return 0.5 if passed is None else sure if passed else 1.0 - sure
    said = answers if isinstance(answers, Mapping) else {}
    probability: float | None = None
    for check in checks.checks if checks is not None else ():
        if not check.required:
            continue
        entry = said.get(check.key)
        answer = entry.get("verdict") if isinstance(entry, Mapping) else None
        outcome = check.outcome(answer) if isinstance(answer, str) else Verdict.UNKNOWN
        factor = {Verdict.PASS: _sure(sure_of, check.key), Verdict.FAIL: 1.0 - _sure(sure_of, check.key)}.get(
            outcome, 0.5
        )
        probability = factor if probability is None else probability * factor
    return 1.0 if probability is None else probability


def review_pass_probability(review: Review) -> float | None:
    """`item_pass_probability` of a review as it is stored, under its own version's checks: for a review written
    without it (grading/reviews/services.py `pass_probabilities_backfill`)."""
    return item_pass_probability(
        kind=review.kind,
        checks=review.criteria_version.check_set() if review.kind == ItemKind.CONVERSATION else None,
        route=review.route,
        judge_passed=review.judge_passed,
        answers=review.checks,
        confidences=review.confidences,
    )


def _sure(confidences: Mapping, key: str) -> float:
    """The judge's confidence in its answer to `key`, 1 where it gave none."""
    value = confidences.get(key)
    return 1.0 if value is None else float(value)

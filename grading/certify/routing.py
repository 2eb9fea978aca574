"""Routing by a certificate: under a version with a certification target, the machine decides an item alone only
where the judge's confidence in every answer that decides it stands at or above the certified threshold; the others
go to people (`below_certified`).

What a certificate does not touch: facts (a draft's remaining finding, a rule that failed a required check) decide
as they always do, and a doubt the machine states itself (an unknown check, a judge contradicting its own score)
still goes to people. It takes the place of the draft's fixed marginal band and spread: a confident judge decides a
draft in the band; an unsure one sends a draft outside it to people. The audit sample draws its items whatever the
certificate says (grading/dashboard/sampling.py), so the certificate can be checked and renewed.
"""

from dataclasses import replace
from functools import lru_cache

from grading.certify.calibration import certified_keys
from grading.core.evidence import Verdict
from grading.core.outcomes import BAND, BELOW_CERTIFIED, SPREAD
from grading.models import DECIDED_ALONE, Certificate, CriteriaVersion, ItemKind, Label, Route
from grading.reviews.services import ReviewOutcome

# The machine's doubts a certificate may settle: a draft's position near the threshold.
_SETTLED_BY_CONFIDENCE = (BAND, SPREAD)


def certificate_for(version: CriteriaVersion, *, judge_key: str) -> Certificate | None:
    """The latest certificate of the version and the judge computed for the version's present target; None when
    none was (a changed target makes earlier certificates speak about another guarantee). Kept per process for a
    published version's revision, which a new certificate moves on (`certificate_compute`), as its target does."""
    if version.published_at is None:
        return _latest(version.pk, judge_key, version.certify_agreement, version.certify_confidence)
    return _latest_of_revision(
        version.pk, version.revision, judge_key, version.certify_agreement, version.certify_confidence
    )


def _latest(version_id: int, judge_key: str, agreement: float | None, confidence: float | None) -> Certificate | None:
    return (
        Certificate.objects.filter(
            criteria_version_id=version_id, judge_key=judge_key, agreement=agreement, confidence=confidence
        )
        .order_by("-computed_at", "-pk")
        .first()
    )


@lru_cache(maxsize=256)
def _latest_of_revision(
    version_id: int, revision: int, judge_key: str, agreement: float | None, confidence: float | None
) -> Certificate | None:
    return _latest(version_id, judge_key, agreement, confidence)


def certified_route(outcome: ReviewOutcome, *, version: CriteriaVersion, judge_key: str) -> ReviewOutcome:
    """The outcome routed under the version's certificate, naming the certificate it was routed under (to the machine
    or to people); unchanged when the version has no target or facts decided the item."""
    if version.certify_agreement is None or not _machine_may_decide(outcome):
        return outcome
    needed = _judged_keys(version, outcome)
    if needed is None:  # facts decided it
        return outcome
    certificate = certificate_for(version, judge_key=judge_key)
    if certificate is None:
        return replace(outcome, route=Route.HUMAN, reason=BELOW_CERTIFIED)
    if not covers(certificate, needed, outcome.confidences):
        return replace(outcome, route=Route.HUMAN, reason=BELOW_CERTIFIED, certificate_id=certificate.pk)
    route = outcome.route
    if route == Route.HUMAN:  # a draft in the band or the spread: its judge's verdict, now certified
        route = Route.PASS if outcome.judge_passed else Route.FAIL
    return replace(outcome, route=route, reason="", certificate_id=certificate.pk)


def covers(certificate: Certificate, keys: tuple[str, ...], confidences: dict[str, float]) -> bool:
    """Every key has a certified threshold and the judge's confidence stands at or above it."""
    for key in keys:
        threshold = certificate.checks.get(key, {}).get("threshold")
        confidence = confidences.get(key)
        if threshold is None or confidence is None or confidence < threshold:
            return False
    return True


def _machine_may_decide(outcome: ReviewOutcome) -> bool:
    if outcome.route in DECIDED_ALONE:
        return True
    return outcome.route == Route.HUMAN and outcome.reason in _SETTLED_BY_CONFIDENCE


def _judged_keys(version: CriteriaVersion, outcome: ReviewOutcome) -> tuple[str, ...] | None:
    """The certified keys whose answers came from the judge; None when a fact decided the item (a finding left on a
    draft, a rule failing a required check of a conversation), for then no confidence is needed."""
    if version.kind == ItemKind.DRAFT:
        return None if outcome.findings else (Label.PASS_FAIL,)
    checks = version.check_set()
    judged = []
    for key in certified_keys(version):
        answer = outcome.checks.get(key, {})
        if answer.get("source") == "rule":
            if checks[key].outcome(answer.get("verdict", "")) == Verdict.FAIL:
                return None
            continue
        judged.append(key)
    return tuple(judged)

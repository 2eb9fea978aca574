"""The calibration set of a criteria version and a judge: for each item people judged without the machine choosing
it, the judge's confidence in its answer and whether people agreed.

People's verdicts come from the blind audit sample's decisions (picked by a rule that ignores the machine) and from
imported labels, about the evidence the review read (`human_verdicts`). Never the items the machine sent to people:
they are the hard ones, and a threshold calibrated on them would say nothing about the items it decides alone.

What is certified is what routing asks: for a conversation each required check's outcome (pass or fail as the check
reads its answer), for a draft the judge's own pass verdict (`pass_fail`). A point needs both a confident machine
answer (not unknown, with a confidence) and a person's answer that is not unknown.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db.models import F

from grading.certify.thresholds import CalibrationPoint
from grading.checks.definitions import UNKNOWN, CheckSet
from grading.core.evidence import Verdict
from grading.core.sql_expressions import id_in
from grading.models import GRADED, CriteriaVersion, ItemKind, Label, Review
from grading.reviews.human import AUDIT, LABELS, HumanVerdict, human_verdicts


@dataclass(frozen=True)
class Calibration:
    points: dict[str, list[CalibrationPoint]]  # per certified key, in no order
    labels: int  # items with a person's verdict paired with a review of the version by the judge
    labelled_from: datetime | None
    labelled_to: datetime | None


def certified_keys(version: CriteriaVersion) -> tuple[str, ...]:
    """What routing asks to be certified: a conversation version's required checks, a draft's pass verdict."""
    if version.kind == ItemKind.DRAFT:
        return (Label.PASS_FAIL,)
    return tuple(check.key for check in version.check_set().checks if check.required)


def calibration(version: CriteriaVersion, *, judge_key: str) -> Calibration:
    """The version's calibration set under the judge: the audit sample's verdicts first, labels where an item has
    no audit decision."""
    verdicts = human_verdicts(org_id=version.org_id, kind=version.kind, source=LABELS)
    verdicts |= human_verdicts(org_id=version.org_id, kind=version.kind, source=AUDIT)
    keys = certified_keys(version)
    checks = version.check_set() if version.kind == ItemKind.CONVERSATION else None
    points: dict[str, list[CalibrationPoint]] = {key: [] for key in keys}
    times: list[datetime] = []
    for review in _reviews_read(version, judge_key=judge_key, verdicts=verdicts):
        said = verdicts[review["item"]]
        paired = False
        for key in keys:
            point = calibration_point(checks, key, review, said)
            if point is not None:
                points[key].append(point)
                paired = True
        if paired:
            times.append(said.at)
    return Calibration(
        points=points,
        labels=len(times),
        labelled_from=min(times, default=None),
        labelled_to=max(times, default=None),
    )


def _reviews_read(version: CriteriaVersion, *, judge_key: str, verdicts: dict[int, HumanVerdict]) -> Iterable[dict]:
    """Per item with a verdict, the latest review of the version by the judge that read the evidence the verdict is
    about and recorded its confidence."""
    field = version.kind  # the review's foreign key to its subject is named after the kind
    rows = (
        Review.objects.filter(criteria_version=version, judge_key=judge_key, route__in=GRADED)
        .exclude(confidences={})
        .filter(id_in(f"{field}_id", verdicts))
        .order_by(f"{field}_id", "-finished_at", "-pk")
        .values("fingerprint", "checks", "judge_passed", "confidences", item=F(f"{field}_id"))
    )
    seen: set[int] = set()
    for row in rows:
        if row["item"] in seen or row["fingerprint"] != verdicts[row["item"]].fingerprint:
            continue
        seen.add(row["item"])
        yield row


def calibration_point(checks: CheckSet | None, key: str, review: dict, said: HumanVerdict) -> CalibrationPoint | None:
    """The judge's confidence in its answer to `key` and whether the person's verdict agreed, or None when either
    side gave no answer to compare. `review`: its checks (each with its verdict), judge_passed and confidences;
    `checks`: the version's check set (None for a draft, whose one key is its verdict)."""
    confidence = review["confidences"].get(key)
    person = said.checks.get(key, UNKNOWN)
    if confidence is None or person == UNKNOWN:
        return None
    if key == Label.PASS_FAIL:
        if review["judge_passed"] is None:
            return None
        return CalibrationPoint(confidence=confidence, agrees=review["judge_passed"] == (person == Verdict.PASS))
    check = checks[key]
    machine = check.outcome(review["checks"].get(key, {}).get("verdict", UNKNOWN))
    human = check.outcome(person)
    if Verdict.UNKNOWN in (machine, human):
        return None
    return CalibrationPoint(confidence=confidence, agrees=machine == human)

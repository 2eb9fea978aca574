"""The quality rate with an honest interval, and what certificates decided: per kind, over the dashboard's scope.

The judge's count of the quality rate carries the judge's bias. The blind audit sample is drawn per week (and per
application, for conversations) by a fixed hash rule (grading/dashboard/sampling.py: the items with the smallest
sha256(salt + external id), a rule that reads neither the item nor what the machine said), so within each week it
is a random sample of the items, and people decide it blind. It draws as many items from a quiet week as from a busy
one, so each audited item is weighted by how many items of its week it stands for. Their verdicts correct the
judge's answers on every item into the PPI++ interval (grading/certify/quality.py, through ppi-python), valid
however biased the judge is; beside it, the interval from people's verdicts alone and how many audited labels the
judge's answers are worth (the effective-label gain). A week with no audited decision yet is outside the interval
(nothing says how the judge errs there): `reached` counts the items it speaks for.

The items are the scope's: the counting reviews of the kind's active criteria version in its weeks, within the
reader's reach and (conversations) of the application asked for, less those the judge could not grade (not scorable,
an error), which the audit sample does not draw either. An item passes for people when its audit decision approves
the draft, or when every required check of the conversation passes (`item_outcome`: an unknown is not a pass). The
judge's prediction of the same is `pass_probability`.

Read from the reviews, not the counters (a counter cannot hold a probability per item): the page loads it apart.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date

from django.db.models import Count, F, Q, QuerySet
from django.db.models.fields.json import KeyTextTransform, KeyTransform

from grading.certify.quality import QualityInterval, quality_interval
from grading.checks.answers import item_outcome
from grading.checks.definitions import UNKNOWN, CheckSet
from grading.core.evidence import Verdict
from grading.core.outcomes import BELOW_CERTIFIED
from grading.core.weeks import iso_week
from grading.dashboard.figures import Scope
from grading.models import CriteriaVersion, ItemKind, Label, Review, Route
from grading.reviews.human import AUDIT, human_verdicts

CERTIFIED = "certified"  # the API's name of these figures, beside the dashboard's sections
ALPHA = 0.05  # the intervals are at 95%
METHOD = "PPI++ (ppi-python), 95%; people alone: the central-limit interval of the audited verdicts"


@dataclass(frozen=True)
class KindQuality:
    """One kind's quality rate over the scope, and what was decided in its latest week."""

    kind: str
    criteria_version: int | None
    items: int  # the scope's items the judge graded
    judge_rate: float | None  # the mean of the judge's pass probabilities over them (None: no item)
    interval: QualityInterval | None  # None: fewer than 2 audited items
    audited: int  # of the items, those with people's audit verdict
    reached: int  # the items of the weeks (and applications) with an audited item: those the interval speaks for
    week: date
    decided_alone: int  # in `week`: routed pass or fail under a certificate
    to_people: int  # in `week`: routed to people, for any reason
    below_certified: int  # of those, because the judge's confidence stood below the certified threshold

    def as_json(self) -> dict:
        interval = self.interval
        return {
            "criteria_version": self.criteria_version,
            "items": self.items,
            "audited": self.audited,
            "reached": self.reached,
            "judge_rate": self.judge_rate,
            "interval": None
            if interval is None
            else {
                "method": METHOD,
                "judge_rate": interval.judge_rate,
                "estimate": interval.estimate,
                "low": interval.low,
                "high": interval.high,
                "people_low": interval.people_low,
                "people_high": interval.people_high,
                "effective_gain": interval.effective_gain,
            },
            "week": iso_week(self.week),
            "decided_alone_under_certificate": self.decided_alone,
            "to_people": self.to_people,
            "below_certified": self.below_certified,
        }


def certified_figures(scope: Scope) -> dict:
    """Per kind, JSON-ready: the scope's quality rate as the judge counts it, its PPI++ and people-only intervals,
    and how many items of the scope's latest week were decided alone under a certificate and how many went to
    people."""
    return {kind: kind_quality(scope, kind).as_json() for kind in (ItemKind.CONVERSATION, ItemKind.DRAFT)}


def kind_quality(scope: Scope, kind: str) -> KindQuality:
    active = CriteriaVersion.objects.filter(org=scope.org, kind=kind, is_active=True).first()
    reviews = _in_scope(scope, kind, active)
    checks = active.check_set() if active is not None and kind == ItemKind.CONVERSATION else None
    people = _audit_passes(scope, kind, checks)
    cells: dict[tuple[str, date], _Cell] = defaultdict(_Cell)
    required = required_outcomes(checks)
    for row in _rows(reviews.exclude(route__in=(Route.NOT_SCORABLE, Route.ERROR)), kind, required):
        cell = cells[(row["application"] if kind == ItemKind.CONVERSATION else "", row["week"])]
        p = pass_probability(kind, row, required)
        passed = people.get(row["item"])
        if passed is not None and passed[0] == row["fingerprint"]:
            cell.people.append(1.0 if passed[1] else 0.0)
            cell.audited.append(p)
        else:
            cell.others.append(p)
    every = [p for cell in cells.values() for p in (*cell.audited, *cell.others)]
    reached = [cell for cell in cells.values() if cell.people]
    latest = reviews.filter(week=scope.until).aggregate(
        decided_alone=Count("pk", filter=Q(route__in=(Route.PASS, Route.FAIL), certificate__isnull=False)),
        to_people=Count("pk", filter=Q(route=Route.HUMAN)),
        below_certified=Count("pk", filter=Q(route=Route.HUMAN, reason=BELOW_CERTIFIED)),
    )
    return KindQuality(
        kind=kind,
        criteria_version=active.number if active is not None else None,
        items=len(every),
        judge_rate=sum(every) / len(every) if every else None,
        interval=_interval(reached),
        audited=sum(len(cell.people) for cell in reached),
        reached=sum(cell.size for cell in reached),
        week=scope.until,
        **latest,
    )


@dataclass
class _Cell:
    """One week's items (of one application, for conversations): the audit sample draws each apart."""

    people: list[float] = field(default_factory=list)  # per audited item, 1.0 when people passed it
    audited: list[float] = field(default_factory=list)  # the judge's pass probability on the same items
    others: list[float] = field(default_factory=list)  # on the items people did not audit

    @property
    def size(self) -> int:
        return len(self.audited) + len(self.others)


def _interval(reached: list[_Cell]) -> QualityInterval | None:
    """The interval over the cells the audit sample reached, each item weighted by how many items of its cell it
    stands for: the sample draws as many from a quiet week as from a busy one."""
    people, labelled, unlabelled, weights, unlabelled_weights = [], [], [], [], []
    for cell in reached:
        people += cell.people
        labelled += cell.audited
        unlabelled += cell.others
        weights += [cell.size / len(cell.audited)] * len(cell.audited)
        if cell.others:  # a week people audited whole has no item left to stand for
            unlabelled_weights += [cell.size / len(cell.others)] * len(cell.others)
    return quality_interval(
        people=people,
        judge_labelled=labelled,
        judge_unlabelled=unlabelled,
        alpha=ALPHA,
        weights=weights,
        unlabelled_weights=unlabelled_weights,
    )


Outcomes = list[tuple[str, dict[str, Verdict]]]


def required_outcomes(checks: CheckSet | None) -> Outcomes:
    """Each required check's key, with what each of its answers reads as (`CheckDefinition.outcome`): asked once per
    check and answer, not once per item."""
    required = [check for check in checks.checks if check.required] if checks is not None else []
    return [(check.key, {answer: check.outcome(answer) for answer in check.answers}) for check in required]


def pass_probability(kind: str, row: dict, required: Outcomes) -> float:
    """The judge's probability that the item passes. A draft: its confidence in its own verdict (`pass_fail`), turned
    toward a pass. A conversation: the product over the required checks (`required_outcomes`) of each one's
    probability of passing (its confidence when its answer passes, one less it when it fails; 0.5 for an unknown or
    an answer the check does not have). An answer without a confidence (no logprobs, or a rule's) counts as sure: 1
    or 0 from what the machine said."""
    confidences = row["confidences"] or {}
    if kind == ItemKind.DRAFT:
        passed = row["judge_passed"]
        if passed is None:  # the judge gave no verdict: the route is the machine's
            passed = {Route.PASS: True, Route.FAIL: False}.get(row["route"])
            if passed is None:
                return 0.5
        confidence = confidences.get(Label.PASS_FAIL)
        sure = 1.0 if confidence is None else float(confidence)
        return sure if passed else 1.0 - sure
    probability = 1.0
    for key, outcomes in required:
        outcome = outcomes.get(row["answers"].get(key) or UNKNOWN, Verdict.UNKNOWN)
        if outcome == Verdict.UNKNOWN:
            probability *= 0.5
            continue
        confidence = confidences.get(key)
        sure = 1.0 if confidence is None else float(confidence)
        probability *= sure if outcome == Verdict.PASS else 1.0 - sure
    return probability


def _in_scope(scope: Scope, kind: str, active: CriteriaVersion | None) -> QuerySet[Review]:
    """The scope's counting reviews of the kind's active version: the reviews its counters count."""
    if active is None:
        return Review.objects.none()
    reviews = Review.objects.counting().filter(
        org=scope.org, kind=kind, criteria_version=active, week__gte=scope.since, week__lte=scope.until
    )
    if scope.reach is not None:
        reviews = reviews.filter(scope.reach.rows())
    if kind == ItemKind.CONVERSATION and scope.application:
        reviews = reviews.filter(application=scope.application)
    if scope.slice:
        reviews = reviews.filter(slice__contains=scope.slice_filter)
    return reviews


def _rows(reviews: QuerySet[Review], kind: str, required: Outcomes):
    """What the prediction reads of each review, extracted by the database: for a conversation the required checks'
    answers (a review's whole checks hold rationales), and the confidences the prediction reads (those checks', or a
    draft's in its verdict) rather than every one as JSON."""
    keys = [key for key, _ in required]
    answers = {f"answer_{key}": KeyTextTransform("verdict", KeyTransform(key, "checks")) for key in keys}
    said = keys if kind == ItemKind.CONVERSATION else [Label.PASS_FAIL]
    confidences = {f"confidence_{key}": KeyTextTransform(key, "confidences") for key in said}
    columns = ("fingerprint", "judge_passed", "route", "application", "week")
    for row in reviews.values(*columns, item=F(f"{kind}_id"), **answers, **confidences).iterator(chunk_size=5000):
        row["answers"] = {key: row.pop(f"answer_{key}") for key in keys}
        row["confidences"] = {
            key: confidence for key in said if (confidence := row.pop(f"confidence_{key}")) is not None
        }
        yield row


def _audit_passes(scope: Scope, kind: str, checks: CheckSet | None) -> dict[int, tuple[str, bool]]:
    """Per item with an audit decision on its present evidence: that evidence's fingerprint, and whether people
    passed the item."""
    out = {}
    for item, said in human_verdicts(org_id=scope.org.pk, kind=kind, source=AUDIT).items():
        if kind == ItemKind.DRAFT:
            passed = said.checks.get(Label.PASS_FAIL) == Verdict.PASS
        else:
            passed = checks is not None and item_outcome(checks, said.checks) == Verdict.PASS
        out[item] = (said.fingerprint, passed)
    return out

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
The database computes the judge's probability on each review (`pass_probability`) and sums each cell; only the
audited items are read one by one (people's verdict on them is matched here), and the interval is computed from the
cells' sums (`quality_interval_of_cells`), never from a million items in Python.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import date

from django.db.models import (
    BooleanField,
    Case,
    Expression,
    ExpressionWrapper,
    FloatField,
    Q,
    QuerySet,
    Value,
    When,
)
from django.db.models.fields.json import KeyTextTransform, KeyTransform
from django.db.models.functions import Cast, Coalesce
from django.db.models.lookups import In

from grading.certify.quality import CellSums, QualityInterval, quality_interval_of_cells
from grading.checks.answers import item_outcome
from grading.checks.definitions import CheckSet
from grading.core.evidence import Verdict
from grading.core.outcomes import BELOW_CERTIFIED
from grading.core.sql_expressions import id_in, sums_by
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
    probability = pass_probability(kind, required_outcomes(checks))
    cell = ("application", "week") if kind == ItemKind.CONVERSATION else ("week",)  # the audit sample's draw
    totals = _cell_totals(reviews, cell, probability, until=scope.until)
    audited: dict[tuple, list[tuple[float, float]]] = defaultdict(list)  # per cell: (y, p) of each audited item
    if people:
        rows = reviews.filter(_GRADED, id_in(f"{kind}_id", people)).values_list(f"{kind}_id", "fingerprint", *cell)
        for item, fingerprint, *key, p in rows.annotate(p=probability).order_by():
            passed = people[item]
            if passed[0] == fingerprint:
                audited[tuple(key)].append((1.0 if passed[1] else 0.0, p))
    cells = [_cell_sums(row, audited.get(tuple(row[column] for column in cell), [])) for row in totals if row["items"]]
    reached = [sums for sums in cells if sums.audited]
    items = sum(row["items"] for row in totals)
    return KindQuality(
        kind=kind,
        criteria_version=active.number if active is not None else None,
        items=items,
        judge_rate=sum(row["judge"] for row in totals if row["items"]) / items if items else None,
        interval=quality_interval_of_cells(reached, alpha=ALPHA),
        audited=sum(sums.audited for sums in reached),
        reached=sum(sums.size for sums in reached),
        week=scope.until,
        **{name: sum(row[name] for row in totals) for name in _LATEST},
    )


_GRADED = ~Q(route__in=(Route.NOT_SCORABLE, Route.ERROR))  # the judge could not grade those: the sample skips them
_LATEST = ("decided_alone", "to_people", "below_certified")  # KindQuality's counts of the latest week


def _cell_totals(reviews: QuerySet[Review], cell: tuple[str, ...], probability: Expression, *, until: date) -> list:
    """Per cell: how many of its items the judge graded, the sum of their pass probabilities and of their squares,
    the least and the greatest; and of its reviews in the week `until`, those decided alone under a certificate,
    those routed to people, and of those the ones below the certified threshold."""
    latest = Q(week=until)
    flags = {
        "decided_alone": latest & Q(route__in=(Route.PASS, Route.FAIL), certificate__isnull=False),
        "to_people": latest & Q(route=Route.HUMAN),
        "below_certified": latest & Q(route=Route.HUMAN, reason=BELOW_CERTIFIED),
    }
    rows = reviews.annotate(
        p=Case(When(_GRADED, then=probability), default=None, output_field=FloatField()),
        **{name: ExpressionWrapper(flag, output_field=BooleanField()) for name, flag in flags.items()},
    ).values(*cell, "p", *flags)
    names = (*cell, "items", "judge", "squares", "lowest", "highest", *_LATEST)
    sums = sums_by(rows, by=cell, value="p", flags=_LATEST)  # p computed once a row (grading/core/sql_expressions.py)
    return [dict(zip(names, row, strict=True)) for row in sums]


def _cell_sums(totals: dict, audited: list[tuple[float, float]]) -> CellSums:
    """One week's items (of one application, for conversations), as the sums the interval reads: the database's
    over all of them, less the audited items' (read one by one: people's verdict is matched in Python) for the
    others'."""
    judge = sum(p for _, p in audited)
    squares = sum(p * p for _, p in audited)
    return CellSums(
        audited=len(audited),
        people=sum(y for y, _ in audited),
        people_squares=sum(y * y for y, _ in audited),
        judge_audited=judge,
        judge_audited_squares=squares,
        people_judge=sum(y * p for y, p in audited),
        others=totals["items"] - len(audited),
        judge_others=totals["judge"] - judge,
        judge_others_squares=totals["squares"] - squares,
        lowest=totals["lowest"],
        highest=totals["highest"],
    )


Outcomes = list[tuple[str, dict[str, Verdict]]]


def required_outcomes(checks: CheckSet | None) -> Outcomes:
    """Each required check's key, with what each of its answers reads as (`CheckDefinition.outcome`): asked once per
    check and answer, not once per item."""
    required = [check for check in checks.checks if check.required] if checks is not None else []
    return [(check.key, {answer: check.outcome(answer) for answer in check.answers}) for check in required]


def pass_probability(kind: str, required: Outcomes) -> Expression:
    """The judge's probability that the item passes, computed by the database on each review. A draft: its
    confidence in its own verdict (`pass_fail`), turned toward a pass. A conversation: the product over the required
    checks (`required_outcomes`) of each one's probability of passing (its confidence when its answer passes, one
    less it when it fails; 0.5 for an unknown or an answer the check does not have). An answer without a confidence
    (no logprobs, or a rule's) counts as sure: 1 or 0 from what the machine said."""
    if kind == ItemKind.DRAFT:
        sure = _sure(Label.PASS_FAIL)
        return Case(
            When(judge_passed=True, then=sure),
            When(judge_passed=False, then=_ONE - sure),
            # the judge gave no verdict: the route is the machine's
            When(route=Route.PASS, then=sure),
            When(route=Route.FAIL, then=_ONE - sure),
            default=_HALF,
            output_field=FloatField(),
        )
    probability: Expression = _ONE
    for key, outcomes in required:
        answer = KeyTextTransform("verdict", KeyTransform(key, "checks"))
        sure = _sure(key)
        said = [
            When(In(answer, answers), then=value)
            for verdict, value in ((Verdict.PASS, sure), (Verdict.FAIL, _ONE - sure))
            if (answers := [answer for answer, outcome in outcomes.items() if outcome == verdict])
        ]
        factor = Case(*said, default=_HALF, output_field=FloatField()) if said else _HALF
        probability = factor if probability is _ONE else ExpressionWrapper(probability * factor, FloatField())
    return probability


_ONE, _HALF = Value(1.0, output_field=FloatField()), Value(0.5, output_field=FloatField())


def _sure(key: str) -> Expression:
    """The judge's confidence in its answer to `key`, 1 where it gave none."""
    return Coalesce(Cast(KeyTextTransform(key, "confidences"), FloatField()), _ONE)


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

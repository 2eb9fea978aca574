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
an error), which the audit sample does not draw either. An item passes for people when the latest decision on an
audit review of its present evidence approves the draft or passes the conversation (its outcome under the checks of
the version that review was graded by: every required check passes, an unknown is not a pass). The judge's
prediction of the same is its pass probability (grading/judge/pass_probability.py).

Read from the counters alone (grading/figures/definitions.py, `certified`): per cell, the items the judge graded and
the sums of its pass probabilities, stored on each review when it was written (`Review.pass_probability`) and summed
in fixed point (q = floor(p * 2**32), `FixedPoint`: Σq, and Σq² exactly), so a figure differs from the sum of the
floats by less than 2**-32 an item; the same sums over the audited items, and how many of them people passed with
their Σq. The item's counting review carries its evidence's audit verdict (`audit_passed_sql`): a decision is
written on it, and a re-grade of the same evidence reads it when it is written. The interval is computed from the
cells' sums (`quality_interval_of_cells`), never from a million items, nor read from the audited ones.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import date

from grading.certify.quality import CellSums, QualityInterval, quality_interval_of_cells
from grading.core.outcomes import BELOW_CERTIFIED
from grading.core.weeks import iso_week
from grading.dashboard.figures import Scope
from grading.figures.definitions import AUDITED, CERTIFIED, DECIDED_ALONE, ITEMS, PASSED
from grading.figures.expressions import FIXED_POINT_BITS, fixed_point_squares
from grading.models import CriteriaVersion, ItemKind, Route
from grading.reviews.rollups import Key, scope_counters

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
    active = {cv.kind: cv for cv in CriteriaVersion.objects.filter(org=scope.org, is_active=True)}
    read = scope_counters(
        org_id=scope.org.pk,
        since=scope.since,
        until=scope.until,
        slice_key=scope.slice,
        by_week=_METRICS,
        metrics=_METRICS,
    )
    return {
        kind: kind_quality(scope, kind, active.get(kind), read.rows).as_json()
        for kind in (ItemKind.CONVERSATION, ItemKind.DRAFT)
    }


def kind_quality(scope: Scope, kind: str, active: CriteriaVersion | None, counters: dict[Key, int]) -> KindQuality:
    """One kind's figures from the scope's `counters` (the certified and route counters, week by week) of its active
    version."""
    cells: dict[tuple[str, date], Counter] = defaultdict(Counter)  # per (application, week): the certified sums
    latest: Counter = Counter()  # the week `until`'s counts (KindQuality's last three)
    for (_, of_kind, criteria_id, application, week, metric, key1, key2), value in counters.items():
        if of_kind != kind or active is None or criteria_id != active.pk or not scope.covers(kind, application):
            continue
        if metric == CERTIFIED and key1 != DECIDED_ALONE:
            cells[(application, week)][(key2, key1)] += value
        elif week == scope.until:
            if metric == CERTIFIED:
                latest[DECIDED_ALONE] += value
            elif key1 == Route.HUMAN:
                latest["to_people"] += value
                if key2 == BELOW_CERTIFIED:
                    latest["below_certified"] += value
    sums = [_cell_sums(totals) for totals in cells.values() if totals[("", ITEMS)]]
    reached = [cell for cell in sums if cell.audited]
    items = sum(totals[("", ITEMS)] for totals in cells.values())
    return KindQuality(
        kind=kind,
        criteria_version=active.number if active is not None else None,
        items=items,
        judge_rate=sum(totals[("", "q")] for totals in cells.values()) / _SCALE / items if items else None,
        interval=quality_interval_of_cells(reached, alpha=ALPHA),
        audited=sum(cell.audited for cell in reached),
        reached=sum(cell.size for cell in reached),
        week=scope.until,
        decided_alone=latest[DECIDED_ALONE],
        to_people=latest["to_people"],
        below_certified=latest["below_certified"],
    )


_METRICS = (CERTIFIED, "route")  # with what the counting reviews were routed (grading/figures/definitions.py)
_SCALE = 1 << FIXED_POINT_BITS


def _cell_sums(totals: Counter) -> CellSums:
    """One week's items (of one application, for conversations), as the sums the interval reads, from its counters:
    over all of them ("", the part), over the audited ones (AUDITED) and the audited ones people passed (PASSED), so
    the others' are the differences. The judge's sums are exact in fixed point and divided once. Its least and
    greatest p: the one value every item has where the cell's Σq² is n times its mean q squared (then every q is the
    same), else 0 and 1, bounds enough for the one question the interval asks of them (whether the judge said the
    same of every item)."""
    items, q = totals[("", ITEMS)], totals[("", "q")]
    squares = _squares(totals, "")
    audited, audited_q, audited_squares = totals[(AUDITED, ITEMS)], totals[(AUDITED, "q")], _squares(totals, AUDITED)
    passed = totals[(PASSED, ITEMS)]
    same = items * squares == q * q
    return CellSums(
        audited=audited,
        people=passed,
        people_squares=passed,  # y is 0 or 1
        judge_audited=audited_q / _SCALE,
        judge_audited_squares=audited_squares / _SCALE**2,
        people_judge=totals[(PASSED, "q")] / _SCALE,
        others=items - audited,
        judge_others=(q - audited_q) / _SCALE,
        judge_others_squares=(squares - audited_squares) / _SCALE**2,
        lowest=q // items / _SCALE if same else 0.0,
        highest=q // items / _SCALE if same else 1.0,
    )


def _squares(totals: Counter, key2: str) -> int:
    return fixed_point_squares(totals[(key2, "hi2")], totals[(key2, "hilo")], totals[(key2, "lo2")])

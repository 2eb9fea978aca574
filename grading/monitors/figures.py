"""What each monitor figure counts, over the reviews of its slice in its window, giving the figure and the n behind
it: one query for one monitor (`monitor_figure`), or for a run's monitors one query per window they share
(`monitors_figures`, the same counts grouped by slice); and the same selection as a list of reviews (the items behind
the number).

The rolling window is hours, so the week-filed rollups cannot answer it: these read the reviews, through the
indexes every monitor's filter leads with (org, and finished_at or due_at within the org's rows). Each figure:

- check_pass: of the counting conversation reviews graded in the window whose machine answer to the check is pass
  or fail, the share that passed (n: those);
- unknown_share: of those answering the check pass, fail or unknown, the share unknown;
- item_pass: of the counting reviews graded in the window with a verdict, the share that passed; the verdict is
  people's where they decided (approved or pass; rejected, sent back or fail), else the machine's route (pass or
  fail); an item waiting for people has none yet;
- agreement: of the counting reviews people decided in the window (by the time of the decision) that the machine
  gave a verdict too, the share where they agree: on the check when one is named (conversations), else on the item
  (a draft the machine was unsure of counts with the judge's own lean, as the dashboard counts it);
- spend: the judge tokens (prompt and completion) of every review graded in the window, whatever it counts as now
  (n: the reviews that called the judge);
- errors: of every review graded in the window (trials aside), the share that ended in an error;
- overdue: the items waiting for people now whose due time has passed (grading's one rule, `overdue`), of the items
  waiting (n); the window does not apply.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.db.models import Aggregate, BigIntegerField, Count, F, Q, QuerySet, Sum
from django.db.models.fields.json import KeyTextTransform, KeyTransform
from django.db.models.functions import Cast, Coalesce

from grading.models import (
    COUNTING_STATES,
    GRADED,
    HUMAN_FAIL,
    HUMAN_PASS,
    ItemKind,
    Monitor,
    MonitorFigure,
    Review,
    ReviewState,
    Route,
)
from grading.models.reviews import in_state_condition

PASS, FAIL, UNKNOWN = "pass", "fail", "unknown"
TOKENS = Coalesce(Cast(KeyTextTransform("prompt_tokens", "usage"), BigIntegerField()), 0) + Coalesce(
    Cast(KeyTextTransform("completion_tokens", "usage"), BigIntegerField()), 0
)


@dataclass(frozen=True)
class Figure:
    value: float | None  # None: nothing counted (n is 0)
    n: int


def slice_reviews(monitor: Monitor) -> QuerySet[Review]:
    """The reviews of the monitor's org, kind and slice (application, one metadata name = value), any time, any
    state."""
    reviews = Review.objects.filter(org_id=monitor.org_id, kind=monitor.kind)
    if monitor.application:
        reviews = reviews.filter(application=monitor.application)
    if monitor.metadata_name:
        item = "draft" if monitor.kind == ItemKind.DRAFT else "conversation"
        reviews = reviews.filter(**{f"{item}__metadata__contains": {monitor.metadata_name: monitor.metadata_value}})
    return reviews


def _graded_in(monitor: Monitor, at: datetime) -> QuerySet[Review]:
    return (
        slice_reviews(monitor)
        .filter(finished_at__gt=at - timedelta(hours=monitor.window_hours), finished_at__lte=at)
        .exclude(state=ReviewState.TRIAL)
    )


def _check_verdict(check: str) -> KeyTextTransform:
    return KeyTextTransform("verdict", KeyTransform(check, "checks"))


def _human_check(check: str) -> KeyTextTransform:
    return KeyTextTransform(check, "decision__checks")


def _counted(monitor: Monitor, at: datetime) -> tuple[QuerySet[Review], Q]:
    """The reviews a figure reads (its population, n) and the condition of those it counts as its numerator (for
    spend: None, the figure is a sum)."""
    figure = monitor.figure
    if figure == MonitorFigure.OVERDUE:
        waiting = slice_reviews(monitor).waiting()
        return waiting, Q(due_at__lte=at)
    if figure == MonitorFigure.SPEND:
        return _graded_in(monitor, at).filter(usage__has_key="prompt_tokens"), Q()
    if figure == MonitorFigure.ERRORS:
        return _graded_in(monitor, at), Q(route=Route.ERROR)
    if figure == MonitorFigure.AGREEMENT:
        return _agreement(monitor, at)
    counting = _graded_in(monitor, at).counting()
    if figure == MonitorFigure.CHECK_PASS:
        verdict = _check_verdict(monitor.check_key)
        return counting.filter(route__in=GRADED).alias(v=verdict).filter(v__in=(PASS, FAIL)), Q(v=PASS)
    if figure == MonitorFigure.UNKNOWN_SHARE:
        verdict = _check_verdict(monitor.check_key)
        return counting.filter(route__in=GRADED).alias(v=verdict).filter(v__in=(PASS, FAIL, UNKNOWN)), Q(v=UNKNOWN)
    # item_pass: people's verdict where they decided, else the machine's route
    human_pass = Q(decision__outcome__in=HUMAN_PASS)
    human_fail = Q(decision__outcome__in=HUMAN_FAIL)
    undecided = Q(decision__isnull=True)
    passed = human_pass | (undecided & Q(route=Route.PASS))
    failed = human_fail | (undecided & Q(route=Route.FAIL))
    return counting.filter(passed | failed), passed


def _agreement(monitor: Monitor, at: datetime) -> tuple[QuerySet[Review], Q]:
    decided = (
        slice_reviews(monitor)
        .counting()
        .filter(
            decision__decided_at__gt=at - timedelta(hours=monitor.window_hours),
            decision__decided_at__lte=at,
            route__in=GRADED,
        )
    )
    if monitor.check_key:
        machine, human = _check_verdict(monitor.check_key), _human_check(monitor.check_key)
        decided = decided.annotate(m=machine, h=human).filter(m__in=(PASS, FAIL), h__in=(PASS, FAIL))
        return decided, Q(m=F("h"))
    machine_pass = Q(route=Route.PASS)
    machine_fail = Q(route=Route.FAIL)
    if monitor.kind == ItemKind.DRAFT:  # unsure: the judge's own lean, as the dashboard reads it
        machine_pass |= Q(route=Route.HUMAN, judge_passed=True)
        machine_fail |= Q(route=Route.HUMAN, judge_passed=False)
    human_pass, human_fail = Q(decision__outcome__in=HUMAN_PASS), Q(decision__outcome__in=HUMAN_FAIL)
    decided = decided.filter((machine_pass | machine_fail) & (human_pass | human_fail))
    return decided, (machine_pass & human_pass) | (machine_fail & human_fail)


def monitor_figure(monitor: Monitor, at: datetime) -> Figure:
    """The monitor's figure at `at` and its n, in one query."""
    population, counted = _counted(monitor, at)
    if monitor.figure == MonitorFigure.SPEND:
        sums = population.aggregate(n=Count("pk"), total=Sum(TOKENS))
        return Figure(float(sums["total"] or 0) if sums["n"] else None, sums["n"])
    sums = population.aggregate(n=Count("pk"), hits=Count("pk", filter=counted))
    n = sums["n"]
    if monitor.figure == MonitorFigure.OVERDUE:
        return Figure(float(sums["hits"]), n)
    return Figure(sums["hits"] / n if n else None, n)


# --- a run's figures: one scan per window shared ----------------------------------------------------------------

# What a figure depends on: two monitors with the same key have the same figure at the same moment.
FigureKey = tuple[int, str, str, str, int, str, str, str]
# Figures over the reviews graded in the window; agreement reads those decided in it; overdue reads no window.
OVER_THE_GRADED = {
    MonitorFigure.CHECK_PASS,
    MonitorFigure.UNKNOWN_SHARE,
    MonitorFigure.ITEM_PASS,
    MonitorFigure.SPEND,
    MonitorFigure.ERRORS,
}


def figure_key(monitor: Monitor) -> FigureKey:
    return (
        monitor.org_id,
        monitor.figure,
        monitor.kind,
        monitor.check_key,
        monitor.window_hours,
        monitor.application,
        monitor.metadata_name,
        monitor.metadata_value,
    )


def monitors_figures(monitors: Iterable[Monitor], at: datetime) -> dict[FigureKey, Figure]:
    """Every monitor's figure at `at`, equal to `monitor_figure`'s, by one query per (org, kind, what the figure
    reads, window, metadata name) rather than one per monitor: the query counts each of its monitors' numerators and
    populations as filtered aggregates, grouped by application and the metadata name's value, and each monitor sums
    the groups of its slice. So a run costs as many scans of a window as there are windows, not monitors."""
    scans: dict[tuple[int, str, str, int, str], list[Monitor]] = defaultdict(list)
    for monitor in monitors:
        reads = "graded" if monitor.figure in OVER_THE_GRADED else monitor.figure
        window = 0 if monitor.figure == MonitorFigure.OVERDUE else monitor.window_hours
        scans[(monitor.org_id, monitor.kind, reads, window, monitor.metadata_name)].append(monitor)
    figures: dict[FigureKey, Figure] = {}
    for (_, _, reads, window, name), members in scans.items():
        figures |= _scan(members, reads=reads, window_hours=window, metadata_name=name, at=at)
    return figures


def _scan(
    members: list[Monitor], *, reads: str, window_hours: int, metadata_name: str, at: datetime
) -> dict[FigureKey, Figure]:
    first = members[0]
    reviews = Review.objects.filter(org_id=first.org_id, kind=first.kind)
    if reads == "graded":
        start = at - timedelta(hours=window_hours)
        reviews = reviews.filter(finished_at__gt=start, finished_at__lte=at).exclude(state=ReviewState.TRIAL)
    elif reads == MonitorFigure.AGREEMENT:
        reviews = reviews.counting().filter(
            decision__decided_at__gt=at - timedelta(hours=window_hours), decision__decided_at__lte=at, route__in=GRADED
        )
    else:
        reviews = reviews.waiting()
    if all(monitor.application for monitor in members):
        reviews = reviews.filter(application__in={monitor.application for monitor in members})
    groups = ["application"]
    if metadata_name:
        item = "draft" if first.kind == ItemKind.DRAFT else "conversation"
        sliced = Q()
        for value in sorted({monitor.metadata_value for monitor in members}):
            sliced |= Q(**{f"{item}__metadata__contains": {metadata_name: value}})
        reviews = reviews.filter(sliced).annotate(sliced_value=KeyTextTransform(metadata_name, f"{item}__metadata"))
        groups.append("sliced_value")
    checks = sorted({monitor.check_key for monitor in members if monitor.check_key})
    for number, check in enumerate(checks):
        reviews = reviews.alias(**{f"v{number}": _check_verdict(check), f"h{number}": _human_check(check)})
    columns: dict[str, Aggregate] = {}
    for monitor in members:
        columns |= _columns(monitor, check=checks.index(monitor.check_key) if monitor.check_key else None, at=at)
    rows = list(reviews.values(*groups).annotate(**columns).order_by())
    figures = {}
    for monitor in members:
        mine = [
            row
            for row in rows
            if (not monitor.application or row["application"] == monitor.application)
            and (not metadata_name or row["sliced_value"] == monitor.metadata_value)
        ]
        prefix = _prefix(monitor, checks.index(monitor.check_key) if monitor.check_key else None)
        n = sum(row[f"{prefix}_n"] for row in mine)
        hits = sum(row[f"{prefix}_hits"] or 0 for row in mine)
        figures[figure_key(monitor)] = _figure(monitor.figure, n=n, hits=hits)
    return figures


def _prefix(monitor: Monitor, check: int | None) -> str:
    """The name of a monitor's columns in its scan: its figure and the number of its check there."""
    return f"{monitor.figure}_{'' if check is None else check}"


def _columns(monitor: Monitor, *, check: int | None, at: datetime) -> dict[str, Aggregate]:
    """A monitor's population (`_n`) and numerator (`_hits`, a sum for spend) as aggregates over its scan's rows:
    `_counted`'s conditions, the scan's filters aside."""
    prefix, figure = _prefix(monitor, check), monitor.figure
    counting = in_state_condition(*COUNTING_STATES)
    if figure == MonitorFigure.OVERDUE:
        population, counted = Q(), Q(due_at__lte=at)
    elif figure == MonitorFigure.SPEND:
        population = Q(usage__has_key="prompt_tokens")
        return {f"{prefix}_n": Count("pk", filter=population), f"{prefix}_hits": Sum(TOKENS, filter=population)}
    elif figure == MonitorFigure.ERRORS:
        population, counted = Q(), Q(route=Route.ERROR)
    elif figure == MonitorFigure.CHECK_PASS:
        population = counting & Q(route__in=GRADED, **{f"v{check}__in": (PASS, FAIL)})
        counted = Q(**{f"v{check}": PASS})
    elif figure == MonitorFigure.UNKNOWN_SHARE:
        population = counting & Q(route__in=GRADED, **{f"v{check}__in": (PASS, FAIL, UNKNOWN)})
        counted = Q(**{f"v{check}": UNKNOWN})
    elif figure == MonitorFigure.ITEM_PASS:
        undecided = Q(decision__isnull=True)
        passed = Q(decision__outcome__in=HUMAN_PASS) | (undecided & Q(route=Route.PASS))
        failed = Q(decision__outcome__in=HUMAN_FAIL) | (undecided & Q(route=Route.FAIL))
        population, counted = counting & (passed | failed), passed
    elif check is not None:  # agreement on a check
        population = Q(**{f"v{check}__in": (PASS, FAIL), f"h{check}__in": (PASS, FAIL)})
        counted = Q(**{f"v{check}": F(f"h{check}")})
    else:  # agreement on the item
        population, counted = _item_agreement(monitor.kind)
    return {
        f"{prefix}_n": Count("pk", filter=population) if population else Count("pk"),
        f"{prefix}_hits": Count("pk", filter=population & counted),
    }


def _item_agreement(kind: str) -> tuple[Q, Q]:
    """Of the decided reviews, those where the machine and people both gave a verdict, and those where they agree."""
    machine_pass = Q(route=Route.PASS)
    machine_fail = Q(route=Route.FAIL)
    if kind == ItemKind.DRAFT:  # unsure: the judge's own lean, as the dashboard reads it
        machine_pass |= Q(route=Route.HUMAN, judge_passed=True)
        machine_fail |= Q(route=Route.HUMAN, judge_passed=False)
    human_pass, human_fail = Q(decision__outcome__in=HUMAN_PASS), Q(decision__outcome__in=HUMAN_FAIL)
    return (machine_pass | machine_fail) & (human_pass | human_fail), (machine_pass & human_pass) | (
        machine_fail & human_fail
    )


def _figure(figure: str, *, n: int, hits: int | Decimal) -> Figure:
    if figure == MonitorFigure.SPEND:
        return Figure(float(hits) if n else None, n)
    if figure == MonitorFigure.OVERDUE:
        return Figure(float(hits), n)
    return Figure(hits / n if n else None, n)


def figure_reviews(monitor: Monitor, at: datetime) -> QuerySet[Review]:
    """The reviews behind the figure at `at`: its n (for overdue: the overdue ones, what the figure counts)."""
    population, counted = _counted(monitor, at)
    return population.filter(counted) if monitor.figure == MonitorFigure.OVERDUE else population

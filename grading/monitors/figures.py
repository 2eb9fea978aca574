"""What each monitor figure counts: one query per monitor, over the reviews of its slice in its window, giving the
figure and the n behind it; and the same selection as a list of reviews (the items behind the number).

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

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import BigIntegerField, Count, F, Q, QuerySet, Sum
from django.db.models.fields.json import KeyTextTransform, KeyTransform
from django.db.models.functions import Cast, Coalesce

from grading.models import Decision, ItemKind, Monitor, MonitorFigure, Review, ReviewState, Route

PASS, FAIL, UNKNOWN = "pass", "fail", "unknown"
SCORED = (Route.PASS, Route.FAIL, Route.HUMAN)  # the machine gave a verdict (not an error, not unscorable)
HUMAN_PASS = (Decision.Outcome.APPROVE, Decision.Outcome.PASS)
HUMAN_FAIL = (Decision.Outcome.REJECT, Decision.Outcome.SEND_BACK, Decision.Outcome.FAIL)


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
        return counting.filter(route__in=SCORED).alias(v=verdict).filter(v__in=(PASS, FAIL)), Q(v=PASS)
    if figure == MonitorFigure.UNKNOWN_SHARE:
        verdict = _check_verdict(monitor.check_key)
        return counting.filter(route__in=SCORED).alias(v=verdict).filter(v__in=(PASS, FAIL, UNKNOWN)), Q(v=UNKNOWN)
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
            route__in=SCORED,
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
        tokens = Coalesce(Cast(KeyTextTransform("prompt_tokens", "usage"), BigIntegerField()), 0) + Coalesce(
            Cast(KeyTextTransform("completion_tokens", "usage"), BigIntegerField()), 0
        )
        sums = population.aggregate(n=Count("pk"), total=Sum(tokens))
        return Figure(float(sums["total"] or 0) if sums["n"] else None, sums["n"])
    sums = population.aggregate(n=Count("pk"), hits=Count("pk", filter=counted))
    n = sums["n"]
    if monitor.figure == MonitorFigure.OVERDUE:
        return Figure(float(sums["hits"]), n)
    return Figure(sums["hits"] / n if n else None, n)


def figure_reviews(monitor: Monitor, at: datetime) -> QuerySet[Review]:
    """The reviews behind the figure at `at`: its n (for overdue: the overdue ones, what the figure counts)."""
    population, counted = _counted(monitor, at)
    return population.filter(counted) if monitor.figure == MonitorFigure.OVERDUE else population

"""The queue's service-level figures on the dashboard (issue: targets, assignment): the share of items decided within
their target per week, the time to decision against the target, what is overdue now by application and reason, and
each person's workload. Every figure keeps to the reader's reach.

What can be a counter is one (grading/figures/definitions.py: `decided_due`, `decided_due_s`, and the `decided_by`
the queue's figures read), read with the dashboard's other counters. Three are read live, and cannot be counters:
- overdue now, and each person's overdue holdings: a waiting item becomes overdue when its due time passes, with no
  write to book it at; counters are exact at every commit because every change they count is a write. Each is one
  range of the `review_due` index (`Review.objects.overdue`).
- claims and declines: the people side's rows (reviewer/models.py `Claim`), which grading, where the counters and
  their hourly rebuild live, never reads. One indexed query over the scope's weeks.
"""

from collections import Counter
from datetime import date

from django.contrib.auth import get_user_model
from django.db.models import Count, Q
from django.utils import timezone

from grading.core.weeks import in_weeks, iso_week
from grading.dashboard.figures import Counters, Scope, counters_for
from grading.figures.definitions import LATE, ON_TIME
from grading.models import ItemKind, Review
from reviewer.models import Claim


def _reach(scope: Scope, prefix: str = "") -> Q:
    return scope.reach.rows(prefix) if scope.reach is not None else Q(**{f"{prefix}org_id": scope.org.pk})


def _application(scope: Scope, prefix: str = "") -> Q:
    """The application asked for (conversations only: drafts have none) and the slice, as the other figures read
    them."""
    sliced = Q(**{f"{prefix}slice__contains": scope.slice_filter}) if scope.slice else Q()
    if not scope.application:
        return sliced
    return sliced & (Q(**{f"{prefix}kind": "draft"}) | Q(**{f"{prefix}application": scope.application}))


def _by_week(c: Counters, metric: str) -> dict[tuple[date, str], int]:
    """A metric's counters over every criteria version and kind within the scope, by (week, key1)."""
    out: Counter = Counter()
    for kind in ItemKind.values:
        for (_, _, _, _, week, _, key1, _), n in c.pick(kind, metric, active_only=False):
            out[(week, key1)] += n
    return out


def service_figures(scope: Scope, *, counters: Counters | None = None) -> dict:
    """The scope's service-level figures; from `counters` when the caller read the scope's already."""
    counters = counters or counters_for(scope)
    decided, seconds = _by_week(counters, "decided_due"), _by_week(counters, "decided_due_s")
    now = timezone.now()
    overdue = (
        Review.objects.overdue(now)
        .filter(_reach(scope), _application(scope))
        .values("kind", "application", "reason")
        .annotate(n=Count("pk"))
        .order_by("-n", "kind", "application", "reason")
    )
    return {
        "weeks": [_week(week, decided, seconds) for week in scope.weeks],
        "overdue_now": [dict(row) for row in overdue],
        "overdue_total": sum(row["n"] for row in overdue),
        "workload": _workload(scope, counters, now),
    }


def _week(week: date, decided: Counter, seconds: Counter) -> dict:
    on_time, n = decided[(week, ON_TIME)], decided[(week, ON_TIME)] + decided[(week, LATE)]
    if not n:
        return {"week": iso_week(week), "decided": 0, "within_target": 0, "share": None, "mean_minutes": None,
                "target_minutes": None}  # fmt: skip
    return {
        "week": iso_week(week),
        "decided": n,
        "within_target": on_time,
        "share": on_time / n,
        "mean_minutes": round(seconds[(week, "took")] / n / 60, 1),
        "target_minutes": round(seconds[(week, "target")] / n / 60, 1),
    }


def _workload(scope: Scope, counters: Counters, now) -> list[dict]:
    """Per person, over the scope's weeks: items claimed, declined and decided (an agreed decision for each person
    who answered, as the `decided_by` counters credit it); and the items they hold now that are overdue."""
    claims = Claim.objects.filter(_reach(scope, "review__"), _application(scope, "review__"))
    counts: dict[int, Counter] = {}
    in_scope = in_weeks("claimed_at", since=scope.since, until=scope.until)
    for holder, end, n in claims.filter(in_scope).values_list("holder_id", "end").annotate(n=Count("pk")):
        counts.setdefault(holder, Counter())["claimed"] += n
        if end == Claim.End.DECLINED:
            counts[holder]["declined"] += n
    for (_, person), n in _by_week(counters, "decided_by").items():
        if person.isdigit() and person != "0":  # 0: an account since deleted, nobody to list
            counts.setdefault(int(person), Counter())["decided"] += n
    held_overdue = claims.filter(ended_at__isnull=True, expires_at__gt=now, review__in=Review.objects.overdue(now))
    for holder, n in held_overdue.values_list("holder_id").annotate(n=Count("pk")):
        counts.setdefault(holder, Counter())["overdue"] += n
    names = dict(get_user_model().objects.filter(pk__in=counts).values_list("pk", "username"))
    return [
        {"person": names.get(person, "a former user"), "person_id": person,
         **{key: c[key] for key in ("claimed", "declined", "decided", "overdue")}}
        for person, c in sorted(counts.items(), key=lambda item: (-item[1]["decided"], names.get(item[0], "")))
    ]  # fmt: skip

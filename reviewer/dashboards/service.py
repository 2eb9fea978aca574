"""The queue's service-level figures on the dashboard (issue: targets, assignment): the share of items decided within
their target per week, the time to decision against the target, what is overdue now by application and reason, and
each person's workload. Read live (not from the rollups): decisions, claims and the items overdue now are few beside
the reviews, and each is one indexed query. Every figure keeps to the reader's reach."""

from collections import Counter
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.db.models import Avg, Count, DurationField, ExpressionWrapper, F, Q
from django.db.models.functions import TruncWeek
from django.utils import timezone

from grading.core.weeks import iso_week, monday, week_start
from grading.dashboard.figures import Scope
from grading.figures.definitions import decisions_credited
from grading.models import Decision, Review
from reviewer.models import Claim


def _reach(scope: Scope, prefix: str = "") -> Q:
    return scope.reach.rows(prefix) if scope.reach is not None else Q(**{f"{prefix}org_id": scope.org.pk})


def _in_weeks(field: str, scope: Scope) -> Q:
    start = week_start(scope.since)
    return Q(**{f"{field}__gte": start, f"{field}__lt": start + timedelta(weeks=len(scope.weeks))})


def _application(scope: Scope, prefix: str = "") -> Q:
    """The application asked for (conversations only: drafts have none), as the other figures read it."""
    if not scope.application:
        return Q()
    return Q(**{f"{prefix}kind": "draft"}) | Q(**{f"{prefix}application": scope.application})


def service_figures(scope: Scope) -> dict:
    decided = Decision.objects.filter(
        _reach(scope, "review__"), _application(scope, "review__"), _in_weeks("decided_at", scope),
        review__due_at__isnull=False,
    )  # fmt: skip
    weekly = (
        decided.annotate(week=TruncWeek("decided_at"))
        .values("week")
        .annotate(
            n=Count("pk"),
            within=Count("pk", filter=Q(decided_at__lte=F("review__due_at"))),
            took=Avg(ExpressionWrapper(F("decided_at") - F("review__routed_at"), output_field=DurationField())),
            target=Avg(ExpressionWrapper(F("review__due_at") - F("review__routed_at"), output_field=DurationField())),
        )
    )
    by_week = {monday(row["week"]): row for row in weekly}
    now = timezone.now()
    overdue = (
        Review.objects.overdue(now)
        .filter(_reach(scope), _application(scope))
        .values("kind", "application", "reason")
        .annotate(n=Count("pk"))
        .order_by("-n", "kind", "application", "reason")
    )
    return {
        "weeks": [_week(week, by_week.get(week)) for week in scope.weeks],
        "overdue_now": [dict(row) for row in overdue],
        "overdue_total": sum(row["n"] for row in overdue),
        "workload": _workload(scope, now),
    }


def _week(week, row: dict | None) -> dict:
    if row is None:
        return {"week": iso_week(week), "decided": 0, "within_target": 0, "share": None, "mean_minutes": None,
                "target_minutes": None}  # fmt: skip
    return {
        "week": iso_week(week),
        "decided": row["n"],
        "within_target": row["within"],
        "share": row["within"] / row["n"],
        "mean_minutes": _minutes(row["took"]),
        "target_minutes": _minutes(row["target"]),
    }


def _minutes(duration: timedelta | None) -> float | None:
    return None if duration is None else round(duration.total_seconds() / 60, 1)


def _workload(scope: Scope, now) -> list[dict]:
    """Per person, over the scope's weeks: items claimed, declined and decided; and the items they hold now that
    are overdue."""
    claims = Claim.objects.filter(_reach(scope, "review__"), _application(scope, "review__"))
    counts: dict[int, Counter] = {}
    for holder, end, n in (
        claims.filter(_in_weeks("claimed_at", scope)).values_list("holder_id", "end").annotate(n=Count("pk"))
    ):
        counts.setdefault(holder, Counter())["claimed"] += n
        if end == Claim.End.DECLINED:
            counts[holder]["declined"] += n
    decisions = Decision.objects.filter(_reach(scope, "review__"), _application(scope, "review__"),
                                        _in_weeks("decided_at", scope))  # fmt: skip
    for person, n in decisions_credited(decisions).items():  # an agreed decision: each person who answered
        counts.setdefault(person, Counter())["decided"] += n
    held_overdue = claims.filter(ended_at__isnull=True, expires_at__gt=now, review__in=Review.objects.overdue(now))
    for holder, n in held_overdue.values_list("holder_id").annotate(n=Count("pk")):
        counts.setdefault(holder, Counter())["overdue"] += n
    names = dict(get_user_model().objects.filter(pk__in=counts).values_list("pk", "username"))
    return [
        {"person": names.get(person, "a former user"), "person_id": person,
         **{key: c[key] for key in ("claimed", "declined", "decided", "overdue")}}
        for person, c in sorted(counts.items(), key=lambda item: (-item[1]["decided"], names.get(item[0], "")))
    ]  # fmt: skip

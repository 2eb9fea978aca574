"""ISO weeks, as every figure, list, sample and page files things by week: Monday to Sunday, in UTC.

The one definition is `monday`; SQL that files rows by week uses `monday_sql`, its twin, held equal to it by
tests/grading/figures/test_definitions.py. A week is named `2026-W41` (`iso_week`) and read back by `week_named`.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

from django.utils import timezone


def monday(moment: datetime | date) -> date:
    """The Monday of the ISO week of `moment` (in UTC): how every figure is filed by week."""
    if isinstance(moment, datetime):
        moment = moment.astimezone(UTC).date() if timezone.is_aware(moment) else moment.date()
    return moment - timedelta(days=moment.weekday())


def monday_sql(timestamp: str) -> str:
    """`monday` in SQL, of the timestamptz expression `timestamp` (a column or an expression of ours)."""
    return f"date_trunc('week', ({timestamp}) AT TIME ZONE 'UTC')::date"


def week_start(week: date) -> datetime:
    """The first instant of the ISO week whose Monday is `week`: a week range of timestamps starts here."""
    return datetime.combine(week, time.min, tzinfo=UTC)


def iso_week(day: date) -> str:
    """The ISO name of the week holding `day`, like 2026-W41."""
    year, week, _ = day.isocalendar()
    return f"{year}-W{week:02d}"


def week_named(text: str) -> date:
    """The Monday of the ISO week named like 2026-W41; ValueError when `text` names none."""
    year, week = text.strip().upper().split("-W")
    return date.fromisocalendar(int(year), int(week), 1)

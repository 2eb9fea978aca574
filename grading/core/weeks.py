"""ISO weeks, as every figure, list, sample and page files things by week: Monday to Sunday, in UTC.

The one definition is `monday`; SQL that files rows by week (the figures' rebuild) uses `monday_sql`, its twin, held
equal to it by tests/grading/test_review_rules.py. A range of weeks, as timestamps, is `in_weeks`. A week is named
`2026-W41` (`iso_week`) and read back by `week_named`.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta

from django.db.models import Q
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


def in_weeks(field: str, *, since: date, until: date) -> Q:
    """A timestamp `field` within the ISO weeks from the one whose Monday is `since` to the one whose Monday is
    `until`, both included: the one week range every list, figure and count of timestamps reads."""
    return Q(**{f"{field}__gte": week_start(since), f"{field}__lt": week_start(until) + timedelta(weeks=1)})


def iso_week(day: date) -> str:
    """The ISO name of the week holding `day`, like 2026-W41."""
    year, week, _ = day.isocalendar()
    return f"{year:04d}-W{week:02d}"


# The weeks a range may name: those wholly within the years 1 to 9999, so that a range's end (the Monday after its
# last week) is still a date. 9999-W52 ends on 2 January 10000.
FIRST_WEEK = date(1, 1, 1)  # 0001-W01: 1 January of the year 1 was a Monday
LAST_WEEK = date(9999, 12, 20)  # 9999-W51
_WEEK_NAME = re.compile(r"(\d{4})-W(\d{1,2})", re.ASCII)


def week_named(text: str) -> date:
    """The Monday of the ISO week named like 2026-W41; ValueError when `text` names none from 0001-W01 to 9999-W51."""
    match = _WEEK_NAME.fullmatch(text.strip().upper())
    try:  # fromisocalendar refuses the year 0, week 0 and week 53 of most years
        week = date.fromisocalendar(int(match[1]), int(match[2]), 1) if match else None
    except ValueError:
        week = None
    if week is None:
        raise ValueError(f"{text!r} is not an ISO week like 2026-W41")
    if not FIRST_WEEK <= week <= LAST_WEEK:
        raise ValueError(f"{text!r} is not an ISO week from {iso_week(FIRST_WEEK)} to {iso_week(LAST_WEEK)}")
    return week


def weeks_before(week: date, count: int) -> date:
    """The Monday `count` weeks before `week`, or the first week there is when that would be before it."""
    return date.fromordinal(max(week.toordinal() - 7 * count, FIRST_WEEK.toordinal()))

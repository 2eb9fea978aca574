"""Options the management commands for positioned selectors share (targets, assignment rules, escalation): an
application name, a position, and a duration as the listings print it."""

from django.core.management.base import CommandError

APPLICATION_NAME_MAX = 100  # the application columns' length (conversations, reviews, targets, rules)
POSITION_MAX = 2**31 - 1  # the largest value of a position column (an integer in Postgres)
MINUTES_A_DAY = 60 * 24


def application_option(raw: str | None) -> str:
    """`--application`: absent is any application; present, a name that is not empty and fits the column."""
    if raw is None:
        return ""
    application = raw.strip()
    if not application:
        raise CommandError("--application is empty: leave it out for any application")
    if len(application) > APPLICATION_NAME_MAX:
        raise CommandError(f"application names are at most {APPLICATION_NAME_MAX} characters: {application[:40]!r}…")
    return application


def position_option(position: int) -> int:
    if not 1 <= position <= POSITION_MAX:
        raise CommandError(f"--position must be from 1 to {POSITION_MAX}")
    return position


def duration_text(minutes: int) -> str:
    """`2 d` when a whole number of days, else `1 h 30 min`, `2 h` or `45 min`."""
    if minutes % MINUTES_A_DAY == 0:
        return f"{minutes // MINUTES_A_DAY} d"
    hours, rest = divmod(minutes, 60)
    if not hours:
        return f"{rest} min"
    return f"{hours} h {rest} min" if rest else f"{hours} h"

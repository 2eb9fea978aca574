"""Checks and texts the management commands share: an option's text (stripped, not empty, within its column) and a
duration as the listings print it."""

from django.core.management.base import CommandError

MINUTES_A_DAY = 60 * 24


def text_option(raw: str, *, option: str, empty: str, names: str, limit: int) -> str:
    """An option's text, stripped: refused when empty (`empty` says what to give instead) or longer than its
    column."""
    text = raw.strip()
    if not text:
        raise CommandError(f"{option} is empty: {empty}")
    if len(text) > limit:
        raise CommandError(f"{names} are at most {limit} characters: {text[:40]!r}…")
    return text


def duration_text(minutes: int) -> str:
    """`2 d` when a whole number of days, else `1 h 30 min`, `2 h` or `45 min`."""
    if minutes % MINUTES_A_DAY == 0:
        return f"{minutes // MINUTES_A_DAY} d"
    hours, rest = divmod(minutes, 60)
    if not hours:
        return f"{rest} min"
    return f"{hours} h {rest} min" if rest else f"{hours} h"

"""Checks and texts the management commands share: the refusal that names what to correct, an option's text
(stripped, not empty, within its column) and a duration as the listings print it."""

from django.core.management.base import CommandError

MINUTES_A_DAY = 60 * 24


class ChangeRefused(CommandError):
    """A change refused before anything is written, by a service a command and a set-up page share: the message says
    why, and `field` names what to correct (the service's own word for it: the option without its dashes, or the
    field of the row it writes), None for the change as a whole. A command prints the message; a page shows it at
    its field."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field

    def said(self) -> str:
        """The refusal as a page or the API says it, where the options it names are fields: without their dashes."""
        return str(self).removeprefix("--")


def option_field(option: str) -> str:
    """`--warn-minutes` -> `warn_minutes`: the field an option's refusal names."""
    return option.removeprefix("--").replace("-", "_")


def text_option(raw: str, *, option: str, empty: str, names: str, limit: int) -> str:
    """An option's text, stripped: refused when empty (`empty` says what to give instead) or longer than its
    column."""
    text = raw.strip()
    if not text:
        raise ChangeRefused(f"{option} is empty: {empty}", field=option_field(option))
    if len(text) > limit:
        raise ChangeRefused(f"{names} are at most {limit} characters: {text[:40]!r}…", field=option_field(option))
    return text


def duration_text(minutes: int) -> str:
    """`2 d` when a whole number of days, else `1 h 30 min`, `2 h` or `45 min`."""
    if minutes % MINUTES_A_DAY == 0:
        return f"{minutes // MINUTES_A_DAY} d"
    hours, rest = divmod(minutes, 60)
    if not hours:
        return f"{rest} min"
    return f"{hours} h {rest} min" if rest else f"{hours} h"

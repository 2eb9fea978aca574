"""Times as people read them: written in UTC, so a page says the right thing without JavaScript, and shown in the
reader's own time zone once reviewer/static/times.js has run (it reads the `datetime` attribute)."""

from datetime import UTC, datetime

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

register = template.Library()

FORMATS = {"datetime": "%d %b %Y %H:%M", "time": "%H:%M"}


@register.filter
def local_time(value: datetime | None, shown: str = "datetime") -> SafeString | str:
    """`<time>` for `value`, as a date and time (`shown` "datetime") or a time of day ("time")."""
    if not isinstance(value, datetime):
        return "" if value is None else str(value)
    utc = value.astimezone(UTC)
    return format_html(
        '<time datetime="{}" data-local="{}">{} UTC</time>', utc.isoformat(), shown, utc.strftime(FORMATS[shown])
    )

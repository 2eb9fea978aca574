"""Monitors set up, changed and removed: every setting checked before anything is written (`MonitorInvalid` names
the field), each change in one transaction with its audit event (`monitor.create`, `monitor.update` with what was
and what is, `monitor.delete`).

Levels are stored in the figure's own unit: a rate as a fraction (0.9), spend in tokens, overdue in items. A change
keeps the monitor's state and history: the next evaluation reads the new settings, holding the state it is in as
the hysteresis rule says (grading/monitors/states.py)."""

from __future__ import annotations

import math
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from pydantic import TypeAdapter
from pydantic import ValidationError as PydanticError

from grading.checks.definitions import AnswerKind
from grading.core.errors import FieldInvalid
from grading.core.outbound import url_refusal
from grading.core.schemas import MetadataKey, MetadataValue
from grading.models import Direction, ItemKind, Monitor, MonitorFigure, Org
from grading.models.audit import audit_record
from grading.monitors.notices import RATES
from grading.reviews.versions import criteria_active

SETTINGS = (
    "name", "figure", "kind", "check_key", "window_hours", "application", "metadata_name", "metadata_value", "min_n",
    "direction", "warning_level", "alert_level", "margin", "mail_to", "webhook_url", "chat_url",
)  # fmt: skip
WINDOW_HOURS_MAX = 24 * 30
MIN_N_MAX = 1_000_000
MAIL_TO_MAX = 10
URL_MAX = Monitor._meta.get_field("webhook_url").max_length
# Figures that read one conversation check: the check is required; agreement reads one when given.
CHECK_REQUIRED = {MonitorFigure.CHECK_PASS, MonitorFigure.UNKNOWN_SHARE}
CHECK_ALLOWED = CHECK_REQUIRED | {MonitorFigure.AGREEMENT}
# Where a figure is bad when it is past its levels, when the person does not say.
BAD_DIRECTION = {
    MonitorFigure.CHECK_PASS: Direction.BELOW,
    MonitorFigure.ITEM_PASS: Direction.BELOW,
    MonitorFigure.AGREEMENT: Direction.BELOW,
    MonitorFigure.UNKNOWN_SHARE: Direction.ABOVE,
    MonitorFigure.SPEND: Direction.ABOVE,
    MonitorFigure.OVERDUE: Direction.ABOVE,
    MonitorFigure.ERRORS: Direction.ABOVE,
}
_KEY, _VALUE = TypeAdapter(MetadataKey), TypeAdapter(MetadataValue)


class MonitorInvalid(FieldInvalid):
    pass


def monitor_create(*, org: Org, given: dict[str, Any], actor: AbstractBaseUser | None = None) -> Monitor:
    fields = monitor_checked(org=org, given=given)
    try:
        with transaction.atomic():
            monitor = Monitor.objects.create(org=org, created_by=_person(actor), **fields)
            audit_record(action="monitor.create", org=org, actor=actor, target=monitor, detail=settings_of(monitor))
    except IntegrityError:
        raise MonitorInvalid("name", f"{org.name} already has a monitor named {fields['name']!r}") from None
    return monitor


def monitor_update(*, monitor: Monitor, given: dict[str, Any], actor: AbstractBaseUser | None = None) -> list[str]:
    """Change the monitor to `given` (every setting); the names of the settings that changed."""
    fields = monitor_checked(org=monitor.org, given=given)
    try:
        with transaction.atomic():
            locked = Monitor.objects.select_for_update().get(pk=monitor.pk)
            was = settings_of(locked)
            changed = [name for name, value in fields.items() if was[name] != value]
            if not changed:
                return []
            for name in changed:
                setattr(locked, name, fields[name])
            locked.save(update_fields=changed)
            audit_record(
                action="monitor.update",
                org=monitor.org,
                actor=actor,
                target=locked,
                detail={"before": {n: was[n] for n in changed}, "after": {n: fields[n] for n in changed}},
            )
    except IntegrityError:
        raise MonitorInvalid("name", f"{monitor.org.name} already has a monitor named {fields['name']!r}") from None
    return changed


def monitor_delete(*, monitor: Monitor, actor: AbstractBaseUser | None = None) -> None:
    with transaction.atomic():
        # Recorded first: once deleted, the monitor has no pk left to name.
        audit_record(action="monitor.delete", org=monitor.org, actor=actor, target=monitor, detail=settings_of(monitor))
        monitor.delete()


def settings_of(monitor: Monitor) -> dict[str, Any]:
    return {name: getattr(monitor, name) for name in SETTINGS}


def _person(actor: AbstractBaseUser | None) -> AbstractBaseUser | None:
    return actor if actor is not None and actor.is_authenticated else None


# --- the checks: every refusal before anything is written -----------------------------------------------------


def monitor_checked(*, org: Org, given: dict[str, Any]) -> dict[str, Any]:
    """`given` as the columns hold it, or MonitorInvalid naming the first setting that cannot be."""
    missing = [name for name in SETTINGS if name not in given]
    if missing:
        raise MonitorInvalid(missing[0], "is required")
    fields = dict(given)
    name = str(fields["name"]).strip()
    if not 1 <= len(name) <= Monitor._meta.get_field("name").max_length or not name.isprintable():
        raise MonitorInvalid("name", "give a name of 1 to 100 printable characters")
    fields["name"] = name
    figure = _choice("figure", fields["figure"], MonitorFigure)
    kind = _choice("kind", fields["kind"], ItemKind)
    fields["check_key"] = _check_key(org, figure, kind, str(fields["check_key"] or ""))
    fields["window_hours"] = _whole("window_hours", fields["window_hours"], 1, WINDOW_HOURS_MAX)
    fields["min_n"] = _whole("min_n", fields["min_n"], 0, MIN_N_MAX)
    application = str(fields["application"] or "").strip()
    if application and kind != ItemKind.CONVERSATION:
        raise MonitorInvalid("application", "only conversations have applications; leave it empty for drafts")
    if len(application) > Monitor._meta.get_field("application").max_length or not application.isprintable():
        raise MonitorInvalid("application", "an application name is at most 100 printable characters")
    fields["application"] = application
    fields["metadata_name"], fields["metadata_value"] = _metadata(fields["metadata_name"], fields["metadata_value"])
    direction = _choice("direction", fields["direction"] or BAD_DIRECTION[figure], Direction)
    fields["direction"] = direction
    rate = figure in RATES
    warning = _level("warning_level", fields["warning_level"], rate=rate)
    alert = _level("alert_level", fields["alert_level"], rate=rate)
    if (direction == Direction.BELOW and alert > warning) or (direction == Direction.ABOVE and alert < warning):
        side = "at or below" if direction == Direction.BELOW else "at or above"
        raise MonitorInvalid("alert_level", f"the alert level must be {side} the warning level (it is worse)")
    fields["warning_level"], fields["alert_level"] = warning, alert
    fields["margin"] = _level("margin", fields["margin"] or 0, rate=rate)
    fields["mail_to"] = _addresses(fields["mail_to"])
    fields["webhook_url"] = _url("webhook_url", fields["webhook_url"])
    fields["chat_url"] = _url("chat_url", fields["chat_url"])
    return {name: fields[name] for name in SETTINGS}


def _choice(field: str, value: Any, choices: type) -> str:
    if value not in choices.values:
        raise MonitorInvalid(field, f"must be one of {', '.join(choices.values)}")
    return value


def _whole(field: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise MonitorInvalid(field, f"must be a whole number from {low} to {high:,}")
    return value


def _level(field: str, value: Any, *, rate: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise MonitorInvalid(field, "must be a number")
    high = 1.0 if rate else 1e15
    if not 0 <= value <= high:
        raise MonitorInvalid(field, "a rate is from 0% to 100%" if rate else "must be zero or more")
    return float(value)


def _check_key(org: Org, figure: str, kind: str, check: str) -> str:
    if figure not in CHECK_ALLOWED:
        if check:
            raise MonitorInvalid("check_key", f"the {MonitorFigure(figure).label} reads no check; leave it empty")
        return ""
    if not check:
        if figure in CHECK_REQUIRED:
            raise MonitorInvalid("check_key", f"the {MonitorFigure(figure).label} reads one check: name it")
        return ""
    if kind != ItemKind.CONVERSATION:
        raise MonitorInvalid("check_key", "only conversations have checks; a draft's figure reads the whole draft")
    check_set = criteria_active(org=org, kind=ItemKind.CONVERSATION).check_set()
    verdicts = [c.key for c in check_set.checks if c.kind == AnswerKind.VERDICT]
    if check not in verdicts:
        raise MonitorInvalid(
            "check_key", f"the active conversation criteria have no pass/fail check {check[:40]!r}; they have "
            f"{', '.join(verdicts) or 'none'}",
        )  # fmt: skip
    return check


def _metadata(name: Any, value: Any) -> tuple[str, str]:
    name, value = str(name or ""), str(value or "")
    if not name and not value:
        return "", ""
    if not name or not value:
        raise MonitorInvalid("metadata_name" if not name else "metadata_value", "a slice names a name and a value")
    try:
        _KEY.validate_python(name)
    except PydanticError:
        raise MonitorInvalid(
            "metadata_name", "a metadata name is 1 to 64 letters, digits, _ . or -, starting with a letter"
        ) from None
    try:
        _VALUE.validate_python(value)
    except PydanticError:
        raise MonitorInvalid(
            "metadata_value", "a metadata value is 1 to 200 characters without control characters"
        ) from None
    return name, value


def _addresses(raw: Any) -> list[str]:
    addresses = raw if isinstance(raw, list) else [part.strip() for part in str(raw or "").split(",")]
    addresses = [address for address in addresses if address]
    if len(addresses) > MAIL_TO_MAX:
        raise MonitorInvalid("mail_to", f"at most {MAIL_TO_MAX} addresses")
    for address in addresses:
        try:
            validate_email(address)
        except ValidationError:
            raise MonitorInvalid("mail_to", f"{address[:80]!r} is not an e-mail address") from None
    return addresses


def _url(field: str, raw: Any) -> str:
    url = str(raw or "").strip()
    if not url:
        return ""
    if len(url) > URL_MAX:
        raise MonitorInvalid(field, f"a URL is at most {URL_MAX} characters")
    # What can be known now is refused now; a host name is checked again at each send (what it resolves to moves).
    refusal = url_refusal(url)
    if refusal:
        raise MonitorInvalid(field, f"notices cannot be sent to {url[:80]!r}: {refusal}")
    try:
        Monitor._meta.get_field(field).run_validators(url)
    except ValidationError as exc:
        raise MonitorInvalid(field, f"notices cannot be sent to {url[:80]!r}: {' '.join(exc.messages)}") from None
    return url

"""An org's escalation (whom to tell about queue items due soon or overdue, how long before the due time, which
webhook; see reviewer/queue/escalation.py), one form for `manage.py escalation` and the set-up page
(reviewer/setup/views.py): each change in one transaction with the org locked, audited, and refused
(`ChangeRefused`, saying why and naming what to correct) before anything is written."""

from datetime import UTC, datetime

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from grading.core.outbound import url_refusal
from grading.management.options import ChangeRefused, duration_text, text_option
from grading.management.orgs import org_lock
from grading.models import Org, ServiceTarget
from grading.models.audit import audit_record
from reviewer.models import Escalation

# Read from the model, so the command and the page refuse exactly what the column would.
WEBHOOK_URL_FIELD = Escalation._meta.get_field("webhook_url")
WEBHOOK_URL_MAX = WEBHOOK_URL_FIELD.max_length
# A warning a week ahead is already more than any service level needs; the cap keeps `now + margin` (the sweep's
# window) far inside the range of a datetime.
WARN_MINUTES_MAX = 60 * 24 * 7
SETTINGS = ("warn_minutes", "to_assignees", "to_leads", "webhook_url")
# What a new escalation gets for each setting it is not given (the model's defaults).
DEFAULTS = {name: Escalation._meta.get_field(name).get_default() for name in SETTINGS}
NOT_ANNOUNCED = "(items already overdue are not announced)"


def escalation_of(org: Org) -> Escalation | None:
    return Escalation.objects.select_related("org").filter(org=org).first()


def escalation_set(*, org: Org, given: dict, actor: AbstractBaseUser | None = None) -> tuple[str, str]:
    """Create the org's escalation, or change the settings `given` (and nothing else); what changed, and a warning
    ("" for none) when the org has no targets, so that nobody would be told anything yet."""
    with transaction.atomic():
        org_lock(org)
        escalation = Escalation.objects.select_for_update().select_related("org").filter(org=org).first()
        if escalation is None:
            outcome = _escalation_create(org, given, actor=actor)
        else:
            outcome = _escalation_update(escalation, given, actor=actor)
    warning = ""
    if not ServiceTarget.objects.filter(org=org).exists():
        warning = (
            f"warning: {org.slug} has no service-level targets: no item has a due time, so nobody is told "
            "anything until one is set (the set-up page, or `python manage.py targets set`)"
        )
    return outcome, warning


def escalation_remove(*, org: Org, actor: AbstractBaseUser | None = None) -> str:
    with transaction.atomic():
        org_lock(org)
        escalation = Escalation.objects.select_for_update().select_related("org").filter(org=org).first()
        if escalation is None:
            raise ChangeRefused(f"no escalation in {org.slug}; nothing removed")
        # Recorded first: once deleted, the escalation has no pk left to name.
        audit_record(
            action="escalation.delete", org=org, actor=actor, target=escalation, detail=_created_dict(escalation)
        )
        line = escalation_line(escalation)
        escalation.delete()
    return f"removed: {line}"


# --- writes: inside the caller's transaction, with the org locked ---------------------------------------------


def _escalation_create(org: Org, given: dict, *, actor: AbstractBaseUser | None) -> str:
    fields = DEFAULTS | given
    _refuse_telling_nobody(fields)
    # The first sweep starts now: items already overdue were due before anyone asked to be told.
    escalation = Escalation.objects.create(org=org, swept_until=timezone.now(), **fields)
    audit_record(action="escalation.create", org=org, actor=actor, target=escalation, detail=_created_dict(escalation))
    return f"created: {escalation_line(escalation)}  {NOT_ANNOUNCED}"


def _escalation_update(escalation: Escalation, given: dict, *, actor: AbstractBaseUser | None) -> str:
    """Changes the settings given and nothing else: `swept_until` stays, so no item is announced twice or skipped."""
    was = settings_dict(escalation)
    _refuse_telling_nobody(was | given)
    changed = [name for name, value in given.items() if was[name] != value]
    if not changed:
        return f"unchanged: {escalation_line(escalation)}"
    for name in changed:
        setattr(escalation, name, given[name])
    escalation.save(update_fields=changed)  # never swept_until: a sweep may have moved it since it was read
    audit_record(
        action="escalation.update",
        org=escalation.org,
        actor=actor,
        target=escalation,
        detail={"before": was, "after": settings_dict(escalation)},
    )
    return f"updated: {escalation_line(escalation)} (was {settings_text(was)})"


# --- validation: every refusal before anything is written ----------------------------------------------------


# --- validation: every refusal before anything is written ----------------------------------------------------


def warn_minutes_checked(minutes: int) -> int:
    if not 0 <= minutes <= WARN_MINUTES_MAX:
        raise ChangeRefused(
            f"--warn-minutes must be from 0 to {WARN_MINUTES_MAX} (a week); 0 warns only once overdue",
            field="warn_minutes",
        )
    return minutes


def webhook_url_checked(raw: str) -> str:
    url = text_option(
        raw,
        option="--webhook",
        empty="give a URL, or --no-webhook for none",
        names="webhook URLs",
        limit=WEBHOOK_URL_MAX,
    )
    # What can be known now is refused now (scheme, credentials, a literal internal address); a host name is
    # checked again when each webhook is sent, because what it resolves to can change.
    refusal = url_refusal(url)
    if refusal:
        raise ChangeRefused(f"webhooks cannot be sent to {url[:80]!r}: {refusal}", field="webhook")
    try:
        WEBHOOK_URL_FIELD.run_validators(url)  # what the column's form field (the admin) would accept
    except ValidationError as exc:
        raise ChangeRefused(
            f"webhooks cannot be sent to {url[:80]!r}: {' '.join(exc.messages)}", field="webhook"
        ) from None
    return url


def _refuse_telling_nobody(fields: dict) -> None:
    if not (fields["to_assignees"] or fields["to_leads"] or fields["webhook_url"]):
        raise ChangeRefused(
            "this escalation would tell nobody (no mail to assignees or leads, no webhook): keep --to-assignees or "
            "--to-leads, or give a --webhook; `escalation remove` stops escalating"
        )


# --- how escalations read ---------------------------------------------------------------------------------------


def settings_dict(escalation: Escalation) -> dict:
    return {name: getattr(escalation, name) for name in SETTINGS}


def _created_dict(escalation: Escalation) -> dict:
    return settings_dict(escalation) | {"swept_until": escalation.swept_until.isoformat()}


def escalation_line(escalation: Escalation) -> str:
    return (
        f"{escalation.org.slug}  {settings_text(settings_dict(escalation))}"
        f"  · swept until {_utc(escalation.swept_until)}"
    )


def settings_text(settings: dict) -> str:
    minutes = settings["warn_minutes"]
    warn = f"warn {duration_text(minutes)} before due" if minutes else "no warning (told once overdue)"
    mailed = [who for who, name in (("assignees", "to_assignees"), ("leads", "to_leads")) if settings[name]]
    to = f"to {', '.join(mailed)}" if mailed else "no mail"
    webhook = f"webhook {settings['webhook_url']}" if settings["webhook_url"] else "no webhook"
    return f"{warn} · {to} · {webhook}"


def _utc(moment: datetime) -> str:
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M} UTC"

"""`manage.py escalation`: how an org is told about queue items due soon or overdue (whom, how long before the due
time, which webhook; see reviewer/queue/escalation.py). Until the app has a page for it, the only way to manage it
besides the Django shell. It lives on the people side: grading never imports `reviewer`, so its `targets` command
(the due times themselves) cannot hold these settings."""

from argparse import BooleanOptionalAction
from datetime import UTC, datetime

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.utils import timezone

from grading.core.outbound import url_refusal
from grading.management.options import duration_text, text_option
from grading.management.orgs import org_from_option, org_lock
from grading.models import Org, ServiceTarget
from grading.models.audit import audit_record
from reviewer.models import Escalation

# Read from the model, so the command refuses exactly what the column would.
WEBHOOK_URL_FIELD = Escalation._meta.get_field("webhook_url")
WEBHOOK_URL_MAX = WEBHOOK_URL_FIELD.max_length
# A warning a week ahead is already more than any service level needs; the cap keeps `now + margin` (the sweep's
# window) far inside the range of a datetime.
WARN_MINUTES_MAX = 60 * 24 * 7
SETTINGS = ("warn_minutes", "to_assignees", "to_leads", "webhook_url")
# What `set` gives a new escalation for each setting it is not told (the model's defaults).
DEFAULTS = {name: Escalation._meta.get_field(name).get_default() for name in SETTINGS}
NOT_ANNOUNCED = "(items already overdue are not announced)"


class Command(BaseCommand):
    help = "Set, show or remove an org's escalation: who is told about queue items due soon or overdue, and when."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        setting = actions.add_parser("set", help="create the org's escalation, or change the settings given")
        setting.add_argument("--org", required=True, help="org slug")
        setting.add_argument(
            "--warn-minutes",
            type=int,
            help=f"also warn this many minutes before the due time, 0 to {WARN_MINUTES_MAX} "
            "(new escalation: 0, told only once overdue)",
        )
        setting.add_argument(
            "--to-assignees",
            action=BooleanOptionalAction,
            help="mail the people an item is reserved for (new escalation: yes)",
        )
        setting.add_argument(
            "--to-leads",
            action=BooleanOptionalAction,
            help="mail the org's leads whose reach covers the item (new escalation: yes)",
        )
        webhook = setting.add_mutually_exclusive_group()
        webhook.add_argument("--webhook", metavar="URL", help="also POST each sweep's items there, signed")
        webhook.add_argument("--no-webhook", action="store_true", help="send no webhook")
        showing = actions.add_parser("show", help="show escalations, of every org unless --org")
        showing.add_argument("--org", help="org slug")
        remove = actions.add_parser("remove", help="delete the org's escalation: nobody is told any more")
        remove.add_argument("--org", required=True, help="org slug")

    def handle(self, *args, action: str, org: str | None, **options) -> None:
        if action == "show":
            self._show(org_from_option(org) if org else None)
            return
        the_org = org_from_option(org)
        if action == "set":
            self._set(the_org, _given_settings(options))
        else:
            self._remove(the_org)

    def _show(self, org: Org | None) -> None:
        escalations = Escalation.objects.select_related("org").order_by("org__slug")
        if org is None:
            for escalation in escalations:
                self.stdout.write(_line(escalation))
            return
        escalation = escalations.filter(org=org).first()
        self.stdout.write(_line(escalation) if escalation else f"{org.slug}  no escalation: nobody is told")

    def _set(self, org: Org, given: dict) -> None:
        with transaction.atomic():
            org_lock(org)
            escalation = Escalation.objects.select_for_update().select_related("org").filter(org=org).first()
            outcome = _escalation_create(org, given) if escalation is None else _escalation_update(escalation, given)
        self.stdout.write(outcome)
        if not ServiceTarget.objects.filter(org=org).exists():
            self.stderr.write(
                f"warning: {org.slug} has no service-level targets: no item has a due time, so nobody is told "
                "anything until one is set (`python manage.py targets set`)"
            )

    def _remove(self, org: Org) -> None:
        with transaction.atomic():
            org_lock(org)
            escalation = Escalation.objects.select_for_update().select_related("org").filter(org=org).first()
            if escalation is None:
                raise CommandError(f"no escalation in {org.slug}; nothing removed")
            # Recorded first: once deleted, the escalation has no pk left to name.
            audit_record(action="escalation.delete", org=org, target=escalation, detail=_created_dict(escalation))
            line = _line(escalation)
            escalation.delete()
        self.stdout.write(f"removed: {line}")


# --- writes: inside the caller's transaction, with the org locked ---------------------------------------------


def _escalation_create(org: Org, given: dict) -> str:
    fields = DEFAULTS | given
    _refuse_telling_nobody(fields)
    # The first sweep starts now: items already overdue were due before anyone asked to be told.
    escalation = Escalation.objects.create(org=org, swept_until=timezone.now(), **fields)
    audit_record(action="escalation.create", org=org, target=escalation, detail=_created_dict(escalation))
    return f"created: {_line(escalation)}  {NOT_ANNOUNCED}"


def _escalation_update(escalation: Escalation, given: dict) -> str:
    """Changes the settings given and nothing else: `swept_until` stays, so no item is announced twice or skipped."""
    was = _settings_dict(escalation)
    _refuse_telling_nobody(was | given)
    changed = [name for name, value in given.items() if was[name] != value]
    if not changed:
        return f"unchanged: {_line(escalation)}"
    for name in changed:
        setattr(escalation, name, given[name])
    escalation.save(update_fields=changed)  # never swept_until: a sweep may have moved it since it was read
    audit_record(
        action="escalation.update",
        org=escalation.org,
        target=escalation,
        detail={"before": was, "after": _settings_dict(escalation)},
    )
    return f"updated: {_line(escalation)} (was {_settings_text(was)})"


# --- validation: every refusal before anything is written ----------------------------------------------------


def _given_settings(options: dict) -> dict:
    """The Escalation settings `escalation set` names, validated; those it leaves out are absent."""
    given = {}
    if options["warn_minutes"] is not None:
        given["warn_minutes"] = _warn_minutes(options["warn_minutes"])
    for name in ("to_assignees", "to_leads"):
        if options[name] is not None:
            given[name] = options[name]
    if options["no_webhook"]:
        given["webhook_url"] = ""
    elif options["webhook"] is not None:
        given["webhook_url"] = _webhook_url(options["webhook"])
    return given


def _warn_minutes(minutes: int) -> int:
    if not 0 <= minutes <= WARN_MINUTES_MAX:
        raise CommandError(f"--warn-minutes must be from 0 to {WARN_MINUTES_MAX} (a week); 0 warns only once overdue")
    return minutes


def _webhook_url(raw: str) -> str:
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
        raise CommandError(f"webhooks cannot be sent to {url[:80]!r}: {refusal}")
    try:
        WEBHOOK_URL_FIELD.run_validators(url)  # what the column's form field (the admin) would accept
    except ValidationError as exc:
        raise CommandError(f"webhooks cannot be sent to {url[:80]!r}: {' '.join(exc.messages)}") from None
    return url


def _refuse_telling_nobody(fields: dict) -> None:
    if not (fields["to_assignees"] or fields["to_leads"] or fields["webhook_url"]):
        raise CommandError(
            "this escalation would tell nobody (no mail to assignees or leads, no webhook): keep --to-assignees or "
            "--to-leads, or give a --webhook; `escalation remove` stops escalating"
        )


# --- how escalations read ---------------------------------------------------------------------------------------


def _settings_dict(escalation: Escalation) -> dict:
    return {name: getattr(escalation, name) for name in SETTINGS}


def _created_dict(escalation: Escalation) -> dict:
    return _settings_dict(escalation) | {"swept_until": escalation.swept_until.isoformat()}


def _line(escalation: Escalation) -> str:
    return (
        f"{escalation.org.slug}  {_settings_text(_settings_dict(escalation))}"
        f"  · swept until {_utc(escalation.swept_until)}"
    )


def _settings_text(settings: dict) -> str:
    minutes = settings["warn_minutes"]
    warn = f"warn {duration_text(minutes)} before due" if minutes else "no warning (told once overdue)"
    mailed = [who for who, name in (("assignees", "to_assignees"), ("leads", "to_leads")) if settings[name]]
    to = f"to {', '.join(mailed)}" if mailed else "no mail"
    webhook = f"webhook {settings['webhook_url']}" if settings["webhook_url"] else "no webhook"
    return f"{warn} · {to} · {webhook}"


def _utc(moment: datetime) -> str:
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M} UTC"

"""`manage.py escalation`: how an org is told about queue items due soon or overdue (whom, how long before the due
time, which webhook; see reviewer/queue/escalation.py), through the service the set-up page uses
(reviewer/setup/escalations.py). It lives on the people side: grading never imports `reviewer`, so its `targets` command
(the due times themselves) cannot hold these settings."""

from argparse import BooleanOptionalAction

from django.core.management.base import BaseCommand, CommandParser

from grading.management.orgs import org_from_option
from grading.models import Org
from reviewer.models import Escalation
from reviewer.setup.escalations import (
    WARN_MINUTES_MAX,
    escalation_line,
    escalation_remove,
    escalation_set,
    warn_minutes_checked,
    webhook_url_checked,
)


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
            self.stdout.write(escalation_remove(org=the_org))

    def _show(self, org: Org | None) -> None:
        escalations = Escalation.objects.select_related("org").order_by("org__slug")
        if org is None:
            for escalation in escalations:
                self.stdout.write(escalation_line(escalation))
            return
        escalation = escalations.filter(org=org).first()
        self.stdout.write(escalation_line(escalation) if escalation else f"{org.slug}  no escalation: nobody is told")

    def _set(self, org: Org, given: dict) -> None:
        outcome, warning = escalation_set(org=org, given=given)
        self.stdout.write(outcome)
        if warning:
            self.stderr.write(warning)


# --- validation: every refusal before anything is written ----------------------------------------------------


def _given_settings(options: dict) -> dict:
    """The Escalation settings `escalation set` names, validated; those it leaves out are absent."""
    given = {}
    if options["warn_minutes"] is not None:
        given["warn_minutes"] = warn_minutes_checked(options["warn_minutes"])
    for name in ("to_assignees", "to_leads"):
        if options[name] is not None:
            given[name] = options[name]
    if options["no_webhook"]:
        given["webhook_url"] = ""
    elif options["webhook"] is not None:
        given["webhook_url"] = webhook_url_checked(options["webhook"])
    return given

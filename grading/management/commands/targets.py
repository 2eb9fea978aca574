"""`manage.py targets`: service-level targets (within how long people decide an org's items of a kind, application
and reason; see grading/reviews/targets.py). The set-up page (reviewer/setup/) makes the same changes through the same
service (grading/management/service_targets.py): each re-dates the org's waiting reviews in the same transaction, so
no due time is ever read from targets that are gone."""

from django.core.management.base import BaseCommand, CommandError, CommandParser

from grading.management import selectors
from grading.management.orgs import org_from_option, org_listing
from grading.management.service_targets import (
    minutes_within,
    target_insert,
    target_line,
    target_remove,
    target_set,
)
from grading.models import ServiceTarget


class Command(BaseCommand):
    help = "Set, list or remove service-level targets: within how long people decide an org's queue items."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        target = actions.add_parser("set", help="add a target (last, unless --position or --ahead-of)")
        selectors.add_arguments(target, what="target")
        target.add_argument(
            "--ahead-of",
            type=int,
            help="add it at this target's position, moving that target and those right behind it one back",
        )
        within = target.add_mutually_exclusive_group(required=True)
        within.add_argument("--minutes", type=int, help="people decide within this many minutes of the routing")
        within.add_argument("--hours", type=int, help="the same, in hours")
        selectors.add_listing_and_removal(actions, listing="list", removal="remove", what="target")

    def handle(self, *args, action: str, org: str | None, **options) -> None:
        if action == "list":
            targets = ServiceTarget.objects.select_related("org").order_by("org__slug", "position")
            for target in org_listing(targets, org):
                self.stdout.write(target_line(target))
            return
        the_org = org_from_option(org)
        if action == "set":
            position = selectors.position_to_set(options, what="target")
            minutes = minutes_within(minutes=options["minutes"], hours=options["hours"])
            fields = selectors.fields(options, what="target") | {"minutes": minutes}
            ahead_of = options["ahead_of"]
            if ahead_of is None:
                outcome = target_set(org=the_org, position=position, replace=options["replace"], fields=fields)
            elif position is not None:
                raise CommandError("--ahead-of places the target: leave out --position")
            else:
                ahead_of = selectors.position_option(ahead_of, option="--ahead-of")
                outcome = target_insert(org=the_org, fields=fields, ahead_of=ahead_of)
        else:
            outcome = target_remove(org=the_org, position=selectors.position_option(options["position"]))
        self.stdout.write(outcome)

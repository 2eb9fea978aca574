"""`manage.py targets`: service-level targets (within how long people decide an org's items of a kind, application
and reason; see grading/reviews/targets.py). Until the app has a page for them, the only way to manage them besides
the Django shell. Every change re-dates the org's waiting reviews in the same transaction, so no due time is ever
read from targets that are gone."""

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.db.models import Max

from grading.management import selectors
from grading.management.options import duration_text
from grading.management.orgs import org_from_option, org_lock
from grading.models import Org, ServiceTarget
from grading.models.audit import audit_record
from grading.reviews.targets import due_times_refresh

# Read from the model, so the command refuses exactly what the column would.
# A target of more than a year is no service level anyone keeps; the cap also keeps `routed_at + minutes` far inside
# the range of a datetime, where a refresh of every waiting review of the org would otherwise fail.
MINUTES_MAX = 60 * 24 * 365
HOURS_MAX = MINUTES_MAX // 60


class Command(BaseCommand):
    help = "Set, list or remove service-level targets: within how long people decide an org's queue items."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        target = actions.add_parser("set", help="add a target (last, unless --position)")
        selectors.add_arguments(target, what="target")
        within = target.add_mutually_exclusive_group(required=True)
        within.add_argument("--minutes", type=int, help="people decide within this many minutes of the routing")
        within.add_argument("--hours", type=int, help="the same, in hours")
        selectors.add_listing_and_removal(actions, listing="list", removal="remove", what="target")

    def handle(self, *args, action: str, org: str | None, **options) -> None:
        if action == "list":
            self._list(org_from_option(org) if org else None)
            return
        the_org = org_from_option(org)
        if action == "set":
            position = selectors.position_to_set(options, what="target")
            fields = selectors.fields(options, what="target") | {"minutes": _minutes(options)}
            self._set(the_org, position=position, replace=options["replace"], fields=fields)
        else:
            self._remove(the_org, selectors.position_option(options["position"]))

    def _list(self, org: Org | None) -> None:
        targets = ServiceTarget.objects.select_related("org").order_by("org__slug", "position")
        for target in targets.filter(org=org) if org else targets:
            self.stdout.write(_target_line(target))

    def _set(self, org: Org, *, position: int | None, replace: bool, fields: dict) -> None:
        with transaction.atomic():
            org_lock(org)
            targets = ServiceTarget.objects.select_related("org").filter(org=org)
            if position is None:
                last = targets.aggregate(last=Max("position"))["last"] or 0
                position = selectors.next_position(org, last, what="target")
            taken = targets.filter(position=position).first()
            if taken is None:
                outcome = _target_create(org, position=position, fields=fields)
            elif not replace:
                raise CommandError(
                    f"position {position} in {org.slug} is taken by: {_target_text(taken)}; "
                    "add --replace to replace that target, or leave out --position to add this one last"
                )
            else:
                outcome = _target_replace(taken, fields=fields)
        self.stdout.write(outcome)

    def _remove(self, org: Org, position: int) -> None:
        with transaction.atomic():
            org_lock(org)
            target = ServiceTarget.objects.select_related("org").filter(org=org, position=position).first()
            if target is None:
                raise CommandError(f"no target at position {position} in {org.slug}; nothing removed")
            # Recorded first: once deleted, the target has no pk left to name.
            audit_record(action="service_target.delete", org=org, target=target, detail=_target_dict(target))
            target.delete()
            redated = due_times_refresh(org.pk)
        self.stdout.write(f"removed: {_target_line(target)}  ({_redated(redated)})")


# --- writes: inside the caller's transaction, with the org locked ---------------------------------------------


def _target_create(org: Org, *, position: int, fields: dict) -> str:
    target = ServiceTarget.objects.create(org=org, position=position, **fields)
    audit_record(action="service_target.create", org=org, target=target, detail=_target_dict(target))
    redated = due_times_refresh(org.pk)
    return f"created: {_target_line(target)}  ({_redated(redated)})"


def _target_replace(target: ServiceTarget, *, fields: dict) -> str:
    """Replaces the target in place (same row, same position)."""
    was = _target_dict(target)
    was_text = _target_text(target)
    for field, value in fields.items():
        setattr(target, field, value)
    if _target_dict(target) == was:
        return f"unchanged: {_target_line(target)}"
    target.save(update_fields=list(fields))
    audit_record(
        action="service_target.replace", org=target.org, target=target, detail=_target_dict(target) | {"was": was}
    )
    redated = due_times_refresh(target.org_id)
    return f"replaced: {_target_line(target)} (was {was_text})  ({_redated(redated)})"


# --- validation: every refusal before anything is written ----------------------------------------------------


def _minutes(options: dict) -> int:
    hours = options["hours"]
    if hours is not None:
        if not 1 <= hours <= HOURS_MAX:
            raise CommandError(f"--hours must be from 1 to {HOURS_MAX}")
        return hours * 60
    minutes = options["minutes"]
    if not 1 <= minutes <= MINUTES_MAX:
        raise CommandError(f"--minutes must be from 1 to {MINUTES_MAX}")
    return minutes


def _target_dict(target: ServiceTarget) -> dict:
    return selectors.as_dict(target) | {"minutes": target.minutes}


def _target_line(target: ServiceTarget) -> str:
    return f"{target.org.slug}  {target.position}  {_target_text(target)}"


def _target_text(target: ServiceTarget) -> str:
    matched = selectors.matched_text(target.kind, target.application, target.reason)
    return f"{matched}  within {duration_text(target.minutes)}"


def _redated(reviews: int) -> str:
    return f"re-dated {reviews} waiting item" if reviews == 1 else f"re-dated {reviews} waiting items"

"""`manage.py targets`: service-level targets (within how long people decide an org's items of a kind, application
and reason; see grading/reviews/targets.py). Until the app has a page for them, the only way to manage them besides
the Django shell. Every change re-dates the org's waiting reviews in the same transaction, so no due time is ever
read from targets that are gone."""

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.db.models import Max

from grading.core.outcomes import HUMAN_REASONS
from grading.management.options import POSITION_MAX, application_option, duration_text, position_option
from grading.management.orgs import org_from_option
from grading.models import ItemKind, Org, ServiceTarget
from grading.models.audit import audit_record
from grading.reviews.targets import AUDIT, due_times_refresh

# Read from the model, so the command refuses exactly what the column would.
# A target of more than a year is no service level anyone keeps; the cap also keeps `routed_at + minutes` far inside
# the range of a datetime, where a refresh of every waiting review of the org would otherwise fail.
MINUTES_MAX = 60 * 24 * 365
HOURS_MAX = MINUTES_MAX // 60
REASONS = (*HUMAN_REASONS, AUDIT)


class Command(BaseCommand):
    help = "Set, list or remove service-level targets: within how long people decide an org's queue items."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        target = actions.add_parser("set", help="add a target (last, unless --position)")
        target.add_argument("--org", required=True, help="org slug")
        target.add_argument("--kind", choices=ItemKind.values, default="", help="default: any kind")
        target.add_argument("--application", help="default: any application")
        target.add_argument("--reason", choices=REASONS, default="", help=f"default: any reason; {AUDIT}: the sample")
        within = target.add_mutually_exclusive_group(required=True)
        within.add_argument("--minutes", type=int, help="people decide within this many minutes of the routing")
        within.add_argument("--hours", type=int, help="the same, in hours")
        target.add_argument("--position", type=int, help="lower positions decide first (default: after the last)")
        target.add_argument("--replace", action="store_true", help="with --position: replace the target there, if any")
        listing = actions.add_parser("list", help="list targets, of every org unless --org")
        listing.add_argument("--org", help="org slug")
        remove = actions.add_parser("remove", help="delete the target at a position")
        remove.add_argument("--org", required=True, help="org slug")
        remove.add_argument("--position", type=int, required=True)

    def handle(self, *args, action: str, org: str | None, **options) -> None:
        if action == "list":
            self._list(org_from_option(org) if org else None)
            return
        the_org = org_from_option(org)
        if action == "set":
            position = _set_position(options)
            fields = _target_fields(options)
            self._set(the_org, position=position, replace=options["replace"], fields=fields)
        else:
            self._remove(the_org, position_option(options["position"]))

    def _list(self, org: Org | None) -> None:
        targets = ServiceTarget.objects.select_related("org").order_by("org__slug", "position")
        for target in targets.filter(org=org) if org else targets:
            self.stdout.write(_target_line(target))

    def _set(self, org: Org, *, position: int | None, replace: bool, fields: dict) -> None:
        with transaction.atomic():
            _org_lock(org)
            targets = ServiceTarget.objects.select_related("org").filter(org=org)
            if position is None:
                position = _next_position(org, targets.aggregate(last=Max("position"))["last"] or 0)
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
            _org_lock(org)
            target = ServiceTarget.objects.select_related("org").filter(org=org, position=position).first()
            if target is None:
                raise CommandError(f"no target at position {position} in {org.slug}; nothing removed")
            # Recorded first: once deleted, the target has no pk left to name.
            audit_record(action="service_target.delete", org=org, target=target, detail=_target_dict(target))
            target.delete()
            redated = due_times_refresh(org.pk)
        self.stdout.write(f"removed: {_target_line(target)}  ({_redated(redated)})")


# --- writes: inside the caller's transaction, with the org locked ---------------------------------------------


def _org_lock(org: Org) -> None:
    """Locks the org's row: two commands cannot both take the same last position, and changes of one org's targets
    run one after the other, so each refresh reads the targets as the change before it left them."""
    Org.objects.select_for_update(no_key=True).get(pk=org.pk)  # inserts that name the org go on


def _next_position(org: Org, last: int) -> int:
    if last >= POSITION_MAX:
        raise CommandError(f"the last target of {org.slug} is at position {POSITION_MAX}: give this one a --position")
    return last + 1


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


def _target_fields(options: dict) -> dict:
    """The ServiceTarget fields `targets set` describes (all but org and position)."""
    kind, reason = options["kind"], options["reason"]
    application = application_option(options["application"])
    if kind == ItemKind.DRAFT and application:
        raise CommandError("drafts are filed under no application: a draft target naming one would match nothing")
    return {"kind": kind, "application": application, "reason": reason, "minutes": _minutes(options)}


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


def _set_position(options: dict) -> int | None:
    if options["position"] is None:
        if options["replace"]:
            raise CommandError("--replace needs --position: the target to replace")
        return None
    return position_option(options["position"])


def _target_dict(target: ServiceTarget) -> dict:
    return {
        "position": target.position,
        "kind": target.kind,
        "application": target.application,
        "reason": target.reason,
        "minutes": target.minutes,
    }


def _target_line(target: ServiceTarget) -> str:
    return f"{target.org.slug}  {target.position}  {_target_text(target)}"


def _target_text(target: ServiceTarget) -> str:
    kind = target.kind or "any kind"
    application = target.application or "any application"
    reason = target.reason or "any reason"
    return f"{kind} · {application} · {reason}  within {duration_text(target.minutes)}"


def _redated(reviews: int) -> str:
    return f"re-dated {reviews} waiting item" if reviews == 1 else f"re-dated {reviews} waiting items"

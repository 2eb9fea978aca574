"""Changes to an org's service-level targets (grading/reviews/targets.py), one form for `manage.py targets` and the
set-up page (reviewer/setup/): add one last or at a free position, replace one in place (or only its duration),
insert one ahead of another, move one ahead of or behind its neighbour, remove one. Each runs in one transaction
with the org locked (`org_lock`), audits what it changed, and re-dates the org's waiting reviews, so no due time is
ever read from targets that are gone. A refusal (`ChangeRefused`, saying why and naming what to correct) comes before
anything is written."""

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Max, QuerySet

from grading.management import selectors
from grading.management.options import ChangeRefused, duration_text
from grading.management.orgs import org_lock
from grading.models import ApiKey, Org, ServiceTarget
from grading.models.audit import audit_record
from grading.reviews.targets import due_times_refresh

# A target of more than a year is no service level anyone keeps; the cap also keeps `routed_at + minutes` far inside
# the range of a datetime, where a refresh of every waiting review of the org would otherwise fail.
MINUTES_MAX = 60 * 24 * 365
HOURS_MAX = MINUTES_MAX // 60


def target_set(
    *,
    org: Org,
    fields: dict,
    position: int | None,
    replace: bool,
    actor: AbstractBaseUser | None = None,
    api_key: ApiKey | None = None,
) -> str:
    """Add a target (`fields`: kind, application, reason, minutes) at `position`, or after the last when None; a
    taken position is refused unless `replace`, which replaces that target in place (same row)."""
    with transaction.atomic():
        org_lock(org)
        targets = ServiceTarget.objects.select_related("org").filter(org=org)
        if position is None:
            last = targets.aggregate(last=Max("position"))["last"] or 0
            position = selectors.next_position(org, last, what="target")
        taken = targets.filter(position=position).first()
        if taken is None:
            return _target_create(org, position=position, fields=fields, acting=selectors.acting(actor, api_key))
        if not replace:
            raise ChangeRefused(
                f"position {position} in {org.slug} is taken by: {target_text(taken)}; "
                "add --replace to replace that target, or leave out --position to add this one last",
                field="position",
            )
        return _target_replace(taken, fields=fields, acting=selectors.acting(actor, api_key))


def target_insert(
    *, org: Org, fields: dict, ahead_of: int, actor: AbstractBaseUser | None = None, api_key: ApiKey | None = None
) -> str:
    """Add a target at the position of the target at `ahead_of`, so that it decides before it: that target and those
    right behind it without a free position between move one position back (a free position stops the shift, so the
    targets further back keep theirs)."""
    with transaction.atomic():
        org_lock(org)
        positions = set(ServiceTarget.objects.filter(org=org).values_list("position", flat=True))
        if ahead_of not in positions:
            raise ChangeRefused(f"no target at position {ahead_of} in {org.slug}; nothing added", field="ahead_of")
        run_end = ahead_of
        while run_end + 1 in positions:
            run_end += 1
        if run_end >= selectors.POSITION_MAX:
            raise ChangeRefused(
                f"the targets of {org.slug} from position {ahead_of} on reach position {selectors.POSITION_MAX}: "
                "remove one of them, or add this one last",
                field="ahead_of",
            )
        moving = ServiceTarget.objects.select_related("org").filter(
            org=org, position__gte=ahead_of, position__lte=run_end
        )
        # Back to front: each one's new position is free when it moves there.
        for target in moving.order_by("-position"):
            selectors.move_to(target, target.position + 1, kind=TARGETS, acting=selectors.acting(actor, api_key))
        return _target_create(org, position=ahead_of, fields=fields, acting=selectors.acting(actor, api_key))


def target_minutes_set(
    *, org: Org, position: int, minutes: int, actor: AbstractBaseUser | None = None, api_key: ApiKey | None = None
) -> str:
    """Give the target at `position` another duration, in place; what it picks stays."""
    with transaction.atomic():
        _, target = _locked_at(org, position, nothing="changed")
        return _target_replace(target, fields={"minutes": minutes}, acting=selectors.acting(actor, api_key))


def target_move(
    *, org: Org, position: int, earlier: bool, actor: AbstractBaseUser | None = None, api_key: ApiKey | None = None
) -> str:
    """Swap the target at `position` with the one before it (`earlier`) or after it: which of the two an item that
    both match takes its due time from."""
    with transaction.atomic():
        targets, target = _locked_at(org, position, nothing="moved")
        acting = selectors.acting(actor, api_key)
        neighbour = selectors.swap_with_neighbour(target, targets, earlier=earlier, kind=TARGETS, acting=acting)
        if neighbour is None:
            where = "first" if earlier else "last"
            return f"unchanged: {target_line(target)} is the {where} target"
        redated = due_times_refresh(org.pk)
    return f"moved: {target_line(target)} (was at {position})  ({redated_text(redated)})"


def target_remove(
    *, org: Org, position: int, actor: AbstractBaseUser | None = None, api_key: ApiKey | None = None
) -> str:
    with transaction.atomic():
        _, target = _locked_at(org, position, nothing="removed")
        # Recorded first: once deleted, the target has no pk left to name.
        audit_record(
            action="service_target.delete",
            org=org,
            **selectors.acting(actor, api_key),
            target=target,
            detail=target_dict(target),
        )
        target.delete()
        redated = due_times_refresh(org.pk)
    return f"removed: {target_line(target)}  ({redated_text(redated)})"


def minutes_within(*, minutes: int | None, hours: int | None) -> int:
    """The target's minutes, given in minutes or in hours (one of the two), within a year."""
    if hours is not None:
        if not 1 <= hours <= HOURS_MAX:
            raise ChangeRefused(f"--hours must be from 1 to {HOURS_MAX}", field="hours")
        return hours * 60
    if minutes is None or not 1 <= minutes <= MINUTES_MAX:
        raise ChangeRefused(f"--minutes must be from 1 to {MINUTES_MAX}", field="minutes")
    return minutes


# --- writes: inside the caller's transaction, with the org locked ---------------------------------------------


def _locked_at(org: Org, position: int, *, nothing: str) -> tuple[QuerySet[ServiceTarget], ServiceTarget]:
    """The org's targets and the one at `position`, with the org locked; refused when there is none."""
    org_lock(org)
    targets = ServiceTarget.objects.select_related("org").filter(org=org)
    return targets, selectors.at_position(targets, org, position, kind=TARGETS, nothing=nothing)


def _target_create(org: Org, *, position: int, fields: dict, acting: dict) -> str:
    target = ServiceTarget.objects.create(org=org, position=position, **fields)
    audit_record(action="service_target.create", org=org, **acting, target=target, detail=target_dict(target))
    redated = due_times_refresh(org.pk)
    return f"created: {target_line(target)}  ({redated_text(redated)})"


def _target_replace(target: ServiceTarget, *, fields: dict, acting: dict) -> str:
    """Replaces the target in place (same row, same position)."""
    was_text = target_text(target)
    was = selectors.replace_in_place(target, fields=fields, kind=TARGETS, acting=acting)
    if was is None:
        return f"unchanged: {target_line(target)}"
    redated = due_times_refresh(target.org_id)
    return f"replaced: {target_line(target)} (was {was_text})  ({redated_text(redated)})"


# --- how targets are printed and audited ----------------------------------------------------------------------


def target_dict(target: ServiceTarget) -> dict:
    return selectors.as_dict(target) | {"minutes": target.minutes}


TARGETS = selectors.Kind(what="target", described=target_dict, audited_as="service_target")


def target_line(target: ServiceTarget) -> str:
    return f"{target.org.slug}  {target.position}  {target_text(target)}"


def target_text(target: ServiceTarget) -> str:
    matched = selectors.matched_text(target.kind, target.application, target.reason)
    return f"{matched}  within {duration_text(target.minutes)}"


def redated_text(reviews: int) -> str:
    return f"re-dated {reviews} waiting item" if reviews == 1 else f"re-dated {reviews} waiting items"

"""Assignment rules (which items a person or a pool may claim first; see reviewer/queue/assignments.py), one form
for `manage.py assign rule` / `rule-move` / `rule-remove` and the set-up page (reviewer/setup/views.py): add one (last
or at a position), replace one in place, move one ahead of or behind its neighbour, remove one. Each change in one
transaction with the org locked, audited, and refused (`ChangeRefused`, saying why and naming what to correct) before
anything is written."""

from collections.abc import Callable

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Max

from grading.management import selectors
from grading.management.options import ChangeRefused
from grading.management.orgs import org_lock
from grading.models import ApiKey, ItemKind, Org
from grading.models.audit import audit_record
from grading.models.reach import Reach
from reviewer.models import AssignmentRule, Pool
from reviewer.queue.reads import applications_unknown
from reviewer.setup.pools import queue_reaches

# Past this, `routed_at + hours` leaves the range of a datetime and every claim in the org would fail; a rule
# meant to last longer than a year means "while it waits" (no hours).
HOURS_MAX = 24 * 365


def rule_add(
    *,
    org: Org,
    position: int | None,
    replace: bool,
    fields: dict,
    actor: AbstractBaseUser | None = None,
    api_key: ApiKey | None = None,
) -> str:
    """Add a rule at `position`, or after the last when None; a taken position is refused unless `replace`, which
    replaces that rule in place (same row)."""
    with transaction.atomic():
        org_lock(org)
        rules = AssignmentRule.objects.select_related("org", "person", "pool").filter(org=org)
        if position is None:
            last = rules.aggregate(last=Max("position"))["last"] or 0
            position = selectors.next_position(org, last, what="assignment rule")
        taken = rules.filter(position=position).first()
        if taken is None:
            rule = AssignmentRule.objects.create(org=org, position=position, **fields)
            audit_record(
                action="assignment_rule.create",
                org=org,
                actor=actor,
                api_key=api_key,
                target=rule,
                detail=rule_dict(rule),
            )
            return f"added: {rule_line(rule)}"
        if not replace:
            raise ChangeRefused(
                f"position {position} in {org.slug} is taken by: {rule_text(taken)}; "
                "add --replace to replace that rule, or leave out --position to add this one last",
                field="position",
            )
        was_text = rule_text(taken)
        acting = selectors.acting(actor, api_key)
        was = selectors.replace_in_place(taken, fields=fields, kind=RULES, acting=acting)
        if was is None:
            return f"unchanged: {rule_line(taken)}"
    return f"replaced: {rule_line(taken)} (was {was_text})"


def rule_move(
    *, org: Org, position: int, earlier: bool, actor: AbstractBaseUser | None = None, api_key: ApiKey | None = None
) -> str:
    """Swap the rule at `position` with the one before it (`earlier`) or after it: which of the two decides an item
    that both match. Audited per rule moved (`assignment_rule.move`, with where it was)."""
    with transaction.atomic():
        org_lock(org)
        rules = AssignmentRule.objects.select_related("org", "person", "pool").filter(org=org)
        rule = selectors.at_position(rules, org, position, kind=RULES, nothing="moved")
        acting = selectors.acting(actor, api_key)
        neighbour = selectors.swap_with_neighbour(rule, rules, earlier=earlier, kind=RULES, acting=acting)
        if neighbour is None:
            return f"unchanged: {rule_line(rule)} is the {'first' if earlier else 'last'} rule"
    return f"moved: {rule_line(rule)} (was at {position})"


def rule_remove(
    *, org: Org, position: int, actor: AbstractBaseUser | None = None, api_key: ApiKey | None = None
) -> str:
    with transaction.atomic():
        rules = AssignmentRule.objects.select_for_update(of=("self",)).select_related("org", "person", "pool")
        rule = selectors.at_position(rules.filter(org=org), org, position, kind=RULES, nothing="removed")
        # Recorded first: once deleted, the rule has no pk left to name.
        audit_record(
            action="assignment_rule.delete", org=org, actor=actor, api_key=api_key, target=rule, detail=rule_dict(rule)
        )
        rule.delete()
    return f"removed: {rule_line(rule)}"


def rule_fields(
    org: Org,
    *,
    selection: dict,
    hours: int | None,
    person: AbstractBaseUser | None,
    pool: str | None,
    warn: Callable[[str], None],
) -> dict:
    """The AssignmentRule fields of a rule for `person` or the pool named `pool` (`selection`: the kind, application
    and reason as `selectors.fields` reads them), refused unless the org knows the application it names (a typo would
    make a rule that picks nothing) and its assignee can claim what it names."""
    selected = selectors.fields(selection, what="rule")
    kind, application, reason = selected["kind"], selected["application"], selected["reason"]
    if application and (refusal := applications_unknown(org, [application])):
        raise ChangeRefused(refusal, field="application")
    if hours is not None and not 1 <= hours <= HOURS_MAX:
        raise ChangeRefused(
            f"--hours must be from 1 to {HOURS_MAX}; leave it out for as long as the item waits", field="hours"
        )
    fields = selected | {"hours": hours}
    if pool is not None:
        return fields | {"pool": _pool(org, pool), "person": None}
    reach = queue_reaches(org, [person], field="person")[person.pk]
    username = person.get_username()
    if not _covers_named(reach, kind, application):
        raise ChangeRefused(
            f"{username} cannot claim {selectors.matched_text(kind, application, reason)} in {org.slug}: "
            f"their reach there is {reach_text(reach)}",
            field="person",
        )
    # Allowed: a team lead may want the billing conversations of a person who covers only billing. But what
    # they cannot claim stays reserved for them all the same (reservations do not read the assignee's reach).
    if reach.limited and not application and kind != ItemKind.DRAFT:
        how_long = "while they wait" if hours is None else f"for {hours} h"
        warn(
            f"warning: {username}'s reach in {org.slug} is {reach_text(reach)}: they can claim only the items "
            f"of this rule their reach covers, and the others it matches stay reserved for them {how_long}"
        )
    return fields | {"person": person, "pool": None}


def _pool(org: Org, raw: str) -> Pool:
    pool = Pool.objects.filter(org=org, name=raw.strip()).first()
    if pool is None:
        raise ChangeRefused(f"no pool {raw!r} in {org.slug} (`assign pool` creates one)", field="pool")
    return pool


def _covers_named(reach: Reach, kind: str, application: str) -> bool:
    """Whether the reach covers the items of the kind and application the rule names (a rule naming an application
    matches only conversations: drafts are filed under none)."""
    if application:
        return reach.covers(ItemKind.CONVERSATION, application)
    return not kind or kind in reach.kinds()


def rule_dict(rule: AssignmentRule) -> dict:
    return selectors.as_dict(rule) | {
        "person": rule.person.get_username() if rule.person else None,
        "pool": rule.pool.name if rule.pool else None,
        "hours": rule.hours,
    }


RULES = selectors.Kind(what="assignment rule", described=rule_dict, audited_as="assignment_rule")


def rule_line(rule: AssignmentRule) -> str:
    return f"{rule.org.slug}  {rule.position}  {rule_text(rule)}"


def rule_text(rule: AssignmentRule) -> str:
    assignee = rule.person.get_username() if rule.person else f"pool {rule.pool.name}"
    how_long = "while it waits" if rule.hours is None else f"for {rule.hours} h"
    return f"{selectors.matched_text(rule.kind, rule.application, rule.reason)}  → {assignee}  {how_long}"


def reach_text(reach: Reach) -> str:
    if not reach.limited:
        return "the whole org"
    if not reach.applications:
        return "drafts only"
    named = "applications " + ", ".join(sorted(reach.applications))
    return f"{named} and drafts" if reach.drafts else named

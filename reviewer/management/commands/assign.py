"""`manage.py assign`: pools (named sets of an org's queue people) and assignment rules (which items a person or a
pool may claim first; see reviewer/queue/assignments.py). Pools change through the service the set-up page uses
(reviewer/setup/pools.py); rules only here and in the Django shell, until the app has a page for them."""

from collections.abc import Callable

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.db.models import Max

from grading.management import selectors
from grading.management.orgs import org_from_option, org_lock
from grading.models import ItemKind, Org
from grading.models.audit import audit_record
from grading.models.reach import Reach
from reviewer.models import AssignmentRule, Pool
from reviewer.setup.pools import listed, pool_line, pool_name, pool_remove, pool_set, queue_reaches

# Past this, `routed_at + hours` leaves the range of a datetime and every claim in the org would fail; a rule
# meant to last longer than a year means "while it waits" (no --hours).
HOURS_MAX = 24 * 365


class Command(BaseCommand):
    help = "Set, list or remove pools and assignment rules: who may claim an org's queue items first."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        pool = actions.add_parser("pool", help="create a pool, or set its members to exactly those listed")
        _add_pool_arguments(pool)
        pool.add_argument(
            "--members", required=True, help='comma-separated usernames of operators or leads of the org; "" for none'
        )
        pool_remove = actions.add_parser(
            "pool-remove", help="delete a pool, with the assignments and rules that name it"
        )
        _add_pool_arguments(pool_remove)
        pools = actions.add_parser("pools", help="list pools and their members, of every org unless --org")
        pools.add_argument("--org", help="org slug")

        rule = actions.add_parser("rule", help="add an assignment rule (last, unless --position)")
        selectors.add_arguments(rule, what="rule")
        assignee = rule.add_mutually_exclusive_group(required=True)
        assignee.add_argument("--person", help="username of an operator or lead of the org")
        assignee.add_argument("--pool", help="name of a pool of the org")
        rule.add_argument("--hours", type=int, help="for how long once the item waits (default: as long as it waits)")
        selectors.add_listing_and_removal(actions, listing="rules", removal="rule-remove", what="assignment rule")

    def handle(self, *args, action: str, org: str | None, **options) -> None:
        if action == "pools":
            self._pools(org_from_option(org) if org else None)
            return
        if action == "rules":
            self._rules(org_from_option(org) if org else None)
            return
        the_org = org_from_option(org)
        if action == "pool":
            name = pool_name(options["name"])
            members = _users(_usernames(options["members"]))
            self.stdout.write(pool_set(org=the_org, name=name, members=members))
        elif action == "pool-remove":
            self.stdout.write(pool_remove(org=the_org, name=pool_name(options["name"])))
        elif action == "rule":
            position = selectors.position_to_set(options, what="rule")
            fields = _rule_fields(the_org, options, warn=self.stderr.write)
            self._rule_add(the_org, position=position, replace=options["replace"], fields=fields)
        else:
            self._rule_remove(the_org, selectors.position_option(options["position"]))

    # --- pools ----------------------------------------------------------------------------------------------

    def _pools(self, org: Org | None) -> None:
        pools = Pool.objects.select_related("org").prefetch_related("members").order_by("org__slug", "name")
        for pool in pools.filter(org=org) if org else pools:
            self.stdout.write(pool_line(pool))

    # --- rules ----------------------------------------------------------------------------------------------

    def _rules(self, org: Org | None) -> None:
        rules = AssignmentRule.objects.select_related("org", "person", "pool").order_by("org__slug", "position")
        for rule in rules.filter(org=org) if org else rules:
            self.stdout.write(_rule_line(rule))

    def _rule_add(self, org: Org, *, position: int | None, replace: bool, fields: dict) -> None:
        with transaction.atomic():
            org_lock(org)
            rules = AssignmentRule.objects.select_related("org", "person", "pool").filter(org=org)
            if position is None:
                last = rules.aggregate(last=Max("position"))["last"] or 0
                position = selectors.next_position(org, last, what="assignment rule")
            taken = rules.filter(position=position).first()
            if taken is None:
                rule = AssignmentRule.objects.create(org=org, position=position, **fields)
                audit_record(action="assignment_rule.create", org=org, target=rule, detail=_rule_dict(rule))
                self.stdout.write(f"added: {_rule_line(rule)}")
                return
            if not replace:
                raise CommandError(
                    f"position {position} in {org.slug} is taken by: {_rule_text(taken)}; "
                    "add --replace to replace that rule, or leave out --position to add this one last"
                )
            was = _rule_dict(taken)
            was_text = _rule_text(taken)
            for field, value in fields.items():
                setattr(taken, field, value)
            if _rule_dict(taken) == was:
                self.stdout.write(f"unchanged: {_rule_line(taken)}")
                return
            taken.save(update_fields=list(fields))
            audit_record(
                action="assignment_rule.replace", org=org, target=taken, detail=_rule_dict(taken) | {"was": was}
            )
        self.stdout.write(f"replaced: {_rule_line(taken)} (was {was_text})")

    def _rule_remove(self, org: Org, position: int) -> None:
        with transaction.atomic():
            rule = (
                AssignmentRule.objects.select_for_update(of=("self",))
                .select_related("org", "person", "pool")
                .filter(org=org, position=position)
                .first()
            )
            if rule is None:
                raise CommandError(f"no assignment rule at position {position} in {org.slug}; nothing removed")
            # Recorded first: once deleted, the rule has no pk left to name.
            audit_record(action="assignment_rule.delete", org=org, target=rule, detail=_rule_dict(rule))
            rule.delete()
        self.stdout.write(f"removed: {_rule_line(rule)}")


def _add_pool_arguments(parser: CommandParser) -> None:
    parser.add_argument("--org", required=True, help="org slug")
    parser.add_argument("--name", required=True, help="the pool's name, unique in the org")


# --- validation: every refusal before anything is written ----------------------------------------------------


def _usernames(raw: str) -> list[str]:
    names = [] if not raw.strip() else [name.strip() for name in raw.split(",")]
    if "" in names:
        raise CommandError(f"--members {raw!r} has an empty username")
    return sorted(set(names))


def _users(usernames: list[str]) -> list[AbstractBaseUser]:
    user_model = get_user_model()
    users = list(user_model._default_manager.filter(**{f"{user_model.USERNAME_FIELD}__in": usernames}))
    missing = sorted(set(usernames) - {user.get_username() for user in users})
    if missing:
        # Making people is the admin's job (passwords, e-mail); a typo here must not create a stranger.
        raise CommandError(
            f"no user {listed(missing)}: users must exist first "
            "(create one in the Django admin, or with `python manage.py createsuperuser`)"
        )
    return sorted(users, key=lambda user: user.get_username())


def _rule_fields(org: Org, options: dict, *, warn: Callable[[str], None]) -> dict:
    """The AssignmentRule fields `assign rule` describes, refused unless its assignee can claim what it names."""
    selected = selectors.fields(options, what="rule")
    kind, application, reason, hours = selected["kind"], selected["application"], selected["reason"], options["hours"]
    if hours is not None and not 1 <= hours <= HOURS_MAX:
        raise CommandError(f"--hours must be from 1 to {HOURS_MAX}; leave it out for as long as the item waits")
    fields = selected | {"hours": hours}
    if options["pool"] is not None:
        return fields | {"pool": _pool(org, options["pool"]), "person": None}
    (person,) = _users([options["person"].strip()])
    reach = queue_reaches(org, [person])[person.pk]
    username = person.get_username()
    if not _covers_named(reach, kind, application):
        raise CommandError(
            f"{username} cannot claim {selectors.matched_text(kind, application, reason)} in {org.slug}: "
            f"their reach there is {_reach_text(reach)}"
        )
    # Allowed: a team lead may want the billing conversations of a person who covers only billing. But what
    # they cannot claim stays reserved for them all the same (reservations do not read the assignee's reach).
    if reach.limited and not application and kind != ItemKind.DRAFT:
        how_long = "while they wait" if hours is None else f"for {hours} h"
        warn(
            f"warning: {username}'s reach in {org.slug} is {_reach_text(reach)}: they can claim only the items "
            f"of this rule their reach covers, and the others it matches stay reserved for them {how_long}"
        )
    return fields | {"person": person, "pool": None}


def _pool(org: Org, raw: str) -> Pool:
    pool = Pool.objects.filter(org=org, name=raw.strip()).first()
    if pool is None:
        raise CommandError(f"no pool {raw!r} in {org.slug} (`assign pool` creates one)")
    return pool


def _covers_named(reach: Reach, kind: str, application: str) -> bool:
    """Whether the reach covers the items of the kind and application the rule names (a rule naming an application
    matches only conversations: drafts are filed under none)."""
    if application:
        return reach.covers(ItemKind.CONVERSATION, application)
    return not kind or kind in reach.kinds()


def _rule_dict(rule: AssignmentRule) -> dict:
    return selectors.as_dict(rule) | {
        "person": rule.person.get_username() if rule.person else None,
        "pool": rule.pool.name if rule.pool else None,
        "hours": rule.hours,
    }


def _rule_line(rule: AssignmentRule) -> str:
    return f"{rule.org.slug}  {rule.position}  {_rule_text(rule)}"


def _rule_text(rule: AssignmentRule) -> str:
    assignee = rule.person.get_username() if rule.person else f"pool {rule.pool.name}"
    how_long = "while it waits" if rule.hours is None else f"for {rule.hours} h"
    return f"{selectors.matched_text(rule.kind, rule.application, rule.reason)}  → {assignee}  {how_long}"


def _reach_text(reach: Reach) -> str:
    if not reach.limited:
        return "the whole org"
    if not reach.applications:
        return "drafts only"
    named = "applications " + ", ".join(sorted(reach.applications))
    return f"{named} and drafts" if reach.drafts else named

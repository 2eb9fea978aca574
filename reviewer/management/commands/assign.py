"""`manage.py assign`: pools (named sets of an org's queue people) and assignment rules (which items a person or a
pool may claim first; see reviewer/queue/assignments.py). Pools and rules change through the services the set-up
pages use (reviewer/setup/pools.py, reviewer/setup/rules.py)."""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core.management.base import BaseCommand, CommandError, CommandParser

from grading.management import selectors
from grading.management.orgs import org_from_option, org_listing
from reviewer.models import AssignmentRule, Pool
from reviewer.setup.pools import listed, pool_line, pool_name, pool_remove, pool_rename, pool_set
from reviewer.setup.rules import rule_add, rule_fields, rule_line, rule_move, rule_remove


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
        pool_rename = actions.add_parser("pool-rename", help="give a pool another name (its members, rules stay)")
        _add_pool_arguments(pool_rename)
        pool_rename.add_argument("--to", required=True, help="the pool's new name, unique in the org")
        pools = actions.add_parser("pools", help="list pools and their members, of every org unless --org")
        pools.add_argument("--org", help="org slug")

        rule = actions.add_parser("rule", help="add an assignment rule (last, unless --position)")
        selectors.add_arguments(rule, what="rule")
        assignee = rule.add_mutually_exclusive_group(required=True)
        assignee.add_argument("--person", help="username of an operator or lead of the org")
        assignee.add_argument("--pool", help="name of a pool of the org")
        rule.add_argument("--hours", type=int, help="for how long once the item waits (default: as long as it waits)")
        selectors.add_listing_and_removal(actions, listing="rules", removal="rule-remove", what="assignment rule")
        rule_move = actions.add_parser("rule-move", help="swap a rule with the one before (--earlier) or after it")
        rule_move.add_argument("--org", required=True, help="org slug")
        rule_move.add_argument("--position", type=int, required=True)
        direction = rule_move.add_mutually_exclusive_group(required=True)
        direction.add_argument("--earlier", action="store_true")
        direction.add_argument("--later", action="store_true")

    def handle(self, *args, action: str, org: str | None, **options) -> None:
        if action == "pools":
            pools = Pool.objects.select_related("org").prefetch_related("members").order_by("org__slug", "name")
            for pool in org_listing(pools, org):
                self.stdout.write(pool_line(pool))
            return
        if action == "rules":
            rules = AssignmentRule.objects.select_related("org", "person", "pool").order_by("org__slug", "position")
            for rule in org_listing(rules, org):
                self.stdout.write(rule_line(rule))
            return
        the_org = org_from_option(org)
        if action == "pool":
            name = pool_name(options["name"])
            members = _users(_usernames(options["members"]))
            self.stdout.write(pool_set(org=the_org, name=name, members=members))
        elif action == "pool-remove":
            self.stdout.write(pool_remove(org=the_org, name=pool_name(options["name"])))
        elif action == "pool-rename":
            name, to = pool_name(options["name"]), pool_name(options["to"], option="--to")
            self.stdout.write(pool_rename(org=the_org, name=name, to=to))
        elif action == "rule":
            position = selectors.position_to_set(options, what="rule")
            person = None if options["person"] is None else _users([options["person"].strip()])[0]
            fields = rule_fields(
                the_org,
                selection=options,
                hours=options["hours"],
                person=person,
                pool=options["pool"],
                warn=self.stderr.write,
            )
            self.stdout.write(rule_add(org=the_org, position=position, replace=options["replace"], fields=fields))
        elif action == "rule-move":
            position = selectors.position_option(options["position"])
            self.stdout.write(rule_move(org=the_org, position=position, earlier=options["earlier"]))
        else:
            self.stdout.write(rule_remove(org=the_org, position=selectors.position_option(options["position"])))


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

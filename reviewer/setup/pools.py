"""Pools (named sets of an org's queue people that assignment rules and leads reserve items for), one form for
`manage.py assign pool` / `pool-rename` / `pool-remove` and the set-up page (reviewer/setup/views.py): each change
in one transaction, audited, and refused (`ChangeRefused`, saying why and naming what to correct) before anything is
written."""

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction

from grading.management.options import ChangeRefused, text_option
from grading.management.orgs import org_lock
from grading.models import ApiKey, Org
from grading.models.audit import audit_record
from grading.models.reach import Reach
from reviewer.access import reaches_in
from reviewer.models import Assignment, AssignmentRule, Pool
from reviewer.queue.assignments import QUEUE_ROLES

# Read from the model, so the command and the page refuse exactly what the column would.
POOL_NAME_MAX = Pool._meta.get_field("name").max_length


def pool_name(raw: str, *, option: str = "--name") -> str:
    return text_option(raw, option=option, empty="a pool needs a name", names="pool names", limit=POOL_NAME_MAX)


def queue_reaches(org: Org, users: list[AbstractBaseUser], *, field: str = "members") -> dict[int, Reach]:
    """What each user's queue memberships (operator, lead) cover in the org; refused (at `field`, where the users
    were named) for anyone without one: nobody else can claim a queue item, so nobody else can be assigned one."""
    reaches = reaches_in(org.pk, *QUEUE_ROLES)
    outsiders = sorted(user.get_username() for user in users if user.pk not in reaches)
    if outsiders:
        raise ChangeRefused(
            f"not operator or lead in {org.slug}: {listed(outsiders)}; only people who can work the queue can be "
            "assigned items (an org admin gives them a role: /org/ or `python manage.py member add`)",
            field=field,
        )
    return {user.pk: reaches[user.pk] for user in users}


def pool_set(
    *,
    org: Org,
    name: str,
    members: list[AbstractBaseUser],
    actor: AbstractBaseUser | None = None,
    api_key: ApiKey | None = None,
) -> str:
    """Create the pool `name` with `members`, or set an existing one's members to exactly those."""
    queue_reaches(org, members)
    after = sorted(member.get_username() for member in members)
    with transaction.atomic():
        pool = Pool.objects.select_for_update().filter(org=org, name=name).first()
        if pool is None:
            pool = Pool.objects.create(org=org, name=name)
            before = None
            action, detail = "pool.create", {"name": name, "members": after}
        else:
            before = usernames_of(pool)
            if before == after:
                return f"unchanged: {pool_line(pool)}"
            action, detail = "pool.update", {"name": name, "before": {"members": before}, "after": {"members": after}}
        pool.members.set(members)
        audit_record(action=action, org=org, actor=actor, api_key=api_key, target=pool, detail=detail)
    if before is None:
        return f"created: {pool_line(pool)}"
    return f"updated: {pool_line(pool)} (was {members_text(before)})"


def pool_rename(
    *, org: Org, name: str, to: str, actor: AbstractBaseUser | None = None, api_key: ApiKey | None = None
) -> str:
    """Give the pool `name` the name `to`: its members, and the assignments and rules that name it, stay with it
    (they hold the pool, not its name)."""
    with transaction.atomic():
        org_lock(org)
        pool = Pool.objects.select_for_update().select_related("org").filter(org=org, name=name).first()
        if pool is None:
            raise ChangeRefused(f"no pool {name!r} in {org.slug}; nothing renamed", field="name")
        if to == name:
            return f"unchanged: {pool_line(pool)}"
        taken = ChangeRefused(f"{org.slug} has a pool {to!r} already: choose another name", field="to")
        if Pool.objects.filter(org=org, name=to).exists():
            raise taken
        pool.name = to
        try:
            with transaction.atomic():
                pool.save(update_fields=["name"])
        except IntegrityError:  # created a moment ago by `pool_set`, which does not lock the org
            raise taken from None
        audit_record(
            action="pool.rename",
            org=org,
            actor=actor,
            api_key=api_key,
            target=pool,
            detail={"before": {"name": name}, "after": {"name": to}},
        )
    return f"renamed: {pool_line(pool)} (was {name})"


def pool_remove(*, org: Org, name: str, actor: AbstractBaseUser | None = None, api_key: ApiKey | None = None) -> str:
    """Delete the pool, with the assignments and rules that name it."""
    with transaction.atomic():
        pool = Pool.objects.select_for_update().filter(org=org, name=name).first()
        if pool is None:
            raise ChangeRefused(f"no pool {name!r} in {org.slug}; nothing removed", field="name")
        # The database deletes these with the pool (on_delete CASCADE): counted first, so the trail says what went.
        assignments = Assignment.objects.filter(pool=pool).count()
        rules = AssignmentRule.objects.filter(pool=pool).count()
        # Recorded first: once deleted, the pool has no pk left to name.
        audit_record(
            action="pool.delete",
            org=org,
            actor=actor,
            api_key=api_key,
            target=pool,
            detail={"name": name, "members": usernames_of(pool), "assignments": assignments, "rules": rules},
        )
        pool.delete()
    return (
        f"removed: {org.slug}  {name}, and with it {_count(assignments, 'assignment')} by hand"
        f" and {_count(rules, 'assignment rule')} naming it"
    )


def usernames_of(pool: Pool) -> list[str]:
    return sorted(member.get_username() for member in pool.members.all())


def pool_line(pool: Pool) -> str:
    return f"{pool.org.slug}  {pool.name}  {members_text(usernames_of(pool))}"


def members_text(usernames: list[str]) -> str:
    return listed(usernames) or "no members"


def listed(names: list[str]) -> str:
    return ", ".join(names)


def _count(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}s"

from typing import TypeVar

from django.core.management.base import CommandError
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.models import Model, QuerySet

from grading.models import Org


def org_from_option(slug: str | None) -> Org:
    """The org a command acts on: `--org SLUG`, or the only org there is. Refused with what to run or to type:
    before the database is migrated, for an unknown slug, or without `--org` when there is not exactly one org."""
    require_migrated()
    if slug:
        org = Org.objects.filter(slug=slug).first()
        if org is None:
            raise CommandError(f"no org with slug {slug!r}; {_orgs_here()}")
        return org
    orgs = list(Org.objects.all()[:2])
    if len(orgs) != 1:
        raise CommandError(f"say which org with --org SLUG; {_orgs_here()}")
    return orgs[0]


Row = TypeVar("Row", bound=Model)


def org_listing(rows: QuerySet[Row], slug: str | None) -> QuerySet[Row]:
    """What a command's listing shows: the rows of the org `--org SLUG` names (refused as `org_from_option` refuses),
    or every org's without it."""
    return rows.filter(org=org_from_option(slug)) if slug else rows


def org_lock(org: Org) -> None:
    """Locks the org's row for the rest of the transaction, so the changes of one org's settings run one after the
    other: two commands cannot both take the same last position or both create the org's escalation, and each
    change reads what the one before it left (a target's refresh of the due times). FOR NO KEY UPDATE: rows that
    only reference the org go on (inserts that name it, the escalation sweep's notices), where a plain FOR UPDATE
    would keep a sweep waiting on the org while the command waits on the sweep's escalation row."""
    Org.objects.select_for_update(no_key=True).get(pk=org.pk)


def require_migrated() -> None:
    executor = MigrationExecutor(connection)
    unapplied = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if unapplied:
        raise CommandError(
            f"the database is not set up yet ({len(unapplied)} migration(s) not applied): "
            "run `python manage.py migrate` first (`make demo` does it too)"
        )


def _orgs_here() -> str:
    slugs = list(Org.objects.order_by("slug").values_list("slug", flat=True)[:21])
    if not slugs:
        return (
            "there is no org yet: `python manage.py org add --slug SLUG --name NAME` makes one (`make demo` seeds one)"
        )
    listed = ", ".join(slugs[:20]) + (", …" if len(slugs) > 20 else "")
    return f"orgs here: {listed}"

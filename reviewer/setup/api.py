"""The set-up pages' lists over the API, for the key's org: its service-level targets and assignment rules in the
order they decide, and its pools with their members. Reads only; the changes stay on the pages and the commands."""

from django.http import HttpRequest
from ninja import Router, Schema

from grading.reviews.targets import targets_of
from reviewer.models import AssignmentRule, Pool
from reviewer.setup.pools import usernames_of

router = Router(tags=["setup"])


class TargetOut(Schema):
    position: int  # the lowest position among the targets that match an item gives its due time
    kind: str | None  # null: any (and so for application and reason)
    application: str | None
    reason: str | None  # a routing reason, or audit for the audit sample
    minutes: int  # people decide within this long of the item's routing to them


class PoolOut(Schema):
    name: str
    members: list[str]  # usernames


class RuleOut(Schema):
    position: int  # the lowest position among the rules that match an item decides who may claim it first
    kind: str | None  # null: any (and so for application and reason)
    application: str | None
    reason: str | None
    person: str | None  # a username, or
    pool: str | None  # a pool's name
    hours: int | None  # reserved for this long after routing; null: for as long as it waits


@router.get("/setup/targets", response=list[TargetOut], summary="The org's service-level targets, in order")
def get_setup_targets(request: HttpRequest) -> list[dict]:
    return [
        {"position": t.position, "kind": t.kind or None, "application": t.application or None,
         "reason": t.reason or None, "minutes": t.minutes}
        for t in targets_of(request.auth.org_id)
    ]  # fmt: skip


@router.get("/setup/pools", response=list[PoolOut], summary="The org's pools and their members")
def get_setup_pools(request: HttpRequest) -> list[dict]:
    pools = Pool.objects.filter(org=request.auth.org).prefetch_related("members").order_by("name")
    return [{"name": pool.name, "members": usernames_of(pool)} for pool in pools]


@router.get("/setup/rules", response=list[RuleOut], summary="The org's assignment rules, in order")
def get_setup_rules(request: HttpRequest) -> list[dict]:
    rules = AssignmentRule.objects.filter(org=request.auth.org).select_related("person", "pool").order_by("position")
    return [
        {"position": r.position, "kind": r.kind or None, "application": r.application or None,
         "reason": r.reason or None, "person": r.person.get_username() if r.person else None,
         "pool": r.pool.name if r.pool else None, "hours": r.hours}
        for r in rules
    ]  # fmt: skip

"""The set-up pages over the API, for the caller's org: its service-level targets and assignment rules in the order
they decide, its pools with their members, and the changes the pages make to them (reviewer/setup/views.py), through
the same services (grading/management/service_targets.py, reviewer/setup/pools.py and rules.py), so each change is
refused, re-dates the waiting items and is audited exactly as the page's, with the org's key or the token's person
as actor.

An org's key sets up its org; a personal token only when its person sets it up on the pages: an org admin, or a
lead of the whole org (`setup_org_ids`; the token's table lets org admins and leads through, and the lead of part of
an org is refused here, 403). A bad body is a 400 naming every wrong field at once; an org has no other org's
targets, rules or pools to name (404); a change that cannot be made as things stand is a 409. Nothing is written on
a refusal.

Targets and rules are addressed by their position (1 decides first); each write answers the whole list in its new
order, since an insert or a move shifts positions. Pools are addressed by name."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Literal, TypeVar

from django.http import HttpRequest, HttpResponse
from ninja import Path, Router, Schema, Status
from ninja.errors import HttpError, ValidationError
from pydantic import Field

from grading.api.errors import ErrorOut
from grading.api.keys import caller_acting
from grading.api.views import api
from grading.core.schemas import Identifier
from grading.management import selectors
from grading.management.options import ChangeRefused
from grading.management.service_targets import (
    minutes_within,
    target_insert,
    target_minutes_set,
    target_move,
    target_remove,
    target_set,
)
from grading.models import ItemKind, Org
from grading.reviews.targets import targets_of
from reviewer.access import people_of, setup_org_ids
from reviewer.models import AssignmentRule, Pool
from reviewer.queue.reads import applications_unknown
from reviewer.setup.pools import pool_name, pool_remove, pool_rename, pool_set, queue_reaches, usernames_of
from reviewer.setup.rules import HOURS_MAX, rule_add, rule_fields, rule_move, rule_remove

router = Router(tags=["setup"])

Kind = Literal[ItemKind.CONVERSATION.value, ItemKind.DRAFT.value]
Reason = Literal[selectors.REASONS]
Position = Annotated[int, Path(ge=1, le=selectors.POSITION_MAX)]  # 1 decides first
Name = Annotated[Identifier, Field(max_length=1_000)]
MISSING = {404: ErrorOut}
CONFLICT = {409: ErrorOut}  # why, in words; nothing was written
Checked = TypeVar("Checked")


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


class TargetIn(Schema):
    kind: Kind | None = None  # null: any kind (and so for application and reason)
    application: Name | None = None  # one of the org's applications (conversations only)
    reason: Reason | None = None  # a routing reason, or audit for the audit sample
    minutes: int  # people decide within this long of the item's routing to them
    ahead_of: int | None = Field(default=None, ge=1, le=selectors.POSITION_MAX)  # null: after the last


class MinutesIn(Schema):
    minutes: int  # the target's new duration; what it picks stays


class MoveIn(Schema):
    direction: Literal["earlier", "later"]  # swap with the one before it (decides first) or after it


class PoolIn(Schema):
    members: list[Name]  # usernames of the org's operators and leads: exactly the pool's members afterwards


class PoolRenameIn(Schema):
    name: Name  # the pool's new name; its members, assignments and rules stay with it


class RuleIn(Schema):
    kind: Kind | None = None  # null: any kind (and so for application and reason)
    application: Name | None = None
    reason: Reason | None = None
    person: Name | None = None  # a username: who may claim the items first, or
    pool: Name | None = None  # a pool's name
    hours: int | None = None  # reserved for this long after routing; null: for as long as it waits


def _setup_org(request: HttpRequest) -> Org:
    """The org the caller sets up: an org key's; a person's token only when its person sets the org up on the pages
    (an org admin, a lead of the whole org)."""
    person = request.auth.person
    if person is not None and request.auth.org_id not in setup_org_ids(person):
        raise HttpError(403, "a lead of part of an org does not set up its queue: ask an org admin")
    return request.auth.org


class _Refusals:
    """The refusals of a body's fields, gathered so that a 400 names every wrong field at once."""

    def __init__(self) -> None:
        self.errors: list[dict] = []

    def add(self, field: str | None, message: str) -> None:
        self.errors.append({"loc": ["body", field or "body"], "msg": message})

    def refused(self, refusal: ChangeRefused) -> None:
        self.add(refusal.field, refusal.said())

    def checked(self, check: Callable[[], Checked], *, field: str | None = None) -> Checked | None:
        """What a service's check answers; None, its refusal gathered (at `field`, else at the field it names), when
        it refuses."""
        try:
            return check()
        except ChangeRefused as refusal:
            self.add(field or refusal.field, refusal.said())
            return None

    def raise_any(self) -> None:
        if self.errors:
            raise ValidationError(self.errors)


def change_refused(request: HttpRequest, refusal: ChangeRefused) -> HttpResponse:
    """A set-up service's refusal that no route read as a field's (a change the org's set-up cannot take): a 409
    with its words, nothing written. Registered with the API once, in reviewer/apps.py."""
    return api.create_response(request, {"detail": refusal.said()}, status=409)


def _selection(org: Org, refusals: _Refusals, payload: TargetIn | RuleIn, *, what: str) -> dict | None:
    """The kind, application and reason a target or rule picks, its refusals gathered; None when refused."""
    application = (payload.application or "").strip()
    if application and (unknown := applications_unknown(org, [application])):
        refusals.add("application", unknown)
    selection = {"kind": payload.kind or "", "application": application or None, "reason": payload.reason or ""}
    return refusals.checked(lambda: selectors.fields(selection, what=what))


def _minutes(refusals: _Refusals, minutes: int) -> int | None:
    """A target's duration as the service checks it; None, refused, out of bounds."""
    return refusals.checked(lambda: minutes_within(minutes=minutes, hours=None))


@dataclass(frozen=True)
class _Ordered:
    """A list kept in the order it decides (the first match wins), addressed by position: the targets, the rules."""

    at: Callable[[Org, int], None]  # a 404 unless a row stands at the position
    listed: Callable[[Org], list[dict]]  # the whole list, as each write answers it
    move: Callable[..., str]
    remove: Callable[..., str]


def _moved(request: HttpRequest, ordered: _Ordered, position: int, payload: MoveIn) -> list[dict]:
    org = _setup_org(request)
    ordered.at(org, position)
    earlier = payload.direction == "earlier"
    ordered.move(org=org, position=position, earlier=earlier, **caller_acting(request.auth))
    return ordered.listed(org)


def _removed(request: HttpRequest, ordered: _Ordered, position: int) -> list[dict]:
    org = _setup_org(request)
    ordered.at(org, position)
    ordered.remove(org=org, position=position, **caller_acting(request.auth))
    return ordered.listed(org)


# --- service-level targets ------------------------------------------------------------------------------------


def _targets_out(org: Org) -> list[dict]:
    return [
        {"position": t.position, "kind": t.kind or None, "application": t.application or None,
         "reason": t.reason or None, "minutes": t.minutes}
        for t in targets_of(org.pk)
    ]  # fmt: skip


def _target_at(org: Org, position: int) -> None:
    if not any(target.position == position for target in targets_of(org.pk)):
        raise HttpError(404, f"no target at position {position}")


_TARGETS = _Ordered(at=_target_at, listed=_targets_out, move=target_move, remove=target_remove)


@router.get("/setup/targets", response=list[TargetOut], summary="The org's service-level targets, in order")
def get_setup_targets(request: HttpRequest) -> list[dict]:
    return _targets_out(_setup_org(request))


@router.post(
    "/setup/targets",
    response={201: list[TargetOut], **MISSING, **CONFLICT},
    summary="Add a service-level target, after the last or ahead of another",
)
def post_setup_target(request: HttpRequest, payload: TargetIn) -> Status[list[TargetOut]]:
    """As the targets page's form: the waiting items it picks are re-dated at once. 404 when `ahead_of` names no
    target; 409 when no position is left."""
    org = _setup_org(request)
    refusals = _Refusals()
    selection = _selection(org, refusals, payload, what="target")
    minutes = _minutes(refusals, payload.minutes)
    refusals.raise_any()
    fields = selection | {"minutes": minutes}
    if payload.ahead_of is not None:
        _target_at(org, payload.ahead_of)
    if payload.ahead_of is None:
        target_set(org=org, fields=fields, position=None, replace=False, **caller_acting(request.auth))
    else:
        target_insert(org=org, fields=fields, ahead_of=payload.ahead_of, **caller_acting(request.auth))
    return Status(201, _targets_out(org))


@router.patch(
    "/setup/targets/{position}",
    response={200: list[TargetOut], **MISSING, **CONFLICT},
    summary="Give a service-level target another duration",
)
def patch_setup_target(request: HttpRequest, position: Position, payload: MinutesIn) -> list[dict]:
    org = _setup_org(request)
    refusals = _Refusals()
    minutes = _minutes(refusals, payload.minutes)
    refusals.raise_any()
    _target_at(org, position)
    target_minutes_set(org=org, position=position, minutes=minutes, **caller_acting(request.auth))
    return _targets_out(org)


@router.post(
    "/setup/targets/{position}/move",
    response={200: list[TargetOut], **MISSING, **CONFLICT},
    summary="Swap a service-level target with the one before or after it",
)
def post_setup_target_move(request: HttpRequest, position: Position, payload: MoveIn) -> list[dict]:
    return _moved(request, _TARGETS, position, payload)


@router.delete(
    "/setup/targets/{position}",
    response={200: list[TargetOut], **MISSING, **CONFLICT},
    summary="Remove a service-level target",
)
def delete_setup_target(request: HttpRequest, position: Position) -> list[dict]:
    return _removed(request, _TARGETS, position)


# --- pools ------------------------------------------------------------------------------------------------------


def _pool_out(org: Org, name: str) -> dict:
    pool = Pool.objects.prefetch_related("members").get(org=org, name=name)
    return {"name": pool.name, "members": usernames_of(pool)}


def _pool_named(org: Org, name: str) -> Pool:
    pool = Pool.objects.filter(org=org, name=name).first()
    if pool is None:
        raise HttpError(404, f"no pool named {name!r}")
    return pool


@router.get("/setup/pools", response=list[PoolOut], summary="The org's pools and their members")
def get_setup_pools(request: HttpRequest) -> list[dict]:
    pools = Pool.objects.filter(org=_setup_org(request)).prefetch_related("members").order_by("name")
    return [{"name": pool.name, "members": usernames_of(pool)} for pool in pools]


@router.put(
    "/setup/pools/{pool}",
    response={200: PoolOut, **CONFLICT},
    summary="Create a pool, or set an existing one's members to exactly these",
)
def put_setup_pool(request: HttpRequest, pool: Name, payload: PoolIn) -> dict:
    """As the pools page's form: members are the org's operators and leads, named by username."""
    org = _setup_org(request)
    refusals = _Refusals()
    name = refusals.checked(lambda: pool_name(pool), field="pool")
    wanted = sorted(set(payload.members))
    members = list(people_of(org.pk).filter(username__in=wanted))
    unknown = sorted(set(wanted) - {member.get_username() for member in members})
    if unknown:
        refusals.add("members", f"no one named {', '.join(unknown)} in {org.slug}")
    else:
        refusals.checked(lambda: queue_reaches(org, members))
    refusals.raise_any()
    pool_set(org=org, name=name, members=members, **caller_acting(request.auth))
    return _pool_out(org, name)


@router.patch("/setup/pools/{pool}", response={200: PoolOut, **MISSING, **CONFLICT}, summary="Give a pool another name")
def patch_setup_pool(request: HttpRequest, pool: Name, payload: PoolRenameIn) -> dict:
    """Its members, and the assignments and rules that name it, stay with it. 409 when the name is taken."""
    org = _setup_org(request)
    _pool_named(org, pool)
    refusals = _Refusals()
    to = refusals.checked(lambda: pool_name(payload.name, option="--name"))
    refusals.raise_any()
    pool_rename(org=org, name=pool, to=to, **caller_acting(request.auth))
    return _pool_out(org, to)


@router.delete(
    "/setup/pools/{pool}",
    response={204: None, **MISSING, **CONFLICT},
    summary="Delete a pool, with the assignments and rules that name it",
)
def delete_setup_pool(request: HttpRequest, pool: Name) -> Status[None]:
    org = _setup_org(request)
    _pool_named(org, pool)
    pool_remove(org=org, name=pool, **caller_acting(request.auth))
    return Status(204, None)


# --- assignment rules ---------------------------------------------------------------------------------------------


def _rules_out(org: Org) -> list[dict]:
    rules = AssignmentRule.objects.filter(org=org).select_related("person", "pool").order_by("position")
    return [
        {"position": r.position, "kind": r.kind or None, "application": r.application or None,
         "reason": r.reason or None, "person": r.person.get_username() if r.person else None,
         "pool": r.pool.name if r.pool else None, "hours": r.hours}
        for r in rules
    ]  # fmt: skip


def _rule_at(org: Org, position: int) -> None:
    if not AssignmentRule.objects.filter(org=org, position=position).exists():
        raise HttpError(404, f"no assignment rule at position {position}")


_RULES = _Ordered(at=_rule_at, listed=_rules_out, move=rule_move, remove=rule_remove)


def _rule_fields(org: Org, payload: RuleIn) -> dict:
    """The rule's fields as the rules page's form checks them, every refusal in one 400."""
    refusals = _Refusals()
    selection = _selection(org, refusals, payload, what="rule")
    if payload.hours is not None and not 1 <= payload.hours <= HOURS_MAX:
        refusals.add("hours", f"hours must be from 1 to {HOURS_MAX}; leave it out for as long as the item waits")
    person = None
    if (payload.person is None) == (payload.pool is None):
        refusals.add("person", "name a person or a pool (one of the two)")
    elif payload.person is not None:
        person = people_of(org.pk).filter(username=payload.person).first()
        if person is None:
            refusals.add("person", f"no one named {payload.person} in {org.slug}")
    elif not Pool.objects.filter(org=org, name=payload.pool.strip()).exists():
        refusals.add("pool", f"no pool {payload.pool!r} in {org.slug}")
    refusals.raise_any()
    # What is left to refuse: the person's reach (they could claim nothing the rule picks).
    raw = {"kind": selection["kind"], "application": selection["application"] or None, "reason": selection["reason"]}
    fields = refusals.checked(
        lambda: rule_fields(org, selection=raw, hours=payload.hours, person=person, pool=payload.pool, warn=_unheard)
    )
    refusals.raise_any()
    return fields


def _unheard(warning: str) -> None:
    """The page's warnings (a person who can claim only part of what the rule picks) are advice, not a refusal:
    the API answers the rule as written."""


@router.get("/setup/rules", response=list[RuleOut], summary="The org's assignment rules, in order")
def get_setup_rules(request: HttpRequest) -> list[dict]:
    return _rules_out(_setup_org(request))


@router.post("/setup/rules", response={201: list[RuleOut], **CONFLICT}, summary="Add an assignment rule after the last")
def post_setup_rule(request: HttpRequest, payload: RuleIn) -> Status[list[RuleOut]]:
    org = _setup_org(request)
    fields = _rule_fields(org, payload)
    # Refused (409) when no position is left after the last.
    rule_add(org=org, position=None, replace=False, fields=fields, **caller_acting(request.auth))
    return Status(201, _rules_out(org))


@router.put(
    "/setup/rules/{position}",
    response={200: list[RuleOut], **CONFLICT},
    summary="Put an assignment rule at a position, in place of the one there",
)
def put_setup_rule(request: HttpRequest, position: Position, payload: RuleIn) -> list[dict]:
    org = _setup_org(request)
    fields = _rule_fields(org, payload)
    rule_add(org=org, position=position, replace=True, fields=fields, **caller_acting(request.auth))
    return _rules_out(org)


@router.post(
    "/setup/rules/{position}/move",
    response={200: list[RuleOut], **MISSING, **CONFLICT},
    summary="Swap an assignment rule with the one before or after it",
)
def post_setup_rule_move(request: HttpRequest, position: Position, payload: MoveIn) -> list[dict]:
    return _moved(request, _RULES, position, payload)


@router.delete(
    "/setup/rules/{position}",
    response={200: list[RuleOut], **MISSING, **CONFLICT},
    summary="Remove an assignment rule",
)
def delete_setup_rule(request: HttpRequest, position: Position) -> list[dict]:
    return _removed(request, _RULES, position)

"""Who may claim a queue item first: an assignment by hand (a lead names a person or a pool, optionally until a
time), or else the first assignment rule that matches the item (its kind, application and reason), for some hours
after it was routed to people. While an item is reserved, only its assignees may claim it; then anyone whose
reach covers it may.

The rule in Python, `reservation_of` (read under the review's row lock by the claim services and for the queue's
rows), and in SQL for the reads that filter on it, so as not to read every row reserved for others to find one that
is not (bench/README.md, "Rules kept in two forms"): claim next's scan passes over the items reserved for others
(reviewer/queue/reads.py `reserved_for_others_sql`, written out: composing it by the ORM on every claim cost most of
its CPU), and the queue's "assigned to me" filter lists those reserved for the reader (`reserved_q`). Both are held
equal to `reservation_of` by tests/reviewer/queue/test_assignments.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import NamedTuple

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.postgres.expressions import ArraySubquery
from django.db import connection, transaction
from django.db.models import (
    BooleanField,
    Case,
    ExpressionWrapper,
    F,
    OuterRef,
    Q,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Coalesce
from django.utils import timezone

from grading.core.sql_expressions import id_in
from grading.models import Review, for_people
from grading.models.audit import audit_record
from grading.reviews.targets import selected_q, selects
from reviewer.access import reaches_in
from reviewer.models import Assignment, AssignmentRule, Pool, Role

QUEUE_ROLES = (Role.OPERATOR, Role.LEAD)


@dataclass(frozen=True)
class Reservation:
    """An item reserved for some people: by hand or by a rule, until a time or for as long as it waits."""

    person_ids: frozenset[int]
    named: str  # "ann", "pool billing"
    until: datetime | None
    by_rule: int | None  # the rule's position; None: assigned by hand

    def allows(self, user_id: int) -> bool:
        return user_id in self.person_ids


def _rule_matches(rule: Assignee, review: Review) -> bool:
    return selects(rule, kind=review.kind, application=review.application, reason=review.reason, audit=review.audit)


def _rule_until(rule: Assignee, routed_at: datetime | None) -> datetime | None:
    """When the rule's reservation ends: never (no hours), or hours after routing (already, if never routed)."""
    if rule.hours is None:
        return None
    return routed_at + timedelta(hours=rule.hours) if routed_at is not None else datetime.min.replace(tzinfo=UTC)


def reservation_of(review: Review, now: datetime) -> Reservation | None:
    """Who may claim the review first, now; None when anyone in reach may."""
    return reservations_of([review], now).get(review.pk)


class Assignee(NamedTuple):
    """An assignment by hand or a rule as `reservations_of` and `rules_for` read it: whom it names, and its pool's
    members."""

    key: int  # what it is read by: an assignment's review, a rule's org
    position: int | None  # a rule's; None for an assignment by hand
    kind: str
    application: str
    reason: str
    person_id: int | None
    pool_id: int | None
    until: datetime | None  # an assignment's
    hours: int | None  # a rule's
    members: list[int]
    person_name: str | None
    pool_name: str | None


@cache
def _assignees_sql(model: type[Assignment] | type[AssignmentRule]) -> str:
    """The SQL of one of `reservations_of`'s two reads (`_COLUMNS`), composed by the ORM once per process: a queue
    page reads both on every refresh, and composing them cost it more CPU than running them (bench/README.md,
    bench_queue). Its one parameter: the ids its rows are read by (the reviews', the orgs'), as one array (`id_in`)."""
    members = ArraySubquery(Pool.members.through.objects.filter(pool_id=OuterRef("pool_id")).values("user_id"))
    names = {"person_name": F(f"person__{get_user_model().USERNAME_FIELD}"), "pool_name": F("pool__name")}
    key, order = ("review_id", []) if model is Assignment else ("org_id", ["position"])
    rows = model.objects.filter(id_in(key, [0])).annotate(members=members, **names).order_by(*order)
    sql, params = rows.values_list(*_COLUMNS[model]).query.sql_with_params()
    assert params == ("{0}",), params  # the ids' array, the one parameter
    return sql


_COLUMNS = {
    Assignment: ("review_id", "person_id", "pool_id", "until", "members", "person_name", "pool_name"),
    AssignmentRule: ("org_id", "position", "kind", "application", "reason", "person_id", "pool_id", "hours", "members",
                     "person_name", "pool_name"),
}  # fmt: skip


def _assignees(model: type[Assignment] | type[AssignmentRule], ids: Iterable[int]) -> list[Assignee]:
    with connection.cursor() as cursor:
        cursor.execute(_assignees_sql(model), ["{" + ",".join(str(int(i)) for i in ids) + "}"])
        rows = cursor.fetchall()
    if model is Assignment:
        return [Assignee(review_id, None, "", "", "", person, pool, until, None, *named)
                for review_id, person, pool, until, *named in rows]  # fmt: skip
    return [Assignee(org_id, position, kind, application, reason, person, pool, None, hours, *named)
            for org_id, position, kind, application, reason, person, pool, hours, *named in rows]  # fmt: skip


def reservations_of(reviews: Sequence[Review], now: datetime) -> dict[int, Reservation]:
    """`reservation_of` for many reviews (a queue page's rows) in two queries: the assignments by hand and the orgs'
    rules, each read with whom it names and the members of the pool it names (not as instances of either: a queue
    page reads this on every refresh)."""
    if not reviews:
        return {}
    by_hand = {assignee.key: assignee for assignee in _assignees(Assignment, [review.pk for review in reviews])}
    rules = _assignees(AssignmentRule, {review.org_id for review in reviews})
    reservations = {}
    for review in reviews:
        assignment = by_hand.get(review.pk)
        if assignment is not None:
            assignee, until, position = assignment, assignment.until, None
        else:
            assignee = next((r for r in rules if r.key == review.org_id and _rule_matches(r, review)), None)
            if assignee is None:
                continue
            until, position = _rule_until(assignee, review.routed_at), assignee.position
        if until is not None and until <= now:
            continue
        if assignee.person_id is not None:
            people, named = frozenset({assignee.person_id}), assignee.person_name
        else:
            people, named = frozenset(assignee.members), f"pool {assignee.pool_name}"
        reservations[review.pk] = Reservation(people, named, until, position)
    return reservations


def rules_for(org_id: int) -> list[Assignee]:
    """The org's assignment rules in position order, each with whom it names and its pool's members, in one query
    composed once per process (`_assignees`): claim next reads them on every claim."""
    return _assignees(AssignmentRule, [org_id])


def rule_names(rule: Assignee, user_id: int) -> bool:
    """Whether the rule names `user_id`: as its person, or among its pool's members."""
    return rule.person_id == user_id or user_id in rule.members


def _theirs(user_id: int) -> Q:
    """Assignments by hand to `user_id` or to a pool of theirs: their pools as a subquery rather than read first."""
    return Q(person_id=user_id) | Q(pool_id__in=Pool.members.through.objects.filter(user_id=user_id).values("pool_id"))


def by_hand_reserved(user_id: int, now: datetime) -> Subquery:
    """Per review: whether its assignment by hand reserves it now for `user_id`, or null when it has none. A review
    has at most one, and it overrides every rule."""
    live = Q(until__isnull=True) | Q(until__gt=now)
    # A CASE, not the condition itself: a null pool or person would make it null, which COALESCE passes over.
    reserved = Case(When(live & _theirs(user_id), then=True), default=False)
    return Subquery(Assignment.objects.filter(review_id=OuterRef("pk")).values(reserved=reserved)[:1])


def reserved_q(org_id: int, user_id: int, now: datetime) -> Q | None:
    """Reviews (of one org) reserved now for `user_id`: the queue's "assigned to me" filter. None when nothing can be
    reserved for them (no assignment by hand names them, no rule does): the filter then lists nothing without
    walking the queue."""
    rules = rules_for(org_id)
    if not any(rule_names(rule, user_id) for rule in rules):
        live = Q(until__isnull=True) | Q(until__gt=now)
        if not Assignment.objects.filter(_theirs(user_id), live, org_id=org_id).exists():
            return None
    # Read as one value per row (true, false, or null without one), an index probe for each row the scan reads. As
    # EXISTS beside the rules' CASE, the planner hashed every assignment of the table before reading the first row
    # (bench/README.md, bench_queue).
    by_hand = by_hand_reserved(user_id, now)
    # The first rule that matches decides: one CASE, in position order (a WHEN per rule, so the expression grows
    # with the rules, not with their square).
    whens = []
    for rule in rules:
        if not rule_names(rule, user_id):
            in_force = Value(False)
        elif rule.hours is None:
            in_force = Value(True)
        else:
            in_force = ExpressionWrapper(Q(routed_at__gt=now - timedelta(hours=rule.hours)), BooleanField())
        whens.append(When(selected_q(rule), then=in_force))
    by_rule = Case(*whens, default=Value(False), output_field=BooleanField()) if whens else Value(False)
    return Q(Coalesce(by_hand, by_rule, output_field=BooleanField()))


def reserved_for_others(
    review: Review, *, by_hand: bool | None, rules: list[Assignee], user_id: int, now: datetime
) -> bool:
    """`reservation_of`'s answer to whether `user_id` may not claim the review (reserved now for others), from its
    assignment by hand as claim next's look under the lock read it (reviewer/queue/reads.py `claim_standing`) and the
    org's rules as `rules_for` read them: for a row claim next has locked, without reading the rules again."""
    if by_hand is not None:
        return by_hand
    rule = next((rule for rule in rules if _rule_matches(rule, review)), None)
    if rule is None:
        return False
    until = _rule_until(rule, review.routed_at)
    return (until is None or until > now) and not rule_names(rule, user_id)


# --- assigning ------------------------------------------------------------------------------------------------


class InvalidAssignment(Exception):
    """An assignment that cannot be made; the message says why. Nothing was written."""


def assignment_set(
    *,
    review_id: int,
    person: AbstractBaseUser | None = None,
    pool: Pool | None = None,
    until: datetime | None = None,
    by: AbstractBaseUser | None = None,
    api_key=None,
    now: datetime | None = None,
) -> Assignment:
    """Assign a waiting review to a person or a pool (replacing any assignment it had), audited. The person must be
    able to claim it (an operator or lead whose reach covers it); a pool must be the review's org's."""
    now = now or timezone.now()
    if (person is None) == (pool is None):
        raise InvalidAssignment("Assign the item to one person or one pool.")
    if until is not None and until <= now:
        raise InvalidAssignment("The time the assignment ends must be in the future.")
    with transaction.atomic():
        review = Review.objects.select_for_update(of=("self",)).filter(pk=review_id).first()
        if (
            review is None
            or not for_people(route=review.route, audit=review.audit, sent=review.sent)
            or not Review.objects.waiting().filter(pk=review_id).exists()
        ):
            raise InvalidAssignment("Only an item waiting in the queue can be assigned.")
        if person is not None and person.pk not in {p.pk for p in assignable_people(review)}:
            raise InvalidAssignment(f"{person.get_username()} cannot work this item (no queue role reaching it).")
        if pool is not None and pool.org_id != review.org_id:
            raise InvalidAssignment("No such pool in this org.")
        before = Assignment.objects.filter(review_id=review.pk).select_related("person", "pool").first()
        assignment, _ = Assignment.objects.update_or_create(
            review_id=review.pk,
            defaults={"org_id": review.org_id, "person": person, "pool": pool, "until": until, "assigned_by": by,
                      "assigned_at": now},
        )  # fmt: skip
        audit_record(
            action="assignment.replace" if before else "assignment.create",
            org=review.org,
            actor=by,
            api_key=api_key,
            target=assignment,
            detail={"review": review.pk, "to": _named(assignment), "until": until.isoformat() if until else None}
            | ({"was": _named(before)} if before else {}),
            item=review,
        )
    return assignment


def assignment_clear(*, review_id: int, by: AbstractBaseUser | None = None, api_key=None) -> bool:
    """Take the item's assignment by hand away (its rules apply again), audited; False when it had none."""
    with transaction.atomic():
        assignment = (
            Assignment.objects.select_related("org", "person", "pool", "review").filter(review_id=review_id).first()
        )
        if assignment is None:
            return False
        audit_record(
            action="assignment.delete",
            org=assignment.org,
            actor=by,
            api_key=api_key,
            target=assignment,
            detail={"review": review_id, "was": _named(assignment)},
            item=assignment.review,
        )
        assignment.delete()
    return True


def assignable_people(review: Review) -> list[AbstractBaseUser]:
    """The people an item can be assigned to: those whose queue memberships (operator, lead) reach it."""
    reaches = reaches_in(review.org_id, *QUEUE_ROLES)
    ids = [user_id for user_id, reach in reaches.items() if reach.covers(review.kind, review.application)]
    return list(get_user_model().objects.filter(pk__in=ids).order_by("username"))


def org_assignees(org_id: int) -> tuple[list[AbstractBaseUser], list[Pool]]:
    """Everyone an item of the org could be assigned to (the queue's people, whatever their reach: assigning an item
    out of someone's reach is refused for that item) and the org's pools: a lead's choice for several items at once."""
    ids = list(reaches_in(org_id, *QUEUE_ROLES))
    people = list(get_user_model().objects.filter(pk__in=ids).order_by("username"))
    return people, list(Pool.objects.filter(org_id=org_id).order_by("name"))


def _named(assignment: Assignment) -> str:
    return assignment.person.get_username() if assignment.person_id else f"pool {assignment.pool.name}"


def assignments_of(review_ids: Sequence[int]) -> dict[int, Assignment]:
    """The assignments by hand of these reviews, in one query (the queue page's rows)."""
    rows = Assignment.objects.filter(review_id__in=list(review_ids)).select_related("person", "pool")
    return {assignment.review_id: assignment for assignment in rows}

"""Reads of the review queue: which reviews wait for a person, in what order, and who holds what.

What waits is grading's to say (`Review.objects.waiting()`, ReviewState); this module only orders and pages it.
Every read takes the operator's reaches (grading/models/reach.py, built from their operator and lead memberships by
reviewer/access.py: the orgs, and within each the applications, they cover), so a view that forgets to filter by
org or application has nothing to pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache, lru_cache
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Field, Model, Q, QuerySet
from django.db.models.functions import Now
from django.db.models.query import EmptyQuerySet
from django.utils import timezone

from grading.core.outcomes import HUMAN_REASONS
from grading.models import (
    Answer,
    Conversation,
    CriteriaVersion,
    Decision,
    Draft,
    ItemKind,
    Org,
    PendingCall,
    Review,
    ReviewState,
    ServiceTarget,
    for_people,
)
from grading.models.criteria import ANSWERED_CANNOT_ADJUDICATE, answers_stand, may_adjudicate
from grading.models.reach import Reach, within
from grading.reviews.reads import review_slots
from grading.reviews.rollups import slices_seen
from grading.reviews.targets import AUDIT
from reviewer.access import reaches_from, reaches_of
from reviewer.models import Assignment, AssignmentRule, Claim, Invitation, Membership, Pool
from reviewer.queue.assignments import QUEUE_ROLES, Assignee, reserved_for_others, reserved_q, rule_names, rules_for

PAGE_SIZE = 25  # a screenful: operators work from the top; j/k and paging reach the rest
COUNT_CAP = 100  # counts above this read "100+": exact where it matters, a bounded read where it does not

# Drafts come first: a pipeline is blocked on each one, while a conversation review is after the fact.
PRIORITIES = {ItemKind.DRAFT: 0, ItemKind.CONVERSATION: 1}
# The queue order: (priority, due time or None, finished_at, review id). Within a priority, items with a due time
# (service-level targets) come first, soonest due first; then the rest, oldest first.
Key = tuple[int, datetime | None, datetime, int]


def key_of(priority: int, review: Review) -> Key:
    return (priority, review.due_at, review.finished_at, review.pk)


def _sort(key: Key) -> tuple:
    """A key as Python compares it: no due time sorts after every due time, as in the index."""
    priority, due, finished, pk = key
    return (priority, due is None, due or finished, finished, pk)


def operator_reaches(
    user, *, org_id: int | None = None, memberships: Sequence[Membership] | None = None
) -> list[Reach]:
    """What `user`'s operator and lead memberships cover, per org: the only items the queue reads, shows or
    claims. `org_id`: of that org alone (a personal token acts in one org of its person's). `memberships`: all of
    the person's, when the caller has read them (a request's, `access.memberships_of`)."""
    reaches = reaches_of(user, *QUEUE_ROLES) if memberships is None else reaches_from(memberships, *QUEUE_ROLES)
    return [reach for reach in reaches.values() if org_id in (None, reach.org_id)]


@dataclass(frozen=True)
class QueueFilters:
    kind: str = ""
    application: str = ""
    reason: str = ""
    criteria_version: int | None = None
    overdue: bool = False  # only items past their due time (`Review.objects.overdue`'s reading of overdue)
    mine: bool = False  # only items assigned to the reader, by hand or by a rule (`reserved_q`)
    slice: str = ""  # "release=2.4": only items filed under that dimension value when graded (`Review.slice`)

    def as_query(self, **extra: Any) -> dict[str, Any]:
        params = {
            "kind": self.kind,
            "application": self.application,
            "reason": self.reason,
            "criteria": self.criteria_version or "",
            "overdue": "1" if self.overdue else "",
            "mine": "1" if self.mine else "",
            "slice": self.slice,
        }
        return {key: value for key, value in (params | extra).items() if value not in ("", None)}

    @property
    def active(self) -> bool:
        return bool(
            self.kind or self.application or self.reason or self.criteria_version or self.overdue or self.mine
            or self.slice
        )  # fmt: skip

    @property
    def kinds(self) -> list[str]:
        if self.kind:
            return [self.kind]
        return [ItemKind.CONVERSATION] if self.application else list(PRIORITIES)


NO_FILTERS = QueueFilters()


def queue_versions(reaches: Sequence[Reach]) -> list[CriteriaVersion]:
    """The active criteria versions of the kinds within reach, in queue order (drafts first), each with its org.
    Written as SQL: composed by the ORM it cost a queue page and a claim more CPU than running it (bench/README.md,
    bench_queue)."""
    kinds = {(reach.org_id, kind) for reach in reaches for kind in reach.kinds()}
    versions, orgs = CriteriaVersion._meta.db_table, Org._meta.db_table
    sql = (
        f"SELECT {_whole_columns(CriteriaVersion, Org)} FROM {versions} JOIN {orgs} ON {orgs}.id = {versions}.org_id"  # noqa: S608
        f" WHERE {versions}.is_active AND {versions}.org_id = ANY(%s::bigint[])"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [sorted({reach.org_id for reach in reaches})])
        rows = cursor.fetchall()
    picked = []
    for row in rows:
        version, org = _whole_instances(row, (CriteriaVersion, Org))
        if (version.org_id, version.kind) in kinds:
            CriteriaVersion.org.field.set_cached_value(version, org)
            picked.append(version)
    return sorted(picked, key=lambda v: (PRIORITIES[v.kind], v.org.slug))


@dataclass(frozen=True)
class Lane:
    """The reviews waiting under one active criteria version, all of them or one application's: one range of the
    queue indexes (`review_queue_due`, `review_queue_app_due`) in queue order, so reading a page walks
    each range from its start and stops. A person's queue is the lanes their reach covers."""

    version: CriteriaVersion
    application: str | None = None  # None: every application of the version's org
    assigned: Q | None = None  # the "assigned to me" filter: the reviews reserved for the reader in this org

    def reviews(self, filters: QueueFilters) -> QuerySet[Review]:
        reviews = Review.objects.waiting_under(self.version)
        if filters.overdue:  # a prefix of the lane's index range: due time comes first in queue order
            reviews = reviews.filter(due_at__lt=Now())
        if self.assigned is not None:
            reviews = reviews.filter(self.assigned)
        if self.application is not None:
            # The application the review was filed under when it was written (the dashboards file it there too).
            reviews = reviews.filter(application=self.application)
        if filters.slice:
            # Filtered within the lane's index range, not by an index of its own: a queue holds what waits for
            # people, and a page stops at its size.
            name, _, value = filters.slice.partition("=")
            reviews = reviews.filter(slice__contains={name: value})
        if filters.reason:
            # An audit item's reason is the machine's: it is none of the queue's business until the item is decided
            # (blind review, grading/reviews/blind.py), so no reason names one.
            reviews = reviews.filter(reason=filters.reason, audit=False)
        return reviews


def queue_lanes(
    versions: Sequence[CriteriaVersion],
    reaches: Sequence[Reach],
    filters: QueueFilters,
    *,
    user_id: int | None = None,
    now: datetime | None = None,
) -> list[Lane]:
    """The lanes of `versions` (queue_versions) within `filters` and within reach, in queue order. The "assigned to
    me" filter (`filters.mine`) reads the assignments of `user_id` at `now`: an org with none has no lane."""
    by_org = {reach.org_id: reach for reach in reaches}
    assigned: dict[int, Q | None] = {}
    lanes = []
    for version in versions:
        reach = by_org[version.org_id]
        if version.kind not in filters.kinds or filters.criteria_version not in (None, version.pk):
            continue
        if filters.mine:
            if version.org_id not in assigned:
                assigned[version.org_id] = reserved_q(version.org_id, user_id, now or timezone.now())
            if assigned[version.org_id] is None:
                continue
        mine = assigned.get(version.org_id)
        if version.kind == ItemKind.DRAFT:
            lanes.append(Lane(version, assigned=mine))
        elif filters.application:
            if reach.covers(version.kind, filters.application):
                lanes.append(Lane(version, filters.application, assigned=mine))
        elif reach.applications is not None:
            lanes += [Lane(version, application, assigned=mine) for application in sorted(reach.applications)]
        else:
            lanes.append(Lane(version, assigned=mine))
    return lanes


# What a queue row shows of a review and of its item; its criteria version is its lane's (`Lane.version`).
_ROW_COLUMNS = {
    Review: ("id", "org_id", "kind", "application", "reason", "audit", "sent", "state", "score", "judge_passed",
             "sub_scores", "checks", "finished_at", "routed_at", "due_at", "criteria_version_id", "draft_id",
             "conversation_id"),
    Draft: ("id", "slug", "title"),
    Conversation: ("id", "external_id", "application"),
}  # fmt: skip


@cache
def _fields(model: type[Model], *, whole: bool = False) -> tuple[Field, ...]:
    """The fields read of `model` in its own order, the order `Model.from_db` reads values in: every concrete field
    (`whole`), or those of `_ROW_COLUMNS[model]` (a queue row's)."""
    fields = model._meta.concrete_fields
    return tuple(fields if whole else (field for field in fields if field.attname in _ROW_COLUMNS[model]))


@cache
def _attnames(model: type[Model], *, whole: bool = False) -> list[str]:
    return [field.attname for field in _fields(model, whole=whole)]


@cache
def _converters(model: type[Model], *, whole: bool = False) -> list[tuple[int, Field, list]]:
    """Per field of `_fields(model)` the ORM converts (JSON decoded): its place, the field and its converters."""
    fields = enumerate(_fields(model, whole=whole))
    return [(n, field, converters) for n, field in fields if (converters := field.get_db_converters(connection))]


def _instance(model: type[Model], values: Sequence[Any], *, whole: bool = False) -> Model:
    """An instance from its row's columns (`_fields`), converted as the ORM converts them."""
    values = list(values)
    for n, field, converters in _converters(model, whole=whole):
        for convert in converters:
            values[n] = convert(values[n], field, connection)
    return model.from_db(connection.alias, _attnames(model, whole=whole), values)


def _whole_instances(row: Sequence[Any], models: Sequence[type[Model]]) -> list[Model]:
    """An instance of each of `models` from one row holding each model's columns whole, one model after another."""
    instances = []
    for model in models:
        width = len(_fields(model, whole=True))
        instances.append(_instance(model, row[:width], whole=True))
        row = row[width:]
    return instances


@cache
def _whole_columns(*models: type[Model]) -> str:
    """The columns `_whole_instances` reads, each named by its table."""
    return ", ".join(
        f"{model._meta.db_table}.{field.column}" for model in models for field in _fields(model, whole=True)
    )


def queue_rows(
    *,
    lanes: Sequence[Lane],
    filters: QueueFilters,
    after: Key | None = None,
    before: Key | None = None,
    limit: int,
) -> list[Review]:
    """Up to `limit` reviews in queue order (reversed when paging backwards) after or before a cursor, each with its
    item and its lane's criteria version.

    Each lane is read in index order up to `limit` (its range as `Lane.reviews` says it, as ids alone: `_range`),
    every lane in one query (a UNION ALL of the lanes' ranges) that merges them in queue order, priority by
    priority, keeps the first `limit` and reads what the rows show of them and their items: the number of queries
    depends neither on the data nor on the lanes, and only the rows shown become model instances. The SELECT around
    the ranges is written out because composing it with the ORM (a join per lane) cost more CPU than the rest of the
    read (bench/README.md, bench_queue).
    """
    backwards = before is not None
    ranges, params = [], []
    for number, lane in enumerate(lanes):
        priority = PRIORITIES[lane.version.kind]
        if (after and priority < after[0]) or (before and priority > before[0]):
            continue
        composed = _range(lane, filters, limit, after=after, before=before)
        if composed is None:
            continue
        sql, lane_params = composed
        ranges.append(f"SELECT %s::int AS lane, %s::int AS priority, picked.id FROM ({sql}) picked(id)")  # noqa: S608
        params += [number, priority, *lane_params]
    if not ranges:
        return []
    direction = "DESC" if backwards else "ASC"
    columns = ", ".join(
        f"{alias}.{field.column}"
        for alias, model in (("r", Review), ("d", Draft), ("c", Conversation))
        for field in _fields(model)
    )
    sql = f"""
        SELECT lanes.lane, {columns}
        FROM ({" UNION ALL ".join(f"({range_})" for range_ in ranges)}) lanes
        JOIN {Review._meta.db_table} r ON r.id = lanes.id
        LEFT JOIN {Draft._meta.db_table} d ON d.id = r.draft_id
        LEFT JOIN {Conversation._meta.db_table} c ON c.id = r.conversation_id
        ORDER BY lanes.priority {direction}, r.due_at {direction} NULLS {"FIRST" if backwards else "LAST"},
            r.finished_at {direction}, r.id {direction}
        LIMIT %s
    """  # noqa: S608 - table and column names are the models'; every value is a parameter
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, limit])
        rows = cursor.fetchall()
    widths = [len(_fields(model)) for model in (Review, Draft, Conversation)]
    reviews = []
    for lane, *values in rows:
        review = _instance(Review, values[: widths[0]])
        item = values[widths[0] : widths[0] + widths[1]] if review.draft_id else values[widths[0] + widths[1] :]
        review.criteria_version = lanes[lane].version
        if review.draft_id:
            Review.draft.field.set_cached_value(review, _instance(Draft, item))
        else:
            Review.conversation.field.set_cached_value(review, _instance(Conversation, item))
        reviews.append(review)
    return reviews


def _range(
    lane: Lane, filters: QueueFilters, limit: int, *, after: Key | None, before: Key | None
) -> tuple[str, list] | None:
    """A lane's range in queue order (backwards, before a cursor) up to `limit`, past the cursor at its priority, as
    SQL and its parameters (the ids alone); None when the lane is empty by its definition. The lane's condition is
    the ORM's (`_lane_where`), the cursor's written out (`_beyond_sql`)."""
    where = _lane_where(lane, filters)
    if where is None:
        return None
    lane_sql, params = where
    table = Review._meta.db_table
    priority = PRIORITIES[lane.version.kind]
    beyond, beyond_params = "", []
    if after and priority == after[0]:
        beyond, beyond_params = _beyond_sql(after, ">", table)
    if before and priority == before[0]:
        beyond, beyond_params = _beyond_sql(before, "<", table)
    # The index order of `review_queue_due` and its kin (due time, none last; then age), or its reverse.
    direction, nulls = ("DESC", "FIRST") if before is not None else ("ASC", "LAST")
    order = f"{table}.due_at {direction} NULLS {nulls}, {table}.finished_at {direction}, {table}.id {direction}"
    sql = f"SELECT {table}.id FROM {table} WHERE {lane_sql} {beyond} ORDER BY {order} LIMIT %s"  # noqa: S608
    return sql, [*params, *beyond_params, limit]


def _beyond_sql(key: Key, op: str, table: str) -> tuple[str, list]:
    """A condition to AND to a lane's: rows of `table` strictly after (`op` ">") or before ("<") the key in queue
    order (due time, none last; then finished_at, id), as SQL and its parameters; written so that without due times
    the index range starts at the key's time instead of filtering the whole range."""
    _, due, finished, pk = key
    tail = f"{table}.finished_at {op}= %s AND ({table}.finished_at {op} %s OR {table}.id {op} %s)"
    if due is None:
        if op == ">":
            return f"AND ({table}.due_at IS NULL AND {tail})", [finished, finished, pk]
        return f"AND ({table}.due_at IS NOT NULL OR ({table}.due_at IS NULL AND {tail}))", [finished, finished, pk]
    beyond_due = f"({table}.due_at > %s OR {table}.due_at IS NULL)" if op == ">" else f"{table}.due_at < %s"
    return f"AND ({beyond_due} OR ({table}.due_at = %s AND {tail}))", [due, due, finished, finished, pk]


@dataclass(frozen=True)
class QueueStats:
    counts: dict[str, int]  # reason -> count ("" for any other reason), each read no further than past the cap
    oldest: datetime | None

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def capped(self) -> bool:
        return any(n > COUNT_CAP for n in self.counts.values())


def queue_stats(*, lanes: Sequence[Lane]) -> QueueStats:
    """Counts per reason (whatever the reason filter) and the oldest waiting item, in one query.

    1. Per lane (its waiting reviews are one range of the partial queue indexes), count at most COUNT_CAP + 1 rows
       of each reason's range and of the whole range: a queue of 100,000 costs what a queue of a hundred does. The
       oldest is the first entry of each whole range.
    2. Reasons grading may add later are counted as "other": exactly, whenever the lane's range is under the cap.
    Written as SQL because it is a hundred tiny index probes: composed by the ORM it would cost more CPU than the
    rest of the page.
    """
    if not lanes:
        return QueueStats(counts=dict.fromkeys([*HUMAN_REASONS, ""], 0), oldest=None)
    selects, params = [], []
    # Whole versions and single applications are two shapes of range: each gets its own condition, so the planner
    # can walk the index that holds the range (`review_queue`, `review_queue_reason`;
    # `review_queue_application`, `review_queue_app_reason`).
    for by_application in (False, True):
        picked = [(n, lane) for n, lane in enumerate(lanes) if (lane.application is not None) == by_application]
        if picked:
            selects += _stats_selects(by_application)
            parts = [(n, lane, reason) for n, lane in picked for reason in HUMAN_REASONS]
            params += [
                ReviewState.WAITING, COUNT_CAP + 1,
                [n for n, _, _ in parts], [lane.version.pk for _, lane, _ in parts],
                [lane.application for _, lane, _ in parts], [reason for _, _, reason in parts],
                ReviewState.WAITING, COUNT_CAP + 1, ReviewState.WAITING,
                [n for n, _ in picked], [lane.version.pk for _, lane in picked],
                [lane.application for _, lane in picked],
            ]  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute(" UNION ALL ".join(selects), params)
        rows = cursor.fetchall()
    counts = dict.fromkeys([*HUMAN_REASONS, ""], 0)
    for n in range(len(lanes)):
        whole = next(count for lane, reason, count, _ in rows if lane == n and reason is None)
        known = {reason: count for lane, reason, count, _ in rows if lane == n and reason is not None}
        for reason in HUMAN_REASONS:
            counts[reason] += known[reason]
        counts[""] += max(0, whole - sum(known.values())) if whole <= COUNT_CAP else 0
    oldest = [finished_at for *_, finished_at in rows if finished_at is not None]
    return QueueStats(counts=counts, oldest=min(oldest, default=None))


def _stats_selects(by_application: bool) -> list[str]:
    """queue_stats' two SELECTs for lanes of one shape: per lane and reason the capped count, then per lane the
    capped count of the whole range and its oldest review. Parameters: the waiting state and the cap for each count,
    the waiting state for the oldest, and the lanes as arrays (number, version, application[, reason])."""
    table = Review._meta.db_table
    in_application = " AND r.application = p.application" if by_application else ""
    waiting = f"FROM {table} r WHERE r.state = %s AND r.criteria_version_id = p.version_id{in_application}"
    # In index order, so the planner walks the index and stops rather than gathering the whole range first.
    capped = "(SELECT count(*) FROM (SELECT 1 {waiting} {reason} ORDER BY r.finished_at LIMIT %s) c)"
    per_reason = capped.format(waiting=waiting, reason="AND r.reason = p.reason AND NOT r.audit")  # as Lane.reviews
    whole = capped.format(waiting=waiting, reason="")
    lanes = "unnest(%s::int[], %s::bigint[], %s::text[]{}) AS p(lane, version_id, application{})"
    # The table name is ours; every value is a parameter.
    return [
        f"SELECT p.lane, p.reason, {per_reason}, NULL FROM {lanes.format(', %s::text[]', ', reason')}",  # noqa: S608
        f"SELECT p.lane, NULL, {whole}, (SELECT r.finished_at {waiting} ORDER BY r.finished_at LIMIT 1)"  # noqa: S608
        f" FROM {lanes.format('', '')}",
    ]


# Rows read at a time while looking for a place: ahead of the first free item there are only the items other people
# hold now or have filled, so one batch nearly always holds it.
SCAN_BATCH = 20


def queue_first_free(
    *,
    lanes: Sequence[Lane],
    filters: QueueFilters,
    user_id: int,
    now: datetime,
    passed_over: Sequence[int],
    rules: dict[int, list[Assignee]] | None = None,
) -> Review | None:
    """The first item with a place for this person, in queue order (the page's, priority by priority), its
    row locked FOR UPDATE and read afresh with its state and org (`_locked`); a row
    another claimer has locked is skipped (SKIP LOCKED). Run inside the claim's
    transaction. The rows it passes are the ones the page marks as not this person's to claim
    (reviewer/queue/display.py `not_claimable`): the SQL form of that rule, held equal to it by
    tests/reviewer/queue/test_claim_next_order.py.

    1. Per lane, read the waiting reviews in queue order a batch at a time, filtered on stored rows only: not passed
       over, not declined, answered or held by this person, and not reserved for others (`reserved_for_others_sql`).
    2. Decide for the rows in hand whether the person has a place, by the one rule (`Slots.place_for`): a slot
       nobody holds or answered; or, once the answers stand, the adjudication, for someone who gave none.
    3. Lock the first that has one, skipping a row another claimer holds locked. The claim looks again under the
       lock, so this only has to be right about what it picks first.
    Priority by priority; across lanes (orgs, applications), the oldest of each lane's first free item (the other
    rows stay locked only until the transaction ends).

    `rules`: per org, its assignment rules as `rules_for` reads them, filled here as each org is
    first read, so that the claim can ask of the locked row whether it is reserved for others (`claim_standing`)
    without reading them again."""
    by_priority: dict[int, list[Review]] = {}
    if rules is None:
        rules = {}
    for lane in lanes:
        version = lane.version
        priority = PRIORITIES[version.kind]
        if by_priority and priority > min(by_priority):
            break
        if version.org_id not in rules:
            rules[version.org_id] = rules_for(version.org_id)
        first = _first_with_a_place(
            lane, filters, user_id=user_id, now=now, passed_over=passed_over, rules=rules[version.org_id]
        )
        if first is not None:
            by_priority.setdefault(priority, []).append(first)
    if not by_priority:
        return None
    priority = min(by_priority)
    return min(by_priority[priority], key=lambda review: _sort(key_of(priority, review)))


def _first_with_a_place(
    lane: Lane,
    filters: QueueFilters,
    *,
    user_id: int,
    now: datetime,
    passed_over: Sequence[int],
    rules: list[Assignee],
) -> Review | None:
    """The first of a lane's rows `queue_first_free` may hand out, in queue order, with a place for this person, its
    row locked (SKIP LOCKED). Each row is read with who answered it and who holds it (`Slots`), so a batch is one
    query.

    Written as SQL around the lane's range (`_lane_where`): composed by the ORM on every claim (the reservation
    rules' CASE, the EXISTS, the arrays) it cost more CPU than the rest of the claim (bench/README.md, bench_queue).
    """
    where = _lane_where(lane, filters)
    if where is None:
        return None
    lane_sql, lane_params = where
    reserved_sql, reserved_params = reserved_for_others_sql(rules, user_id=user_id, now=now)
    table, claims, answers = Review._meta.db_table, Claim._meta.db_table, Answer._meta.db_table
    theirs = f"SELECT 1 FROM {claims} c WHERE c.review_id = {table}.id AND c.holder_id = %s"  # noqa: S608
    answered = (
        f" AND NOT EXISTS (SELECT 1 FROM {answers} a WHERE a.review_id = {table}.id AND a.person_id = %s)"  # noqa: S608
        if lane.version.slots > 1  # an answer of theirs: their place is filled, and they may not adjudicate
        else ""
    )
    select = f"""
        SELECT {table}.id, {table}.audit, {table}.due_at, {table}.finished_at,
            ARRAY({_ANSWERS_IN_ORDER.format(table=table)}), ARRAY({_HOLDERS_IN_ORDER.format(table=table)})
        FROM {table}
        WHERE {lane_sql}
            AND NOT ({table}.id = ANY(%s::bigint[]))
            AND NOT ({reserved_sql})
            AND NOT EXISTS ({theirs} AND c."end" = %s)
            AND NOT EXISTS ({theirs} AND c.ended_at IS NULL AND c.expires_at > %s){answered}
    """  # noqa: S608 - table and column names are the models'; every value is a parameter
    order = f"ORDER BY {table}.due_at ASC NULLS LAST, {table}.finished_at ASC, {table}.id ASC LIMIT %s"  # as _range
    params = [now, *lane_params, list(passed_over), *reserved_params, user_id, Claim.End.DECLINED, user_id, now]
    params += [user_id] if answered else []
    priority = PRIORITIES[lane.version.kind]
    after: Key | None = None
    while True:
        beyond, beyond_params = _beyond_sql(after, ">", table) if after else ("", [])
        with connection.cursor() as cursor:
            cursor.execute(f"{select} {beyond} {order}", [*params, *beyond_params, SCAN_BATCH])
            batch = cursor.fetchall()
        for review_id, audit, _, _, answered_by, holders in batch:
            slots = Slots(lane.version.slots_of(review_id=review_id, audit=audit), tuple(answered_by), tuple(holders))
            if slots.place_for(user_id) is None and (locked := _locked(review_id)) is not None:
                return locked
        if len(batch) < SCAN_BATCH:
            return None
        review_id, _, due, finished, _, _ = batch[-1]
        after = (priority, due, finished, review_id)


def _lane_where(lane: Lane, filters: QueueFilters) -> tuple[str, tuple] | None:
    """The condition of a lane's range (`Lane.reviews`) on the review table, as SQL and its parameters; None when the
    lane is empty by its definition. Without the "assigned to me" filter (whose condition holds the reader and the
    time) it is the same for every page and claim of the lane and filters, so composed once per process."""
    return _composed_where(lane, filters) if lane.assigned is not None else _composed_where_once(lane, filters)


@lru_cache(maxsize=1024)
def _composed_where_once(lane: Lane, filters: QueueFilters) -> tuple[str, tuple] | None:
    return _composed_where(lane, filters)


def _composed_where(lane: Lane, filters: QueueFilters) -> tuple[str, tuple] | None:
    reviews = lane.reviews(filters)
    if isinstance(reviews, EmptyQuerySet):
        return None
    query = reviews.query
    sql, params = query.get_compiler(connection=connection).compile(query.where)
    return sql, tuple(params)


def reserved_for_others_sql(rules: list[Assignee], *, user_id: int, now: datetime) -> tuple[str, list]:
    """Whether a review (a row of the review table) is reserved now for people other than `user_id`, as SQL and its
    parameters, its rules the org's as `rules_for` read them. Its assignment by hand decides
    (`_by_hand_for_others`); else the first rule that matches, in position order (one CASE, a WHEN per rule); null
    when a rule with hours matches a review never routed."""
    table = Review._meta.db_table
    by_hand, params = _by_hand_for_others(user_id=user_id, now=now)
    whens = []
    for rule in rules:
        matches, values = ["true"], []
        for column, value in (("kind", rule.kind), ("application", rule.application)):
            if value:
                matches.append(f"{table}.{column} = %s")
                values.append(value)
        if rule.reason == AUDIT:
            matches.append(f"{table}.audit")
        elif rule.reason:
            matches.append(f"{table}.reason = %s")
            values.append(rule.reason)
        if rule_names(rule, user_id):
            in_force = "false"
        elif rule.hours is None:
            in_force = "true"
        else:
            in_force = f"({table}.routed_at > %s)"
            values.append(now - timedelta(hours=rule.hours))
        whens.append(f"WHEN {' AND '.join(matches)} THEN {in_force}")
        params += values
    by_rule = f"CASE {' '.join(whens)} ELSE false END" if whens else "false"
    return f"COALESCE({by_hand}, {by_rule})", params


def _by_hand_for_others(*, user_id: int, now: datetime) -> tuple[str, list]:
    """As SQL on the review table and its parameters: true when the review's assignment by hand reserves it now for
    others than `user_id`, false when not, null when it has none."""
    table, assignments = Review._meta.db_table, Assignment._meta.db_table
    members = Pool.members.through._meta.db_table
    theirs = (
        f"(v.person_id = %s AND v.person_id IS NOT NULL)"  # noqa: S608
        f" OR (v.pool_id IN (SELECT m.pool_id FROM {members} m WHERE m.user_id = %s) AND v.pool_id IS NOT NULL)"
    )
    sql = (
        f"(SELECT CASE WHEN (v.until IS NULL OR v.until > %s) AND NOT ({theirs}) THEN true ELSE false END"  # noqa: S608
        f" FROM {assignments} v WHERE v.review_id = {table}.id LIMIT 1)"
    )
    return sql, [now, user_id, user_id]


# Who answered a review, and who holds it now (a parameter: the time), in order: a row's `Slots` read with it.
_ANSWERS_IN_ORDER = f"SELECT a.person_id FROM {Answer._meta.db_table} a WHERE a.review_id = {{table}}.id ORDER BY a.id"  # noqa: S608
_HOLDERS_IN_ORDER = (
    f"SELECT c.holder_id FROM {Claim._meta.db_table} c"  # noqa: S608
    f" WHERE c.ended_at IS NULL AND c.expires_at > %s AND c.review_id = {{table}}.id ORDER BY c.id"
)


def _locked(review_id: int) -> Review | None:
    """The review with what a claim reads of it (`Review.objects.with_state()`: its criteria version, and its org;
    not its item, which nothing a claim writes reads), its row locked; None when another transaction holds it locked
    (someone is claiming it). Written as SQL (`_locked_sql`): composed by the ORM on every claim it cost more CPU than
    the scan (bench/README.md, bench_queue)."""
    with connection.cursor() as cursor:
        cursor.execute(_locked_sql(), [review_id])
        row = cursor.fetchone()
    if row is None:
        return None
    review, org, version = _whole_instances(row, (Review, Org, CriteriaVersion))
    Review.org.field.set_cached_value(review, org)
    Review.criteria_version.field.set_cached_value(review, version)
    return review


@cache
def _locked_sql() -> str:
    review, org, version = (model._meta.db_table for model in (Review, Org, CriteriaVersion))
    return (
        f"SELECT {_whole_columns(Review, Org, CriteriaVersion)} FROM {review}"  # noqa: S608
        f" JOIN {org} ON {org}.id = {review}.org_id JOIN {version} ON {version}.id = {review}.criteria_version_id"
        f" WHERE {review}.id = %s FOR UPDATE OF {review} SKIP LOCKED"
    )


@dataclass(frozen=True)
class Standing:
    """Who is on a locked item as it stands, read afresh under its row lock: whether this person may claim it."""

    slots: Slots
    expired: bool  # an open claim on it ran out, its end not yet recorded
    reserved_for_others: bool


def claim_standing(review: Review, now: datetime, *, user_id: int, rules: list[Assignee]) -> Standing:
    """What claim next asks of the row it locked, in one statement after the lock (so it sees every claim, answer
    and assignment committed before the lock was granted): who answered it and who holds it (`Slots`), whether a
    claim on it expired unrecorded, and whether it is reserved now for people other than `user_id`: its assignment
    by hand read here, the org's `rules` as `queue_first_free` read them (`reserved_for_others`)."""
    table = Review._meta.db_table
    by_hand, by_hand_params = _by_hand_for_others(user_id=user_id, now=now)
    expired = (
        f"SELECT 1 FROM {Claim._meta.db_table} c"  # noqa: S608
        f" WHERE c.ended_at IS NULL AND c.expires_at <= %s AND c.review_id = {table}.id"
    )
    sql = (
        f"SELECT ARRAY({_ANSWERS_IN_ORDER.format(table=table)}), ARRAY({_HOLDERS_IN_ORDER.format(table=table)}),"  # noqa: S608
        f" EXISTS({expired}), {by_hand} FROM {table} WHERE {table}.id = %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [now, now, *by_hand_params, review.pk])
        answered_by, holders, has_expired, by_hand = cursor.fetchone()
    slots = Slots(review_slots(review), tuple(answered_by), tuple(holders))
    for_others = reserved_for_others(review, by_hand=by_hand, rules=rules, user_id=user_id, now=now)
    return Standing(slots, has_expired, for_others)


@dataclass(frozen=True)
class Slots:
    """Who is on an item as it stands: how many people decide it, who answered (in order), who holds it now."""

    slots: int
    answered_by: tuple[int, ...]
    holders: tuple[int, ...]  # people holding a live lease on it

    @property
    def several(self) -> bool:
        return self.slots > 1

    @property
    def answers_in(self) -> bool:
        """Every slot answered: the answers stand, the item is decided or waits for its adjudication."""
        return answers_stand(slots=self.slots, answered=len(self.answered_by))

    @property
    def open(self) -> int:
        return max(0, self.slots - len(set(self.answered_by) | set(self.holders)))

    def place_for(self, user_id: int) -> tuple[str, str] | None:
        """Why this person cannot take a place on the item now (a refusal's code and message), or None."""
        others = [holder for holder in self.holders if holder != user_id]
        if self.answers_in:
            if not may_adjudicate(slots=self.slots, answered_by=self.answered_by, person_id=user_id):
                return "answered", ANSWERED_CANNOT_ADJUDICATE
            if others:
                return "held", "Someone else is adjudicating this item."
            return None
        if user_id in self.answered_by or not others:
            return None  # your own slot (to answer again), or a free one
        if len(set(self.answered_by) | set(others)) >= self.slots:
            taken = "Someone else is deciding this item." if self.slots == 1 else f"All {self.slots} places are taken."
            return "held", taken
        return None


def slots_on(reviews: Sequence[Review], now: datetime, *, live: Sequence[Claim] | None = None) -> dict[int, Slots]:
    """`Slots` of each of these reviews (read with their criteria version), by review id, in one query: who answered
    and who holds a live claim on each, or only who answered when the caller has read the live claims on them
    already (`live`: `claims_shown`' of a reach covering them)."""
    ids = [review.pk for review in reviews]
    answered_by: dict[int, list[int]] = {pk: [] for pk in ids}
    holders: dict[int, list[int]] = {pk: [] for pk in ids}
    # Each row: (id, review, person, whether a claim); answers, then claims, each in the order they were made.
    # Written as SQL: composed by the ORM it cost a page more CPU than running it (bench/README.md, bench_queue).
    sql = (
        f"SELECT a.id, a.review_id, a.person_id, false FROM {Answer._meta.db_table} a"  # noqa: S608
        " WHERE a.review_id = ANY(%s::bigint[])"
    )
    params: list[Any] = [ids]
    if live is None:
        sql += (
            f" UNION ALL SELECT c.id, c.review_id, c.holder_id, true FROM {Claim._meta.db_table} c"  # noqa: S608
            " WHERE c.review_id = ANY(%s::bigint[]) AND c.ended_at IS NULL AND c.expires_at > %s"
        )
        params += [ids, now]
    else:
        for claim in sorted(live, key=lambda claim: claim.pk):
            if claim.review_id in holders:
                holders[claim.review_id].append(claim.holder_id)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        answers = cursor.fetchall()
    for _, review_id, person_id, holds in sorted(answers, key=lambda row: (row[3], row[0])):
        (holders if holds else answered_by)[review_id].append(person_id)
    return {
        review.pk: Slots(review_slots(review), tuple(answered_by[review.pk]), tuple(holders[review.pk]))
        for review in reviews
    }


def slots_now(review: Review, now: datetime) -> Slots:
    return slots_on([review], now)[review.pk]


def cursor_key(reaches: Sequence[Reach], review_id: int | None) -> Key | None:
    """The queue position of the review a cursor names; None when there is none or it is out of reach (its position
    would tell where another org's or application's item sits). Read by its id alone and its reach checked here, as
    `within(reaches)` reads it: composing that filter cost more CPU than the page's other reads of a row
    (bench/README.md, bench_queue)."""
    if review_id is None:
        return None
    fields = ("org_id", "kind", "application", "due_at", "finished_at")
    row = Review.objects.filter(pk=review_id).values_list(*fields).first()
    if row is None:
        return None
    org_id, kind, application, due, finished = row
    if not any(reach.org_id == org_id and reach.covers(kind, application) for reach in reaches):
        return None
    return (PRIORITIES[kind], due, finished, review_id)


def claims_shown(
    reaches: Sequence[Reach], now: datetime, *, user_id: int, review_ids: Sequence[int]
) -> tuple[list[Claim], set[int]]:
    """What the queue page says of claims, in one query: the live claims within reach (soonest to expire first), each
    with its holder, and which of `review_ids` this person declined (claim next never hands them one of those again).
    Written as SQL: composed by the ORM (the reach's filter through the review) it cost a page more CPU than its
    other reads of claims and answers (bench/README.md, bench_queue)."""
    claims, reviews, users = Claim._meta.db_table, Review._meta.db_table, get_user_model()._meta.db_table
    in_reach, params = _within_sql(reaches, reviews)
    sql = f"""
        SELECT {_whole_columns(Claim, get_user_model())}
        FROM {claims}
            JOIN {reviews} ON {reviews}.id = {claims}.review_id JOIN {users} ON {users}.id = {claims}.holder_id
        WHERE ({in_reach})
            AND (({claims}.ended_at IS NULL AND {claims}.expires_at > %s)
                OR ({claims}.review_id = ANY(%s::bigint[]) AND {claims}.holder_id = %s AND {claims}."end" = %s))
        ORDER BY {claims}.expires_at ASC
    """  # noqa: S608 - table and column names are the models'; every value is a parameter
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, now, list(review_ids), user_id, Claim.End.DECLINED])
        rows = cursor.fetchall()
    shown, declined_ids = [], set()
    for row in rows:
        claim, holder = _whole_instances(row, (Claim, get_user_model()))
        if claim.end == Claim.End.DECLINED:  # a decline has ended
            declined_ids.add(claim.review_id)
        else:
            Claim.holder.field.set_cached_value(claim, holder)
            shown.append(claim)
    return shown, declined_ids


def _within_sql(reaches: Sequence[Reach], table: str) -> tuple[str, list]:
    """`within(reaches)` as SQL on `table` (the review table) and its parameters: the rows within any of `reaches`."""
    ors, params = [], []
    for reach in reaches:
        if not reach.limited:
            ors.append(f"{table}.org_id = %s")
            params.append(reach.org_id)
            continue
        drafts = f" OR {table}.kind = %s" if reach.drafts else ""
        ors.append(f"({table}.org_id = %s AND (({table}.kind = %s AND {table}.application = ANY(%s)){drafts}))")
        params += [reach.org_id, ItemKind.CONVERSATION, sorted(reach.applications)] + (
            [ItemKind.DRAFT] if drafts else []
        )
    return " OR ".join(ors) or "false", params


def applications_known(org: Org) -> list[str]:
    """Every application the org knows, sorted: its conversations' (and those of model calls whose conversation is
    on its way), and those its service targets, assignment rules, memberships and invitations already name (drafts
    and criteria versions name none). The one list a person chooses an application from, on the pages and in the
    commands that scope a membership, a target or a rule: a name outside it is a typo, which would make a reach or a
    selector that covers nothing (an operator's queue emptied by one wrong letter)."""
    named = set(queue_applications([Reach(org.pk)]))
    waiting = PendingCall.objects.filter(org=org, written_at=None, refused="")  # a written call's is a conversation's
    for rows in (waiting, ServiceTarget.objects.filter(org=org), AssignmentRule.objects.filter(org=org)):
        named.update(rows.exclude(application="").values_list("application", flat=True).distinct())
    for model in (Membership, Invitation):
        rows = model.objects.filter(org=org, applications__isnull=False)
        for names in rows.values_list("applications", flat=True).distinct():
            named.update(names)
    return sorted(named)


def applications_unknown(org: Org, names: Sequence[str]) -> str:
    """The refusal of the names among `names` the org does not know, with the list to choose from; "" when it knows
    them all. Said alike by /org/, the set-up pages and the commands that scope a membership or a rule."""
    known = applications_known(org)
    unknown = sorted(set(names) - set(known))
    if not unknown:
        return ""
    return (
        f"{org.name} has no application named {', '.join(unknown)}; its applications: {', '.join(known) or 'none yet'}."
        " An application is known from its first conversation."
    )


def queue_slices(reaches: Sequence[Reach]) -> list[str]:
    """The dimension values ("release=2.4") the orgs within reach have filed reviews under, in order: what the queue's
    slice filter offers."""
    seen = set()
    for reach in reaches:
        seen.update(slices_seen(reach=reach))
    return sorted(seen)


def queue_applications(reaches: Sequence[Reach]) -> list[str]:
    """The distinct applications of the orgs' conversations within reach, by a loose index scan over
    (org, application): one index probe per application instead of reading every conversation."""
    org_ids = [reach.org_id for reach in reaches]
    if not org_ids:
        return []
    table = Conversation._meta.db_table
    sql = f"""
        WITH RECURSIVE apps AS (
            (SELECT org_id, application FROM {table} WHERE org_id = ANY(%s) ORDER BY org_id, application LIMIT 1)
            UNION ALL
            SELECT nxt.org_id, nxt.application FROM apps, LATERAL (
                SELECT org_id, application FROM {table}
                WHERE org_id = ANY(%s) AND (org_id, application) > (apps.org_id, apps.application)
                ORDER BY org_id, application LIMIT 1
            ) nxt
        )
        SELECT org_id, application FROM apps
    """  # noqa: S608 - the table name is ours; values are parameters
    with connection.cursor() as cursor:
        cursor.execute(sql, [org_ids, org_ids])
        rows = cursor.fetchall()
    by_org = {reach.org_id: reach for reach in reaches}
    return sorted({app for org_id, app in rows if by_org[org_id].covers(ItemKind.CONVERSATION, app)})


# --- claims ---------------------------------------------------------------------------------------------------


def open_claim(review_id: int, user) -> Claim | None:
    """The person's claim on the review that has not ended (it may have expired: compare `expires_at` with now);
    without one, someone else's, the first taken."""
    claims = list(
        Claim.objects.filter(review_id=review_id, ended_at__isnull=True).select_related("holder").order_by("pk")
    )
    return next((claim for claim in claims if claim.holder_id == user.pk), claims[0] if claims else None)


@dataclass(frozen=True)
class Lease:
    """What the item page says about who holds the item."""

    claim: Claim | None
    mine: bool
    expired: bool
    minutes_left: int

    @property
    def live(self) -> bool:
        return self.claim is not None and not self.expired


def lease_of(claim: Claim | None, user, now: datetime | None = None) -> Lease:
    now = now or timezone.now()
    if claim is None:
        return Lease(None, False, False, 0)
    left = (claim.expires_at - now).total_seconds()
    return Lease(claim, claim.holder_id == user.pk, left <= 0, max(0, int((left + 59) // 60)))


# --- item pages -----------------------------------------------------------------------------------------------


def review_for_operator(*, reaches: Sequence[Reach], review_id: int) -> Review | None:
    """A review for people (routed to humans, or an audit item: `for_people`, decided for the row in hand) within
    the operator's reach, with its state and what the item page reads beside it."""
    review = _review_within(reaches, review_id)
    return (
        review if review is not None and for_people(route=review.route, audit=review.audit, sent=review.sent) else None
    )


def review_for_reader(*, reaches: Sequence[Reach], review_id: int) -> Review | None:
    """Any review the dashboard may list (no trial's: it never counts) within the reader's reach, with its state and
    what the item page reads beside it."""
    review = _review_within(reaches, review_id)
    return review if review is not None and review.state != ReviewState.TRIAL else None


def _review_within(reaches: Sequence[Reach], review_id: int) -> Review | None:
    return (
        Review.objects.with_state()
        .filter(within(reaches), pk=review_id)
        .select_related("org", "criteria_version", "conversation", "draft")
        .first()
    )


def decision_of(review: Review) -> Decision | None:
    return Decision.objects.filter(review=review).select_related("decided_by").first()


def other_reviews(review: Review, limit: int = 20) -> list[Review]:
    """The item's other reviews, newest first: history that stopped counting, or the one that replaced this."""
    subject = {"conversation_id": review.conversation_id} if review.conversation_id else {"draft_id": review.draft_id}
    return list(
        Review.objects.with_state()
        .filter(**subject)
        .exclude(pk=review.pk)
        .select_related("criteria_version")
        .only(
            "pk",
            "route",
            "reason",
            "fingerprint",
            "finished_at",
            "state",
            "score",
            "kind",
            "criteria_version__number",
            "criteria_version__kind",
            "criteria_version__is_active",
        )  # fmt: skip
        .order_by("-finished_at", "-pk")[:limit]
    )

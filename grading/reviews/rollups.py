"""The dashboards' figures kept as counters, so a page view reads a few thousand rows, never all reviews.

A counter belongs to a cell (org, kind, criteria version, application, ISO week), whole or one dimension value's
slice of it (the reviews filed under "release=2.4" when graded: each review books every counter in the whole cell
and once more under each value it was filed under), and says one thing: how many
counting reviews routed `pass`, how many said `unknown` on `grounded`, how many tokens a week's judging took, how
many audit items a person and the machine agreed on. What one review contributes is defined once, in the table
of grading/figures/definitions.py (`contributions`), read from the review alone (its stored state, its outcome, its
decision, its labels, and where it was filed when it was graded), so a change can be booked as "what it contributes
now minus what it contributed before".

Upkeep, in the same transaction as the write (so the counters are exact at every commit and a rolled-back write
leaves them untouched): every write in grading that changes what a review contributes (a review written, its
state changed, a decision, the audit mark, a label) runs inside `rollups_tracking` for the reviews it touches.
Increments commute, so concurrent writers never lose one another's counts; each writer's rows are upserted in key
order, so two writers cannot deadlock on them.

Every hour the beat rebuilds every org's counters from the reviews (`rollups_rebuild`, one task per org on a
worker): the same figures computed by one GROUP BY over the raw tables (`live_counters`, its SQL generated from
that table), compared in one snapshot with what is stored, the difference booked. It is also the independent check
(the benchmark and the tests compare both). The hourly one recounts only the weeks whose counters were booked since
the last rebuild (every counter is filed under a week, and each write books every week it changes), so it scales
with what changed, not with history; once a day it recounts every week, for what no write booked (a counter or a
review changed by hand). Thumbs are filed by their conversation's present application and week, which a source may
change without any review changing: every rebuild recounts them whole and puts them right.

The counters' statements are plain SQL, all of them here (the rebuild's GROUP BY is generated in
grading/figures/definitions.py from the same table): each runs on every grading write or every page view, where the
ORM's composition of the query and its model instances cost several times the statement itself (bench/README.md,
bench_dashboard and bench_slices), and some have no ORM form at all (the upsert in key order, the loose index scan
of a slice's values). Every value is a parameter. The judge spend ledger's upsert is here too (grading/reviews/spend.py
says what a grading books): a review's write sends it in its counters' statement (`Tracked.spend`). So are the
rebuild's guards on its booking (`rollups_rebuild`, step 3): the ORM takes no advisory lock, and the org's last
rebuild and the last migration (a table with no model here) are read in one statement inside the count's snapshot.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import NamedTuple

from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from grading.core.weeks import monday_sql
from grading.figures.definitions import AUDIT_PASSED, audit_passed_sql, contributions, live_counters_sql
from grading.figures.expressions import sql_literal
from grading.models import Conversation, Draft, ItemKind, JudgeSpend, Org, Rollup, RollupRebuild
from grading.models.reach import Reach
from grading.reviews.reads import staleness_audit

# A counter's key: (org id, kind, criteria id, application, week, metric, key1, key2); as booked and rebuilt, with
# its slice last ("" the whole cell, "release=2.4" the reviews filed under that value: a `SlicedKey`). As a page
# reads it (`scope_counters`), a week of None: summed over the weeks read.
Key = tuple[int, str, int, str, date | None, str, str, str]
SlicedKey = tuple[int, str, int, str, date, str, str, str, str]
WHOLE = ""  # the slice of the whole cell
ERASED = "erased"  # the metric of items erased (`erased_cell`)
THUMBS = "thumbs"  # the metric of the thumbs on conversations (`thumbs_of`)


# --- what one review contributes (grading/figures/definitions.py says what, once) -------------------------------

_FIELDS = (
    "id", "org_id", "kind", "criteria_version_id", "state", "route", "reason", "checks", "findings", "sub_scores",
    "repairs", "usage", "judge_passed", "started_at", "finished_at", "submitted_at", "audit", "application", "week",
    "fingerprint", "conversation_id", "draft_id", "routed_at", "due_at", "slice", "pass_probability",
    "certificate_id", "conversation__application",
    "conversation__started_at",
)  # fmt: skip


def _contributions_of(review_ids: Sequence[int]) -> Counter:
    if not review_ids:
        return Counter()
    # Asked twice in every write that touches a review (before and after it), so one plain statement rather than
    # the ORM's three queries (reviews, decisions, labels), which are a noticeable share of a grading worker's CPU.
    with connection.cursor() as cursor:
        cursor.execute(_CONTRIBUTIONS_SQL, [list(review_ids)])
        return _contributions_read(cursor.fetchall())


def _contributions_read(rows: Iterable[Sequence]) -> Counter:
    """What the reviews in `rows` (as `_contributions_select` reads them) contribute."""
    total: Counter = Counter()
    for row in rows:
        review = dict(zip(_FIELDS, row[: len(_FIELDS)], strict=True))
        for name in _JSON_FIELDS:
            review[name] = _json(review[name])
        review[AUDIT_PASSED.key] = row[len(_FIELDS)]
        decision = dict(zip(_DECISION_FIELDS, row[len(_FIELDS) + 1 : -2], strict=True))
        decision["checks"] = _json(decision["checks"])
        labels, answers = _json(row[-2]) or [], _json(row[-1]) or []
        total.update(contributions(review, decision if decision["outcome"] is not None else None, labels, answers))
    return total


_JSON_FIELDS = ("checks", "findings", "sub_scores", "repairs", "usage", "slice")
_DECISION_FIELDS = ("outcome", "checks", "decided_at", "decided_by_id", "basis")


def _contributions_select(reviews: str) -> str:
    """The columns of _FIELDS in order (its last two, the conversation's, from the join), people's audit verdict on
    the evidence (`audit_passed_sql`), the review's decision (NULLs when it has none), its labels (those of its subject
    that speak about the evidence it read) and the answers people gave on it (several people deciding one item), of
    the reviews in `reviews`: the table, or the row the review INSERT returns (grading/reviews/sql.py,
    Tracked.INSERTED_SELECT)."""
    return f"""
    SELECT {", ".join(f"r.{name}" for name in _FIELDS[:-2])}, c.application, c.started_at, {audit_passed_sql("r")},
        d.outcome, d.checks, d.decided_at, d.decided_by_id, d.basis,
        (SELECT json_agg(json_build_object('check_name', l.check_name, 'verdict', l.verdict)) FROM grading_label l
            WHERE l.fingerprint = r.fingerprint
            AND (l.conversation_id = r.conversation_id OR l.draft_id = r.draft_id)),
        (SELECT json_agg(json_build_object('person_id', a.person_id, 'outcome', a.outcome, 'checks', a.checks,
                'slots', a.slots))
            FROM grading_answer a WHERE a.review_id = r.id)
    FROM {reviews} r
    LEFT JOIN grading_conversation c ON c.id = r.conversation_id
    LEFT JOIN grading_decision d ON d.review_id = r.id
    """  # noqa: S608 - `reviews` is one of this module's two table expressions


_CONTRIBUTIONS_SQL = _contributions_select("grading_review") + "WHERE r.id = ANY(%s)"
_INSERTED_CONTRIBUTIONS = _contributions_select("inserted")


def _json(value: object) -> object:
    """A json column as Python: Django reads jsonb as text (its JSONField decodes it), plain json arrives decoded."""
    return json.loads(value) if isinstance(value, str) else value


class SpendEntry(NamedTuple):
    """What one grading books into the judge spend ledger (`JudgeSpend`'s row of the org, version, judge and UTC
    day), in the order of the ledger's statement's parameters: grading/reviews/spend.py says when and how much."""

    org_id: int
    criteria_id: int
    judge: str
    day: date
    calls: int
    prompt: int
    completion: int
    cost: int


@dataclass
class Tracked:
    """The reviews a write touches, what the ones it creates contribute, and the judge spend the write books."""

    review_ids: list[int]
    inserted: Counter = field(default_factory=Counter)
    # Booked by the counters' statement, after the counters (`_UPSERT_THEN_SPEND`): one statement fewer a review.
    spend: SpendEntry | None = None
    # What a review the write creates contributes, read in the statement that creates it (one round trip, not two):
    # grading/reviews/sql.py runs `WITH inserted AS (<its INSERT> RETURNING *)` and this, which reads the id first.
    INSERTED_SELECT = _INSERTED_CONTRIBUTIONS

    def inserted_book(self, rows: Iterable[Sequence]) -> None:
        """Book what the created reviews contribute, from their rows as `INSERTED_SELECT` read them."""
        self.inserted.update(_contributions_read(rows))


@contextmanager
def rollups_tracking(review_ids: Iterable[int | None] = ()) -> Iterator[Tracked]:
    """Book what the write inside the block changes in what these reviews contribute. Use it inside the write's
    transaction, with the reviews' rows (or their subject's) locked, so nothing changes them between the reads."""
    tracked = Tracked([pk for pk in review_ids if pk])
    before = _contributions_of(tracked.review_ids)
    yield tracked
    delta = _contributions_of(tracked.review_ids) + tracked.inserted
    delta.subtract(before)
    _apply(delta, tracked.spend)


def rollups_thumbs_refresh(*, conversation_id: int, before: Counter) -> None:
    """Book a change of a conversation's thumbs: call with `thumbs_of(conversation_id)` taken before the write."""
    delta = thumbs_of(conversation_id)
    delta.subtract(before)
    _apply(delta)


def rollups_erasing(*, review_ids: Sequence[int], conversation_ids: Sequence[int]) -> Counter:
    """What erasing these reviews and conversations takes from the counters: everything the reviews contribute and
    the conversations' thumbs, as negative increments. Read it before the rows go, with them locked, and book it
    (with the erased items' own counter, `erased_cell`) through `rollups_book` in the same transaction."""
    taken = _contributions_of(review_ids)
    taken.update(thumbs_of(*conversation_ids))
    return Counter({key: -value for key, value in taken.items()})


def erased_cell(*, org_id: int, kind: str, application: str, week: date) -> SlicedKey:
    """The counter of items erased, filed as the item was: a conversation by its application and the week it
    started, a draft (no application) by the week it was last submitted. The rebuild counts it from the erasures'
    tombstones (`Erasure.erased["filed"]`, written with the batch that books it)."""
    return (org_id, kind, 0, application, week, ERASED, "", "", WHOLE)


def rollups_book(delta: Counter) -> None:
    """Book increments computed by the caller (an erasure). Call it last in the transaction: the counters' rows are
    the ones every grading write of the same cells waits on."""
    _apply(delta)


def thumbs_of(*conversation_ids: int) -> Counter:
    """The thumbs counters of these conversations, filed by each conversation as it is now: the rebuild's own
    statement (_THUMBS_SQL) for these conversations alone, so the upkeep and the rebuild count thumbs one way."""
    if not conversation_ids:
        return Counter()
    with connection.cursor() as cursor:
        cursor.execute(_THUMBS_OF_SQL, {"conversations": list(conversation_ids)})
        return Counter({tuple(row[:9]): row[9] for row in cursor.fetchall()})


# One statement text whatever the number of counters, and one parameter for all of them: the counters go as one
# JSON array, which the json module writes in C, where nine arrays of them would cost psycopg a Python loop per
# element in every write. The same statement first takes the orgs' advisory locks shared, in the order given (see
# _LOCK_CLASS): the WHERE's subquery depends on no row, so PostgreSQL runs it once before the first counter is
# produced, and it reads the whole `locked` CTE. json_to_recordset yields the counters in the order given, which is
# key order (see _apply).
_LOCKED = """locked AS MATERIALIZED (
        SELECT pg_advisory_xact_lock_shared(%s, org_id) FROM unnest(%s::integer[]) AS org_id
    )"""
_COUNTERS_UPSERT = """
    INSERT INTO grading_rollup (
        org_id, kind, criteria_id, application, week, metric, key1, key2, slice, value, updated_at
    )
    SELECT cell.*, %s FROM json_to_recordset(%s::json) AS cell(
        org_id bigint, kind text, criteria_id integer, application text, week date,
        metric text, key1 text, key2 text, slice text, value bigint
    )
    WHERE (SELECT count(*) FROM locked) > 0
    ON CONFLICT ON CONSTRAINT rollup_unique_cell_counter
    DO UPDATE SET value = grading_rollup.value + EXCLUDED.value, updated_at = EXCLUDED.updated_at
"""
_UPSERT = f"WITH {_LOCKED}{_COUNTERS_UPSERT}"
_CELL = ("org_id", "kind", "criteria_id", "application", "week", "metric", "key1", "key2", "slice", "value")


# Advisory lock class of the rollups: writers of an org hold it shared, its rebuild exclusive (see rollups_rebuild).
_LOCK_CLASS = 7_417
# Advisory lock class of the rebuilds' bookings (see rollups_rebuild, step 3): its org's key exclusive, key 0 shared,
# to the booking's commit; so an org's bookings take turns. A migration that replaces counters takes key 0 exclusive.
_REBUILD_LOCK_CLASS = 7_418
_BOOKING_LOCKS_SQL = "SELECT pg_advisory_xact_lock_shared(%s, 0), pg_advisory_xact_lock(%s, %s)"


def _apply(delta: Counter, spend: SpendEntry | None = None) -> None:
    rows = sorted((key, value) for key, value in delta.items() if value)
    if not rows:
        if spend is not None:
            judge_spend_add(spend)
        return
    org_ids = sorted({key[0] for key, _ in rows})
    cells = json.dumps([dict(zip(_CELL, (*key, value), strict=True)) for key, value in rows], default=date.isoformat)
    with connection.cursor() as cursor:
        if spend is None:
            cursor.execute(_UPSERT, [_LOCK_CLASS, org_ids, timezone.now(), cells])
        else:
            cursor.execute(_UPSERT_THEN_SPEND, [_LOCK_CLASS, org_ids, timezone.now(), cells, *spend])


def judge_spend_add(spend: SpendEntry) -> None:
    """Add a grading's judge calls, tokens and cost to its ledger row, created by the first review of the day. One
    upsert: every review of an org's version books into the same row all day, so a read-then-write would race and
    an UPDATE-or-INSERT in two statements would hold the hot row's lock longer."""
    with connection.cursor() as cursor:
        cursor.execute(_JUDGE_SPEND_ADD, spend)


def _spend_upsert(where: str) -> str:
    """The ledger's upsert of one row, produced only `where` holds (a condition on no row). Its values are cast: in
    INSERT ... SELECT they do not take the columns' types as VALUES does, and VALUES takes no WHERE."""
    spend = JudgeSpend._meta.db_table
    return f"""
    INSERT INTO {spend} (
        org_id, criteria_version_id, judge, day, calls, prompt_tokens, completion_tokens, cost_micros
    )
    SELECT %s::bigint, %s::bigint, %s::text, %s::date, %s::bigint, %s::bigint, %s::bigint, %s::bigint
    WHERE {where}
    ON CONFLICT (org_id, criteria_version_id, judge, day) DO UPDATE SET
        calls = {spend}.calls + EXCLUDED.calls,
        prompt_tokens = {spend}.prompt_tokens + EXCLUDED.prompt_tokens,
        completion_tokens = {spend}.completion_tokens + EXCLUDED.completion_tokens,
        cost_micros = {spend}.cost_micros + EXCLUDED.cost_micros
    """  # noqa: S608 - the model's table name and constants of ours


_JUDGE_SPEND_ADD = _spend_upsert("true")
# The counters' upsert (`_UPSERT`), then the ledger's row of the grading that wrote them. The ledger's WHERE depends
# on no row, so PostgreSQL reads the whole `counted` CTE, every counter upserted, before the row is produced: the
# ledger's row, the org's hottest, is locked last, as by every writer that books both in two statements (the one
# order of their locks keeps writers from deadlocking), and held for the shortest time.
_COUNTED = f"WITH {_LOCKED}, counted AS ({_COUNTERS_UPSERT} RETURNING 1)"  # noqa: S608 - constants of ours
_UPSERT_THEN_SPEND = _COUNTED + _spend_upsert("(SELECT count(*) FROM counted) >= 0")


# --- the same figures from the raw tables ---------------------------------------------------------------------


# Thumbs are no review's: filed by their conversation as it is now, in one form (SQL) for the upkeep (`thumbs_of`, a
# conversation's) and the rebuild (an org's); in the whole cell only (a slice is its reviews').
def _thumbs_sql(where: str) -> str:
    return f"""SELECT c.org_id, {sql_literal(ItemKind.CONVERSATION)}, 0, c.application, {monday_sql("c.started_at")},
        {sql_literal(THUMBS)}, f.value, '', {sql_literal(WHOLE)}, count(*)
        FROM grading_feedback f JOIN grading_conversation c ON c.id = f.conversation_id
        WHERE {where} GROUP BY 1, 2, 3, 4, 5, 7"""  # noqa: S608 - constants of ours


_THUMBS_SQL = _thumbs_sql("c.org_id = ANY(%(orgs)s)")
_THUMBS_OF_SQL = _thumbs_sql("f.conversation_id = ANY(%(conversations)s)")
# Erased items are nobody's review: counted from the erasures' tombstones, where each batch files what it erased as
# [kind, application, week, items] in the transaction that books the counter (grading/erasure).
_ERASED_SQL = f"""SELECT e.org_id, filed ->> 0, 0, filed ->> 1, (filed ->> 2)::date, {sql_literal(ERASED)}, '', '',
        {sql_literal(WHOLE)}, sum((filed ->> 3)::bigint) FROM grading_erasure e
        CROSS JOIN LATERAL jsonb_array_elements(COALESCE(e.erased -> 'filed', '[]'::jsonb)) filed
        WHERE e.org_id = ANY(%(orgs)s) GROUP BY 1, 2, 3, 4, 5"""  # noqa: S608 - constants of ours
_LIVE_SQL = live_counters_sql([_THUMBS_SQL, _ERASED_SQL])
_LIVE_WEEKS_SQL = live_counters_sql([_THUMBS_SQL, _ERASED_SQL], weeks=True)
_UNREVIEWED_SQL = f"{_THUMBS_SQL}\nUNION ALL {_ERASED_SQL}"  # no review's counters: a recount of no week
# Counted whole by every recount, whatever weeks it recounts: no review books them, so no week is marked by them
# (a conversation's start moves its thumbs from a week nothing wrote to).
_UNREVIEWED = (THUMBS, ERASED)


def live_counters(*, org_ids: Sequence[int], weeks: Sequence[date] | None = None) -> dict[SlicedKey, int]:
    """Every counter of these orgs, computed now from the raw tables (one statement): what the rollup must hold.
    `weeks`: the reviews' counters of those weeks only (the thumbs and the erased items of every week)."""
    sql = _LIVE_SQL if weeks is None else _LIVE_WEEKS_SQL if weeks else _UNREVIEWED_SQL
    with connection.cursor() as cursor:
        cursor.execute(sql, {"orgs": list(org_ids), "weeks": list(weeks or ())})
        return {tuple(row[:9]): row[9] for row in cursor.fetchall()}


def stored_counters(*, org_ids: Sequence[int], weeks: Sequence[date] | None = None) -> dict[SlicedKey, int]:
    """Every counter the rollup holds for these orgs (of these `weeks`), as `live_counters` returns them."""
    rows = Rollup.objects.filter(org_id__in=list(org_ids)).exclude(value=0)
    if weeks is not None:
        rows = rows.filter(Q(week__in=list(weeks)) | Q(metric__in=_UNREVIEWED))
    columns = ("org_id", "kind", "criteria_id", "application", "week", "metric", "key1", "key2", "slice", "value")
    return {tuple(row[:9]): row[9] for row in rows.values_list(*columns)}


def slice_of(counters: dict[SlicedKey, int], slice_key: str = WHOLE) -> dict[Key, int]:
    """One slice's counters of `counters` (as `live_counters` returns them), keyed as a page reads them."""
    return {key[:8]: value for key, value in counters.items() if key[8] == slice_key}


# A slice's values, one index probe each (rollup_org_slice_week): a page offers them in a select. Within a reach
# limited to some applications (and perhaps the drafts), a probe passes over the counters outside it: a value booked
# only outside is no name the reader may learn.
_SLICE_WITHIN = """(%(whole)s OR (r.kind = 'conversation' AND r.application = ANY(%(apps)s))
    OR (r.kind = 'draft' AND %(drafts)s))"""
_SLICES_SQL = f"""
    WITH RECURSIVE seen(slice) AS (
        (SELECT r.slice FROM grading_rollup r WHERE r.org_id = %(org)s AND r.slice > '' AND {_SLICE_WITHIN}
            ORDER BY r.slice LIMIT 1)
        UNION ALL
        SELECT (SELECT r.slice FROM grading_rollup r WHERE r.org_id = %(org)s AND r.slice > seen.slice
            AND {_SLICE_WITHIN} ORDER BY r.slice LIMIT 1)
        FROM seen WHERE seen.slice IS NOT NULL
    )
    SELECT slice FROM seen WHERE slice IS NOT NULL
"""  # noqa: S608 - no value is formatted in: the condition is ours, the values parameters


def slices_seen(*, reach: Reach) -> list[str]:
    """Every slice the counters within `reach` have been booked under ("release=2.4"), in order."""
    parameters = {
        "org": reach.org_id,
        "whole": not reach.limited,
        "apps": sorted(reach.applications or ()),
        "drafts": reach.drafts,
    }
    with connection.cursor() as cursor:
        cursor.execute(_SLICES_SQL, parameters)
        return [row[0] for row in cursor.fetchall()]


# A page's read: the scope's counters summed over its weeks in the database, except the metrics read week by week
# (`by_week`), and the state counters of every week summed likewise. The newest change is returned on one row only:
# a page needs one timestamp, and reading one per row cost more than the rest of the row.
_SCOPE_SQL = """
    SELECT org_id, kind, criteria_id, application, CASE WHEN metric = ANY(%(by_week)s) THEN week END, metric, key1,
        key2, sum(value)::bigint,
        CASE WHEN row_number() OVER (ORDER BY max(updated_at) DESC) = 1 THEN max(updated_at) END
    FROM grading_rollup
    WHERE org_id = %(org)s AND slice = %(slice)s AND value <> 0
        AND (week BETWEEN %(since)s AND %(until)s OR metric = 'state')
        AND (%(every)s OR metric = ANY(%(metrics)s))
    GROUP BY org_id, kind, criteria_id, application, 5, metric, key1, key2
"""


@dataclass(frozen=True)
class ScopeCounters:
    rows: dict[Key, int]  # every counter of the weeks asked for; week None: summed over those weeks
    states: dict[tuple[str, int, str], int]  # (kind, criteria id, stored state) -> reviews, over every week
    last_write: datetime | None  # the newest change among the counters read: how fresh these figures are


def scope_counters(
    *,
    org_id: int,
    since: date,
    until: date,
    keep: Callable[[str, str], bool] | None = None,
    slice_key: str = WHOLE,
    by_week: Collection[str] = (),
    metrics: Collection[str] = (),
) -> ScopeCounters:
    """What a page view reads: the org's counters of one slice (the whole cells by default) in the weeks asked for,
    each summed over those weeks (its week None) unless its metric is one of `by_week`, plus its state counters of
    every week (the staleness audit and the queue depth are whole-org figures) of the (kind, application) cells
    `keep` keeps (every one by default); only the counters of `metrics` when some are named. One statement, no
    ORM, and the sums taken by the database: a page reads the few thousand counters its figures are made of, not
    one per week of each, and the dashboard is meant to cost about what a trivial page costs."""
    rows: dict[Key, int] = {}
    states: Counter = Counter()
    last_write = None
    parameters = {"org": org_id, "slice": slice_key, "since": since, "until": until, "by_week": sorted(by_week),
                  "every": not metrics, "metrics": sorted(metrics)}  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute(_SCOPE_SQL, parameters)
        for *key, value, updated_at in cursor.fetchall():
            if updated_at is not None:
                last_write = updated_at
            if key[5] == "state":
                if keep is None or keep(key[1], key[3]):
                    states[(key[1], key[2], key[6])] += value
            else:
                rows[tuple(key)] = value
    return ScopeCounters(rows, dict(states), last_write)


def rollup_last_rebuild(org: Org) -> RollupRebuild | None:
    return RollupRebuild.objects.filter(org=org).order_by("-rebuilt_at").first()


def orgs_with_items() -> list[int]:
    """The orgs with anything to count: the hourly rebuild's orgs."""
    with_items = Exists(Conversation.objects.filter(org=OuterRef("pk"))) | Exists(
        Draft.objects.filter(org=OuterRef("pk"))
    )
    return list(Org.objects.filter(with_items).values_list("pk", flat=True))


# A counter written by a transaction the last rebuild's snapshot did not see, by its row's xmin (its writer's 32-bit
# transaction id) widened to 64 bits against the newest id (the ids wrap around every 2**32): a write at or after
# `unseen_from` (the snapshot's xmin, the oldest transaction it did not see), which is every such writer and its
# subtransactions (a savepoint's rows carry the subtransaction's id, which a snapshot does not list), and perhaps a
# few it saw. Every write that changes what a review contributes books its cells here, and every counter is filed
# under a week, so these are the weeks whose counters may have changed since.
_WEEKS_WRITTEN_SQL = f"""
    WITH newest AS (SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS xid),
    written AS (SELECT r.week, r.xmin::text::bigint AS low FROM grading_rollup r
        WHERE r.org_id = %(org)s AND r.metric NOT IN ({", ".join(map(sql_literal, _UNREVIEWED))}))
    SELECT DISTINCT written.week FROM written CROSS JOIN newest
    WHERE ((newest.xid >> 32) - (written.low >= (newest.xid & 4294967295))::int) * 4294967296 + written.low
        >= %(since)s
    ORDER BY 1
"""  # noqa: S608 - constants of ours
# The snapshot's oldest transaction it did not see, and the next transaction id (64 bits each).
_SNAPSHOT_SQL = (
    "SELECT pg_snapshot_xmin(s)::text::bigint, pg_snapshot_xmax(s)::text::bigint FROM pg_current_snapshot() s"
)
# The org's last rebuild and the last migration applied: a rebuild's count is out of date once either changed.
_LAST_REBUILD_AND_MIGRATION_SQL = (
    "SELECT (SELECT max(id) FROM grading_rolluprebuild WHERE org_id = %s), (SELECT max(id) FROM django_migrations)"
)


def _last_rebuild_and_migration(cursor: CursorWrapper, org_id: int) -> tuple[int | None, int | None]:
    cursor.execute(_LAST_REBUILD_AND_MIGRATION_SQL, [org_id])
    return cursor.fetchone()


# How often the hourly rebuild recounts every week: what no write books (a counter changed by hand, a row written
# past the upkeep) is put right by the next full rebuild.
FULL_REBUILD_EVERY = timedelta(days=1)


def _weeks_written(*, org_id: int, since: int) -> list[date]:
    with connection.cursor() as cursor:
        cursor.execute(_WEEKS_WRITTEN_SQL, {"org": org_id, "since": since})
        return [row[0] for row in cursor.fetchall()]


def _unseen_since(org_id: int) -> int | None:
    """Where an incremental rebuild of the org starts: the last rebuild's `unseen_from`, while a full rebuild is less
    than FULL_REBUILD_EVERY old; None: it is time for a full one."""
    rebuilds = RollupRebuild.objects.filter(org_id=org_id).order_by("-rebuilt_at")
    last_full = rebuilds.filter(weeks__isnull=True).values_list("rebuilt_at", flat=True).first()
    if last_full is None or last_full <= timezone.now() - FULL_REBUILD_EVERY:
        return None
    return rebuilds.filter(unseen_from__isnull=False).values_list("unseen_from", flat=True).first()


def rollups_rebuild(*, org_id: int, incremental: bool = False) -> RollupRebuild | None:
    """Recompute an org's counters from the reviews, book the difference from what is stored (the drift: zero
    unless something changed a review's contribution without booking it), and record it. `incremental` (the
    hourly beat's): recount only the weeks whose counters were booked since the last rebuild, unless it is time
    for a full one (FULL_REBUILD_EVERY); the thumbs and erased items are recounted whole either way. None, and
    nothing booked, when what it counted is out of date (step 3).

    1. Count from the raw tables and read the stored counters in one snapshot (REPEATABLE READ). Every writer
       changes its reviews and books their counters in one transaction, so a snapshot sees both or neither: the
       difference is drift alone, whatever is being written meanwhile. Nobody waits on this.
       Called inside a transaction that already began (the demo's seed, a test), the snapshot cannot be chosen:
       the org's writers are held off instead (each holds the org's advisory lock shared while it books; this
       takes it exclusive until it commits).
    2. An incremental rebuild first reads, in that snapshot, the weeks of the counters written since the last
       rebuild's snapshot (_WEEKS_WRITTEN_SQL), and recounts and compares those weeks alone.
    3. Book the difference as increments: they commute with the writers' own. Not so with another rebuild's
       (a task delivered twice, the command beside the beat), which found the same drift, nor with a migration
       that replaced the counters: so the bookings of an org's rebuilds take turns, and one books nothing when
       another rebuild of the org booked, or a migration was applied, after its snapshot.
    4. Record the staleness audit's mismatch count (a join over every counting review: done here, hourly, not
       per page view), and where the snapshot stood, for the next incremental rebuild.
    """
    started = time.perf_counter()
    since = _unseen_since(org_id) if incremental else None
    nested = connection.in_atomic_block
    with transaction.atomic():
        with connection.cursor() as cursor:
            if nested:
                cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_LOCK_CLASS, org_id])
            else:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            cursor.execute(_SNAPSHOT_SQL)
            unseen_from, newest = cursor.fetchone()
            counted_after = _last_rebuild_and_migration(cursor, org_id)
        if since is not None and since > newest:
            since = None  # another cluster's transaction ids (a restored backup): only a full rebuild can tell
        weeks = None if since is None else _weeks_written(org_id=org_id, since=since)
        fresh = live_counters(org_ids=[org_id], weeks=weeks)
        stored = stored_counters(org_ids=[org_id], weeks=weeks)
        audit = staleness_audit(Org.objects.get(pk=org_id))
    drift = Counter(fresh)
    drift.subtract(stored)
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(_BOOKING_LOCKS_SQL, [_REBUILD_LOCK_CLASS, _REBUILD_LOCK_CLASS, org_id])
            if _last_rebuild_and_migration(cursor, org_id) != counted_after:
                return None
        _apply(drift)
        return RollupRebuild.objects.create(
            org_id=org_id,
            rebuilt_at=timezone.now(),
            seconds=time.perf_counter() - started,
            rows=len(fresh),
            drifted=sum(1 for value in drift.values() if value),
            mismatched=dict(audit.mismatched),
            weeks=None if weeks is None else [week.isoformat() for week in weeks],
            unseen_from=unseen_from,
        )

"""The grading write path's plain SQL, all of it: the statements a grading sends for every item (the subject and its
messages read, the identity check, the filing lock, the review's INSERT, a state change, the ticket handed back)
and the planner's tickets, the judge spend booked with a review, the spend caps read before every judge call, and
the due times a change of service-level targets writes; and the conversations a transaction of an OTLP request
appends to, saved together (`conversations_save`), as are the waiting model calls a request changes alike
(`pending_calls_save`); and the items of a scored trial stored with its figures (`trial_items_save`). Nothing else in
grading or reviewer sends these, or builds model instances from rows.

Why plain SQL: composing these statements with the ORM, and its save(), cost several times their own CPU, most of a
grading worker's database time; and `bulk_update`, one CASE branch per row, is quadratic in the number of tickets a
pass writes while the workers wait for it to commit (the figures: bench/README.md); so is it in the due times of an
org's waiting reviews. So each statement is composed
once, with psycopg's `sql` from the models' metadata, and every value is a parameter; and rows become model
instances here as the ORM would build them (`_instance`, `_as_python`, `review_insert`: from_db, from_db_value,
get_db_prep_save). What a review's state should be is decided by the record's writer (grading/reviews/services.py),
the only caller of `review_insert` and `review_state_write`.
"""

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, date, datetime
from functools import cache
from typing import Any, TypeVar

from django.db import connection
from django.db.models import Field, Model
from django.utils import timezone
from psycopg import sql

from grading.core import evidence
from grading.core.weeks import monday
from grading.models import (
    LIVE_STATES,
    Conversation,
    CriteriaVersion,
    Draft,
    JudgeSpend,
    Message,
    Org,
    Review,
    ReviewState,
    Route,
    SpendCap,
    TrialFiguresItem,
)
from grading.models.otlp import PendingCall
from grading.reviews.rollups import Tracked

Subject = TypeVar("Subject", Conversation, Draft)
_SUBJECTS = (Conversation, Draft)


def _sql(template: str, **parts: str | sql.Composable) -> str:
    """A statement composed once: `parts` fill the template's {names}, a string as a table or column name of the
    models (`_name`), a Composable as itself. Values stay %s parameters."""
    filled = {name: _name(part) if isinstance(part, str) else part for name, part in parts.items()}
    return sql.SQL(template).format(**filled).as_string()


def _name(name: str) -> sql.Composable:
    """A table or column name from the models' metadata, written as the SQL around it is (unquoted): only a plain
    lowercase name will do, so nothing needs quoting."""
    if not (name.isascii() and name.isidentifier() and name.islower()):
        raise ValueError(f"not a plain name: {name!r}")
    return sql.SQL(name)


def _columns(fields: Sequence[Field], alias: str = "") -> sql.Composable:
    """The fields' columns, in order, comma-separated (each qualified by `alias` when given)."""
    columns = [_name(field.column) for field in fields]
    if alias:
        columns = [_name(alias) + sql.SQL(".") + column for column in columns]
    return sql.SQL(", ").join(columns)


def _column(model: type[Model], name: str) -> str:
    return model._meta.get_field(name).column


def _subject_column(model: type[Subject]) -> str:
    """The review's column naming its subject: conversation_id or draft_id."""
    return _column(Review, model._meta.model_name)


_REVIEW = Review._meta.db_table


# --- what a grader reads ----------------------------------------------------------------------------------------


def subject_to_grade(model: type[Subject], pk: int) -> Subject | None:
    """The item a grader is about to grade, with its org, the pk and revision of its org's active criteria version of
    its kind (`active_criteria_id`, `active_criteria_revision`: an erasure moves a published version's revision on
    when it takes one of its examples) and whether a finished review (not an error, not a trial) read its evidence
    as stored (`evidence_reviewed`), in one read; None when it is gone.

    A conversation comes with the other two reads its grader starts with: its messages as evidence
    (`evidence_messages`, as `conversation_messages` gives them) and the spend caps of its org and of its active
    version, each with what it counts today (`spend_caps`, as `spend_caps_spent` gives them; None when no version is
    active). A draft's grader reads its memory before the caps, so reads them itself."""
    params: dict[str, Any] = {
        "pk": pk,
        "kind": model._meta.model_name,
        "error": Route.ERROR,
        "trial": ReviewState.TRIAL,
    }
    if model is Conversation:
        today = timezone.now().astimezone(UTC).date()
        params |= {"today": today, "week_start": monday(today)}
    return _subject_read(model, params)


def _subject_read(model: type[Subject], params: dict[str, Any]) -> Subject | None:
    with connection.cursor() as cursor:
        cursor.execute(_SUBJECT_SQL[model], params)
        row = cursor.fetchone()
    if row is None:
        return None
    width = len(model._meta.concrete_fields)
    subject = _instance(model, row[:width])
    org_end = width + len(Org._meta.concrete_fields)
    subject.org = _instance(Org, row[width:org_end])
    active, subject.evidence_reviewed, *read_with = row[org_end:]
    subject.active_criteria_id, subject.active_criteria_revision = active or (None, None)
    if model is Conversation:
        caps, *messages = read_with
        # None without an active version: the grader's criteria_active then makes one, whose caps `spend_blocked`
        # reads itself.
        subject.spend_caps = [tuple(cap) for cap in _json(caps or "[]")] if active else None
        subject.evidence_messages = _evidence(messages)
    return subject


def _json(value: str | list) -> list:
    # json arrives as text (Django's loaders leave JSON to the fields that read it).
    return json.loads(value) if isinstance(value, str) else value


def _evidence(columns: Sequence[list | None]) -> list[evidence.EvidenceMessage]:
    """Messages read as one array a column (`_subject_sql`), each converted as `conversation_messages` does."""
    if columns[0] is None:  # no message
        return []
    return [evidence.EvidenceMessage(*_as_python(_EVIDENCE_FIELDS, row)) for row in zip(*columns, strict=True)]


def _subject_sql(model: type[Subject]) -> str:
    read_with = join = sql.SQL("")
    if model is Conversation:
        # The caps with their spend, and the messages: each column an array over the same rows (the aggregates of
        # one query read its rows in one order), as `_evidence` reads them.
        read_with = sql.SQL(
            ", (SELECT json_agg(json_build_array({caps_columns}) ORDER BY {caps_order}) FROM ({caps}) caps), {arrays}"
        ).format(
            caps_columns=sql.SQL(_CAPS_COLUMNS.format(cap="caps")),
            caps_order=sql.SQL(_CAPS_ORDER.format(cap="caps")),
            caps=sql.SQL(_caps_spent_sql(org="i.org_id", version="active.id")),
            arrays=sql.SQL(", ").join(sql.SQL(f"m.a{n}") for n in range(len(_EVIDENCE_FIELDS))),
        )
        join = sql.SQL("LEFT JOIN LATERAL (SELECT {aggregates} FROM {message} WHERE {conversation} = i.id) m ON true")
        join = join.format(
            aggregates=sql.SQL(", ").join(
                sql.SQL("array_agg({column}) AS {alias}").format(column=_name(field.column), alias=_name(f"a{n}"))
                for n, field in enumerate(_EVIDENCE_FIELDS)
            ),
            message=_name(Message._meta.db_table),
            conversation=_name(_column(Message, "conversation")),
        )
    return _sql(
        """
        SELECT {item_columns}, {org_columns},
            CASE WHEN active.id IS NOT NULL THEN ARRAY[active.id, active.revision] END,
            EXISTS (SELECT FROM {review} r WHERE r.{subject} = i.id
                    AND r.fingerprint = i.fingerprint AND r.route <> %(error)s AND r.state <> %(trial)s)
            {read_with}
        FROM {item} i JOIN {org} o ON o.id = i.org_id
        LEFT JOIN LATERAL (
            SELECT v.id, v.revision FROM {criteria} v
            WHERE v.org_id = i.org_id AND v.kind = %(kind)s AND v.is_active LIMIT 1
        ) active ON true
        {join}
        WHERE i.id = %(pk)s
        """,
        item_columns=_columns(model._meta.concrete_fields, "i"),
        org_columns=_columns(Org._meta.concrete_fields, "o"),
        review=_REVIEW,
        subject=_subject_column(model),
        read_with=read_with,
        item=model._meta.db_table,
        org=Org._meta.db_table,
        criteria=CriteriaVersion._meta.db_table,
        join=join,
    )


def review_id_with_identity(subject: Conversation | Draft, match: dict[str, Any]) -> int | None:
    """The id of `subject`'s finished review, not an error and not a trial, whose fields in `match` (score identity
    fields, a foreign key by its pk) hold those values; None when there is none (the identity constraint allows one).
    """
    with connection.cursor() as cursor:
        cursor.execute(
            _identity_sql(type(subject), tuple(match)), [subject.pk, *match.values(), Route.ERROR, ReviewState.TRIAL]
        )
        row = cursor.fetchone()
    return None if row is None else row[0]


@cache
def _identity_sql(model: type[Subject], fields: tuple[str, ...]) -> str:
    matched = sql.SQL(" AND ").join(sql.SQL("{} = %s").format(_name(_column(Review, name))) for name in fields)
    return _sql(
        "SELECT id FROM {review} WHERE {subject} = %s AND {matched} AND route <> %s AND state <> %s LIMIT 1",
        review=_REVIEW,
        subject=_subject_column(model),
        matched=matched,
    )


def conversation_messages(conversation_id: int) -> list[evidence.EvidenceMessage]:
    """Every message of the conversation as evidence (`Message.as_evidence`), read as values: a model instance per
    message would be most of the cost of reading a conversation for grading."""
    with connection.cursor() as cursor:
        cursor.execute(_MESSAGES_SQL, [conversation_id])
        rows = cursor.fetchall()
    return [evidence.EvidenceMessage(*_as_python(_EVIDENCE_FIELDS, row)) for row in rows]


_EVIDENCE_FIELDS = [Message._meta.get_field(name) for name in Message.EVIDENCE_FIELDS]
_MESSAGES_SQL = _sql(
    "SELECT {columns} FROM {message} WHERE {conversation} = %s",
    columns=_columns(_EVIDENCE_FIELDS),
    message=Message._meta.db_table,
    conversation=_column(Message, "conversation"),
)


def _instance(model: type[Model], row: Sequence) -> Model:
    """A model instance from a row of all its concrete columns, in order, as the ORM would build it."""
    return model.from_db(connection.alias, None, _as_python(model._meta.concrete_fields, row))


def _as_python(fields: Sequence[Field], row: Sequence) -> list:
    """A row read by plain SQL, converted as the ORM converts those fields' columns (JSON decoded)."""
    return [
        field.from_db_value(value, None, connection) if value is not None and hasattr(field, "from_db_value") else value
        for field, value in zip(fields, row, strict=True)
    ]


# --- a review's stored state ------------------------------------------------------------------------------------


@contextmanager
def statements_pipelined() -> Iterator[None]:
    """Send the block's statements without waiting for each one's answer where none is read (psycopg's pipeline
    mode): a statement whose rows are fetched still waits for them, the others go out with the next that does, or
    with the COMMIT. For a review's transaction: its last statements book the org's counters and spend ledger, rows
    every grading of the org writes, and their locks are held until the COMMIT. Sent with it, they are held for as
    long as PostgreSQL takes to run them, not for the grading thread's wait, under a worker's other threads, to
    send each next one. An error in a statement sent ahead is raised at the next wait (the COMMIT at the latest),
    and the transaction is rolled back as before."""
    connection.ensure_connection()
    with connection.connection.pipeline():
        yield


def filing_lock(subject: Conversation | Draft, criteria_id: int, ticket: str) -> tuple[dict, bool, bool, int | None]:
    """Lock the subject's row, then its live review's; read what the review is filed by (`FILED_BY`), whether the
    criteria version `criteria_id` is still active, and the live review's id; hand back the item's ticket if the
    task `ticket` still holds it, and say whether it did. DoesNotExist when the subject is gone."""
    model = type(subject)
    with connection.cursor() as cursor:
        cursor.execute(_FILING_SQL[model], [subject.pk, ticket, ticket, list(LIVE_STATES), criteria_id])
        row = cursor.fetchone()
    if row is None:
        raise model.DoesNotExist(f"{model._meta.model_name} {subject.pk} is gone")
    *filed_by, criteria_active, ticket_returned, live = row
    return dict(zip(FILED_BY[model], filed_by, strict=True)), criteria_active, ticket_returned, live


def _filing_sql(model: type[Subject]) -> str:
    # One statement. The ticket's UPDATE runs only when the ticket is the task's, on the row `item` has locked.
    # The item's row is locked before the live review's, as review_state_refresh locks them: `live` reads the
    # item's id through a subquery, which runs (and locks) first. A constraint allows one live review.
    filed_by = [model._meta.get_field(name) for name in FILED_BY[model]]
    return _sql(
        """
        WITH item AS (SELECT id, grading_task_id, {filed_by} FROM {item} WHERE id = %s FOR UPDATE),
        returned AS (
            UPDATE {item} AS owed SET {ticket_returned} FROM item
            WHERE owed.id = item.id AND item.grading_task_id = %s AND %s <> '' RETURNING owed.id
        ),
        live AS (
            SELECT id FROM {review} WHERE {subject} = (SELECT id FROM item) AND state = ANY(%s) LIMIT 1 FOR UPDATE
        )
        SELECT {item_filed_by},
            EXISTS (SELECT FROM {criteria} WHERE id = %s AND is_active),
            EXISTS (SELECT FROM returned),
            (SELECT id FROM live)
        FROM item
        """,
        filed_by=_columns(filed_by),
        item=model._meta.db_table,
        ticket_returned=_TICKET_RETURNED,
        review=_REVIEW,
        subject=_subject_column(model),
        item_filed_by=_columns(filed_by, "item"),
        criteria=CriteriaVersion._meta.db_table,
    )


# The item's fields `filing_lock` reads: its fingerprint and what `review_record` files the review by.
FILED_BY = {
    Draft: ("fingerprint", "updated_at", "metadata"),
    Conversation: ("fingerprint", "application", "started_at", "last_activity_at", "metadata"),
}
# An item's ticket handed back: it is no longer owed a grading (grading/reviews/inflight.py).
_TICKET_RETURNED = sql.SQL("queued_at = NULL, grading_task_id = ''")
_FILING_SQL = {model: _filing_sql(model) for model in _SUBJECTS}


def review_insert(tracked: Tracked, **values: Any) -> Review:
    """`Review.objects.create(**values)` as one plain INSERT, booked for the rollups by `tracked` from the row it
    returns, in the same statement. A foreign key is given as its instance or by its id (`org_id`), a column not
    given takes its field's default, and a JSON field's value is prepared by the field, as save() prepares it; the
    others go as they are (save() would pass them unchanged), and the review handed back is built from the same
    values as the ORM builds a row it read (`from_db`), the related instances given kept. Nothing listens for a
    review's save."""
    unknown = values.keys() - _INSERTABLE
    if unknown:
        raise TypeError(f"Review has no field {sorted(unknown)}")
    row = [None]  # the id, known once inserted
    related = []
    for field in _INSERTED:
        if field.name in values and field.is_relation:
            instance = values[field.name]
            row.append(None if instance is None else instance.pk)
            if instance is not None:
                related.append((field, instance))
        else:
            row.append(values[field.attname] if field.attname in values else field.get_default())
    params = [
        field.get_db_prep_save(value, connection) if field in _JSON_INSERTED else value
        for field, value in zip(_INSERTED, row[1:], strict=True)
    ]
    with connection.cursor() as cursor:
        cursor.execute(_INSERT_REVIEW, params)
        rows = cursor.fetchall()
    tracked.inserted_book(rows)
    row[0] = rows[0][0]  # Tracked.INSERTED_SELECT reads the review's id first
    review = Review.from_db(connection.alias, None, row)
    for field, instance in related:
        field.set_cached_value(review, instance)
    return review


_INSERTED = [field for field in Review._meta.concrete_fields if not field.primary_key]
_INSERTABLE = {field.name for field in _INSERTED} | {field.attname for field in _INSERTED}
_JSON_INSERTED = frozenset(field for field in _INSERTED if field.get_internal_type() == "JSONField")
_INSERT_REVIEW = _sql(
    "WITH inserted AS (INSERT INTO {review} ({columns}) VALUES ({values}) RETURNING *) {contributions}",
    review=_REVIEW,
    columns=_columns(_INSERTED),
    values=sql.SQL(", ").join([sql.Placeholder()] * len(_INSERTED)),
    contributions=sql.SQL(Tracked.INSERTED_SELECT),
)


def review_state_write(review_id: int, state: ReviewState, *, audit: bool = False) -> None:
    """The stored state's one write, and the audit mark's with it (a mark is never taken back). The caller books
    the rollups."""
    with connection.cursor() as cursor:
        cursor.execute(_STATE_WRITE, [state, audit, review_id])


_STATE_WRITE = _sql("UPDATE {review} SET state = %s, audit = audit OR %s WHERE id = %s", review=_REVIEW)


# --- rows an OTLP request writes together (grading/conversations/ingest.py `conversations_write`, otlp/pending.py) --


def conversations_save(conversations: Sequence[Conversation]) -> None:
    """What `save()` writes for each of `conversations` (every column, `updated_at` now), in one statement whatever
    their number: the OTLP receiver's appends of a transaction. `bulk_update`, one CASE branch per row and column,
    cost as much CPU a row as a save()."""
    _rows_save(Conversation, _CONVERSATION_SAVED, conversations)


def pending_calls_save(calls: Sequence[PendingCall], fields: Sequence[str]) -> None:
    """The named `fields` of each of `calls`, locked by the caller, in one statement whatever their number: the
    waiting OTLP model calls a request changed alike (grading/otlp/pending.py). An UPDATE a row, composed by the
    ORM, was the largest share of joining a request's calls to those waiting."""
    _rows_save(PendingCall, tuple(fields), calls)


def _rows_save(model: type[Model], names: tuple[str, ...], rows: Sequence[Model]) -> None:
    if not rows:
        return
    fields = [model._meta.get_field(name) for name in names]
    values = [[field.get_db_prep_save(field.pre_save(row, False), connection) for row in rows] for field in fields]
    with connection.cursor() as cursor:
        cursor.execute(_save_sql(model, names), [[row.pk for row in rows], *values])


@cache
def _save_sql(model: type[Model], names: tuple[str, ...]) -> str:
    """UPDATE of the named fields of many rows from one array a column (composed once per model and fields)."""
    fields = [model._meta.get_field(name) for name in names]
    return _sql(
        "UPDATE {table} AS t SET {assignments} FROM unnest({arrays}) AS v(id, {columns}) WHERE t.id = v.id",
        table=model._meta.db_table,
        assignments=sql.SQL(", ").join(
            sql.SQL("{column} = v.{column}").format(column=_name(field.column)) for field in fields
        ),
        arrays=sql.SQL(", ").join(
            [sql.SQL("%s::bigint[]")] + [sql.SQL("%s::" + field.cast_db_type(connection) + "[]") for field in fields]
        ),
        columns=_columns(fields),
    )


_CONVERSATION_SAVED = tuple(field.name for field in Conversation._meta.concrete_fields if not field.primary_key)


# --- a scored trial's items, stored with its figures (grading/criteria/scoring.py `_store`) ----------------------


def trial_items_save(figures_id: int, rows: Sequence[tuple[int, list]]) -> None:
    """The trial's items as scored, `(position, row)` each, under its stored figures, in one statement from one JSON
    array whatever their number. `bulk_create` sent each column as an array, and psycopg wrote a `jsonb[]` array
    as text, escaping every quote of every row."""
    with connection.cursor() as cursor:
        cursor.execute(_TRIAL_ITEMS_SAVE, [figures_id, json.dumps(rows)])


_TRIAL_ITEMS_SAVE = _sql(
    "INSERT INTO {table} ({columns})"
    " SELECT %s, (item->>0)::integer, item->1 FROM jsonb_array_elements(%s::jsonb) AS item",
    table=TrialFiguresItem._meta.db_table,
    columns=_columns([TrialFiguresItem._meta.get_field(name) for name in ("figures", "position", "row")]),
)


# --- an item's ticket: the grading it is owed (grading/reviews/inflight.py) --------------------------------------


def tickets_write(*, kind: str, item_ids: Sequence[int], task_ids: Sequence[str], now: datetime) -> None:
    """Give each item its ticket, the id of the task that owes it a grading, queued `now` (the planner's pass)."""
    with connection.cursor() as cursor:
        cursor.execute(_TICKETS_WRITE[kind], [now, list(item_ids), list(task_ids)])


def ticket_return(*, kind: str, item_id: int, task_id: str) -> None:
    """The task `task_id` is done with the item: it is no longer queued, unless a newer ticket was issued since.
    (`filing_lock` does the same for the task that writes the review.)"""
    with connection.cursor() as cursor:
        cursor.execute(_TICKET_RETURN[kind], [item_id, task_id])


_TICKETS_WRITE = {
    model._meta.model_name: _sql(
        "UPDATE {item} AS item SET queued_at = %s, grading_task_id = ticket.task_id"
        " FROM unnest(%s::bigint[], %s::text[]) AS ticket(id, task_id) WHERE item.id = ticket.id",
        item=model._meta.db_table,
    )
    for model in _SUBJECTS
}
_TICKET_RETURN = {
    model._meta.model_name: _sql(
        "UPDATE {item} SET {ticket_returned} WHERE id = %s AND grading_task_id = %s",
        item=model._meta.db_table,
        ticket_returned=_TICKET_RETURNED,
    )
    for model in _SUBJECTS
}


# --- what the judge spend caps count (grading/reviews/spend.py; the ledger is booked in rollups.py) -------------


def spend_caps_spent(*, org_id: int, version_id: int | None, today: date, week_start: date) -> list[tuple]:
    """The caps of the org and of the version, org caps first and days before weeks, each with what it counts so
    far in its period: (cap id, version id, period, token limit, cost limit, calls, tokens, cost). Asked before
    every judge call, so one prepared statement, not the ORM's composition (bench/README.md, bench_throughput)."""
    with connection.cursor() as cursor:
        cursor.execute(
            _SPEND_CAPS_SPENT, {"org": org_id, "version": version_id, "today": today, "week_start": week_start}
        )
        return cursor.fetchall()


def _caps_spent_sql(*, org: str, version: str) -> str:
    """The caps of the org `org` and of the version `version` (SQL expressions), each with what it counts since
    %(today)s or %(week_start)s: `spend_caps_spent`'s columns (`_CAPS_COLUMNS`), in no order (`_CAPS_ORDER`)."""
    return _sql(
        """
        SELECT c.id, c.criteria_version_id, c.period, c.tokens, c.cost_micros, COALESCE(SUM(s.calls), 0) AS calls,
               COALESCE(SUM(s.prompt_tokens + s.completion_tokens), 0) AS spent_tokens,
               COALESCE(SUM(s.cost_micros), 0) AS spent_cost
        FROM {cap} c
        LEFT JOIN {spend} s
          ON s.org_id = c.org_id
         AND (c.criteria_version_id IS NULL OR s.criteria_version_id = c.criteria_version_id)
         AND s.day >= CASE WHEN c.period = 'day' THEN %(today)s ELSE %(week_start)s END
        WHERE c.org_id = {org} AND (c.criteria_version_id IS NULL OR c.criteria_version_id = {version})
        GROUP BY c.id
        """,
        cap=SpendCap._meta.db_table,
        spend=JudgeSpend._meta.db_table,
        org=sql.SQL(org),
        version=sql.SQL(version),
    )


_CAPS_COLUMNS = (
    "{cap}.id, {cap}.criteria_version_id, {cap}.period, {cap}.tokens, {cap}.cost_micros, {cap}.calls, "
    "{cap}.spent_tokens, {cap}.spent_cost"
)
# Org caps first, days before weeks.
_CAPS_ORDER = "{cap}.criteria_version_id IS NOT NULL, {cap}.period <> 'day', {cap}.id"
_SPEND_CAPS_SPENT = f"{_caps_spent_sql(org='%(org)s', version='%(version)s')} ORDER BY {_CAPS_ORDER.format(cap='c')}"


def due_times_write(*, org_id: int, review_ids: Sequence[int], due_at: Sequence[datetime | None]) -> int:
    """Set each review's due time (None: no target names it), of those still waiting: the number written."""
    with connection.cursor() as cursor:
        cursor.execute(_DUE_TIMES_WRITE, [list(review_ids), list(due_at), org_id, ReviewState.WAITING])
        return cursor.rowcount


_DUE_TIMES_WRITE = _sql(
    """UPDATE {review} r SET due_at = d.due_at FROM unnest(%s::bigint[], %s::timestamptz[]) AS d(id, due_at)
    WHERE r.id = d.id AND r.org_id = %s AND r.state = %s""",
    review=_REVIEW,
)


# Last: it embeds the messages' columns and the caps' statement, defined above.
_SUBJECT_SQL = {model: _subject_sql(model) for model in _SUBJECTS}

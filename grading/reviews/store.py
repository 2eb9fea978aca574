"""Writing reviews of either kind and their state, and the grading write path's plain SQL.

Every write of a review's stored state is here: both INSERTs (`review_record`, the item's live review;
`trial_review_record`, a trial's, with its own state), and every change of state through `_state_write` (a review
superseded or gone stale, the audit mark, a decision). The identity constraint makes a second review of the same
evidence impossible.

Plain SQL, here and nowhere else on the grading path: the statements a grading sends for every item (the subject
and its messages read, the filing lock, the review's INSERT, its ticket handed back) and the planner's tickets.
Composing a statement with the ORM, and its save(), cost several times the statement's own CPU, most of a grading
worker's database time; and `bulk_update`, one CASE branch per row, is quadratic in the number of tickets a pass
writes while the workers wait for it to commit (the figures: bench/README.md). So each statement is composed once,
at import, from the models' metadata (psycopg composes them; every value is a parameter), and rows become
model instances here as the ORM would build them (`_instance`, `_as_python`, `_review_insert`). Everything else,
here too, uses the ORM.
"""

from collections.abc import Sequence
from datetime import datetime
from functools import cache, lru_cache
from typing import Any, TypeVar

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, connection, transaction
from django.db.models import Field, Model
from django.utils import timezone
from psycopg import sql

from grading import evidence
from grading.criteria.versions import criteria_active
from grading.drafts.rules import DraftRules
from grading.figures.rollups import Tracked, monday, rollups_tracking
from grading.hooks.evaluations import evaluations_export_on_commit
from grading.models import (
    COUNTING_STATES,
    LIVE_STATES,
    Conversation,
    CriteriaVersion,
    Decision,
    Draft,
    ItemKind,
    Message,
    Org,
    Review,
    ReviewState,
    Route,
)
from grading.outcomes import CHECKS, VERDICTS


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


def _columns(fields: Sequence[Field], alias: str | None = None) -> sql.Composable:
    """The fields' columns, in order, comma-separated (each qualified by `alias` when given)."""
    prefix = f"{alias}." if alias else ""
    return sql.SQL(", ").join(sql.SQL(prefix) + _name(field.column) for field in fields)


def _column(model: type[Model], name: str) -> str:
    return model._meta.get_field(name).column


_REVIEW = Review._meta.db_table

# The score identity fields that tell two reviews of one subject apart (the judge is compared by its key).
_IDENTITY_KEYS = ("fingerprint", "criteria_version", "judge_key", "memory_snapshot")


def earlier_review(subject: Conversation | Draft, identity: dict) -> Review | None:
    """What a grader asks before judging: `review_with_identity`, unless the subject as `subject_to_grade` read it
    says no finished review ever read its evidence (`evidence_reviewed`) and the identity names that evidence: the
    first grading of new evidence, nearly every grading, then costs no query."""
    if identity["fingerprint"] == subject.fingerprint and not subject.evidence_reviewed:
        return None
    return review_with_identity(subject, identity)


def review_with_identity(subject: Conversation | Draft, identity: dict) -> Review | None:
    """The finished, non-error review of `subject` with this score identity, if there is one. Trial reviews
    are not: they stand for no grading of the item (ReviewState.TRIAL)."""
    # Asked before every judge call and nearly always absent: ask for the id alone (the identity constraint
    # allows at most one, so there is nothing to order), and read the whole review only when there is one.
    match = {key: identity[key] for key in _IDENTITY_KEYS if key in identity}
    match["criteria_version"] = match["criteria_version"].pk
    pk = _scalar(
        _identity_sql(_subject_field(subject), tuple(match)),
        [subject.pk, *match.values(), Route.ERROR, ReviewState.TRIAL],
    )
    return None if pk is None else Review.objects.get(pk=pk)


@cache
def _identity_sql(field: str, keys: tuple[str, ...]) -> str:
    matched = sql.SQL(" AND ").join(sql.SQL("{} = %s").format(_name(_column(Review, key))) for key in keys)
    return _sql(
        "SELECT id FROM {review} WHERE {subject} = %s AND {matched} AND route <> %s AND state <> %s LIMIT 1",
        review=_REVIEW,
        subject=_column(Review, field),
        matched=matched,
    )


# --- the criteria a grader applies ------------------------------------------------------------------------------


_SUBJECT_KINDS = {Conversation: ItemKind.CONVERSATION, Draft: ItemKind.DRAFT}
Subject = TypeVar("Subject", Conversation, Draft)


def subject_to_grade(model: type[Subject], pk: int) -> Subject | None:
    """The item a grader is about to grade, with its org, the pk of its org's active criteria version of its kind
    (`active_criteria_id`) and whether a finished review (not an error, not a trial) read its evidence as stored
    (`evidence_reviewed`), in one read; None when it is gone."""
    with connection.cursor() as cursor:
        cursor.execute(_SUBJECT_SQL[model], [_SUBJECT_KINDS[model], Route.ERROR, ReviewState.TRIAL, pk])
        row = cursor.fetchone()
    if row is None:
        return None
    width = len(model._meta.concrete_fields)
    subject = _instance(model, row[:width])
    subject.org = _instance(Org, row[width:-2])
    subject.active_criteria_id, subject.evidence_reviewed = row[-2:]
    return subject


def _subject_sql(model: type[Subject]) -> str:
    return _sql(
        """
        SELECT {item_columns}, {org_columns},
            (SELECT v.id FROM {criteria} v WHERE v.org_id = i.org_id AND v.kind = %s AND v.is_active LIMIT 1),
            EXISTS (SELECT FROM {review} r WHERE r.{subject} = i.id
                    AND r.fingerprint = i.fingerprint AND r.route <> %s AND r.state <> %s)
        FROM {item} i JOIN {org} o ON o.id = i.org_id WHERE i.id = %s
        """,
        item_columns=_columns(model._meta.concrete_fields, "i"),
        org_columns=_columns(Org._meta.concrete_fields, "o"),
        criteria=CriteriaVersion._meta.db_table,
        review=_REVIEW,
        subject=_column(Review, _SUBJECT_KINDS[model]),
        item=model._meta.db_table,
        org=Org._meta.db_table,
    )


_SUBJECT_SQL = {model: _subject_sql(model) for model in _SUBJECT_KINDS}


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


def _scalar(sql: str, params: Sequence) -> Any:
    """The first column of the first row `sql` reads, or None when it reads none."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return None if row is None else row[0]


def criteria_of(subject: Conversation | Draft) -> CriteriaVersion:
    """The criteria a grader applies to a subject read by `subject_to_grade`: the active version it named, as
    `criteria_active` gives it.

    Only which version is active is asked each time. A published version never changes (criteria_update
    refuses, and it is published before it can be active), so its rubric and rules are read once per process.
    """
    if subject.active_criteria_id is None:
        return criteria_active(org=subject.org, kind=_SUBJECT_KINDS[type(subject)])  # seeds v1, or says why not
    return _published_version(subject.active_criteria_id)


def published_draft_rules(version: CriteriaVersion) -> DraftRules:
    """`version.draft_rules()`, validated once per process for a published version (read-only: shared)."""
    return _published_rules(version.pk) if version.published_at is not None else version.draft_rules()


# Versions are few (a handful per org and kind) and small; a process keeps the recent ones.
@lru_cache(maxsize=256)
def _published_version(pk: int) -> CriteriaVersion:
    return CriteriaVersion.objects.get(pk=pk, published_at__isnull=False)


@lru_cache(maxsize=256)
def _published_rules(pk: int) -> DraftRules:
    return _published_version(pk).draft_rules()


# --- the stored state: every write that changes what a review is worth goes through here --------------------


def _for_people(review: Review) -> bool:
    """Routed to people by the machine, or picked by the audit sample whatever the machine decided."""
    return review.route == Route.HUMAN or review.audit


def _stored_state(*, matches_item: bool, for_people: bool, decided: bool) -> ReviewState:
    """The state of an item's latest review, as far as the item and the decisions go (ReviewState says what
    is read when asked instead). `for_people`: see `_for_people`."""
    if not matches_item:
        return ReviewState.STALE
    if for_people:
        return ReviewState.DECIDED if decided else ReviewState.WAITING
    return ReviewState.CURRENT


def review_record(
    subject: Conversation | Draft, identity: dict, outcome: dict, *, started_at: datetime, ticket: str = ""
) -> Review:
    """Write a finished review as the subject's latest, in one short transaction, with its state.

    1. Lock the subject's row: writers of one subject are serialised, so one review ends up live.
    2. A grader that read evidence the item no longer has (or criteria no longer active) cannot write a
       review that counts: its review is stale, or, if the item was graded again meanwhile and that review
       counts, history at once (superseded), so it never displaces the review that matches.
    3. Otherwise the previous live review is superseded and this one takes its place.
    If another worker wrote this identity first (the same task delivered twice), the constraint refuses ours
    and theirs is kept. The review is filed for the dashboards as the item stands (application, week, when its
    evidence arrived), and the rollups are booked in the same transaction. So is the item's ticket, when the
    grading task `ticket` still holds it (grading/passes/inflight.py): a written review and an item still owed one never
    coexist, and the task has no statement left to send for it (`Review.ticket_returned` says so).
    """
    field = _subject_field(subject)
    try:
        with transaction.atomic():
            # Only what the review is filed by and the live review's id are needed: reading whole rows (a
            # draft's body, a conversation's evidence state, thirty columns of review) would be most of this
            # block's CPU.
            item, criteria_active, ticket_returned, live = _lock_for_filing(
                subject, identity["criteria_version"], ticket
            )
            matches = identity["fingerprint"] == item["fingerprint"]
            fresh = matches and criteria_active
            with rollups_tracking([live]) as tracked:
                if not fresh and live is not None and Review.objects.counting().filter(pk=live).exists():
                    state = ReviewState.SUPERSEDED
                else:
                    if live is not None:
                        _state_write(live, ReviewState.SUPERSEDED)
                    for_people = outcome["route"] == Route.HUMAN
                    state = _stored_state(matches_item=matches, for_people=for_people, decided=False)
                finished_at = timezone.now()
                review = _review_insert(
                    tracked,
                    org=subject.org,
                    kind=ItemKind.DRAFT if field == "draft" else ItemKind.CONVERSATION,
                    **{field: subject},
                    started_at=started_at,
                    finished_at=finished_at,
                    state=state,
                    **_filing(field, item, finished_at),
                    **identity,
                    **outcome,
                )
            if state in COUNTING_STATES:
                evaluations_export_on_commit(review_id=review.pk)
            review.ticket_returned = ticket_returned
            return review
    except IntegrityError:
        return review_with_identity(subject, identity)


def _lock_for_filing(
    subject: Conversation | Draft, criteria: CriteriaVersion, ticket: str
) -> tuple[dict, bool, bool, int | None]:
    """Lock the subject's row, then its live review's; read what the review is filed by (`_FILED_BY`), whether
    `criteria` is still the active version, and the live review's id; hand back the item's ticket if the task
    `ticket` still holds it, and say whether it did."""
    field = _subject_field(subject)
    columns = _FILED_BY[field]
    with connection.cursor() as cursor:
        cursor.execute(_FILING_SQL[type(subject)], [subject.pk, ticket, ticket, list(LIVE_STATES), criteria.pk])
        row = cursor.fetchone()
    if row is None:
        raise type(subject).DoesNotExist(f"{field} {subject.pk} is gone")
    *filed_by, criteria_active, ticket_returned, live = row
    return dict(zip(columns, filed_by, strict=True)), criteria_active, ticket_returned, live


def _filing_sql(model: type[Subject]) -> str:
    # One statement. The ticket's UPDATE runs only when the ticket is the task's, on the row `item` has locked.
    # The item's row is locked before the live review's, as review_state_refresh locks them: `live` reads the
    # item's id through a subquery, which runs (and locks) first. A constraint allows one live review.
    filed_by = [model._meta.get_field(name) for name in _FILED_BY[_SUBJECT_KINDS[model]]]
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
        subject=_column(Review, _SUBJECT_KINDS[model]),
        item_filed_by=_columns(filed_by, "item"),
        criteria=CriteriaVersion._meta.db_table,
    )


# The item's fields `review_record` reads: its fingerprint and what `_filing` files the review by.
_FILED_BY = {
    "draft": ("fingerprint", "updated_at"),
    "conversation": ("fingerprint", "application", "started_at", "last_activity_at"),
}
# An item's ticket handed back: it is no longer owed a grading (grading/passes/inflight.py).
_TICKET_RETURNED = sql.SQL("queued_at = NULL, grading_task_id = ''")
_FILING_SQL = {model: _filing_sql(model) for model in _SUBJECT_KINDS}


def _filing(field: str, item: dict, finished_at: datetime) -> dict:
    """Where the dashboards file a review: conversations by application and the ISO week they started, drafts by
    the week of their verdict; and when the evidence it read arrived."""
    if field == "draft":
        return {"application": "", "week": monday(finished_at), "submitted_at": item["updated_at"]}
    return {
        "application": item["application"],
        "week": monday(item["started_at"]),
        "submitted_at": item["last_activity_at"],
    }


def review_state_refresh(*, subject: Conversation | Draft) -> None:
    """Keep the subject's reviews true to its fingerprint, after the subject was written. Call it in the
    transaction that wrote the subject, with its row locked (an append, an edit, a resubmit).

    1. The live review still reads the subject's evidence: its state follows its route and decision.
    2. The evidence moved to content an earlier review already read under the active criteria (a branch
       switched back, an edit undone): the newest such review counts again, with no judge call.
    3. Otherwise the live review is stale, in the same commit, until the item is graded again.
    """
    field = _subject_field(subject)
    live = _live_review(field, subject.pk)
    if live is None or live.fingerprint != subject.fingerprint:
        earlier = (
            Review.objects.select_for_update()
            .filter(**{field: subject.pk}, fingerprint=subject.fingerprint, criteria_version__is_active=True)
            .exclude(state=ReviewState.TRIAL)
            .order_by("-finished_at", "-pk")
            .first()
        )
        if earlier is None:
            if live is not None:
                _set_state(live, ReviewState.STALE)
            return
        if live is not None:
            _set_state(live, ReviewState.SUPERSEDED)
        live = earlier
    for_people = _for_people(live)
    decided = for_people and Decision.objects.filter(review=live).exists()
    _set_state(live, _stored_state(matches_item=True, for_people=for_people, decided=decided))


def _set_state(review: Review, state: ReviewState) -> None:
    """Change a review's stored state, booking what that changes in the rollups."""
    if review.state != state:
        with rollups_tracking([review.pk]):
            _state_write(review.pk, state)
        review.state = state


def _state_write(review_id: int, state: ReviewState, *, audit: bool = False) -> None:
    """The stored state's one write, and the audit mark's with it (a mark is never taken back); the caller books
    the rollups (`_set_state`, `review_audit_mark`, `decision_record`, or `review_record`'s own block)."""
    with connection.cursor() as cursor:
        cursor.execute(_STATE_WRITE, [state, audit, review_id])


_STATE_WRITE = _sql("UPDATE {review} SET state = %s, audit = audit OR %s WHERE id = %s", review=_REVIEW)


def review_audit_mark(*, review_ids: list[int]) -> list[int]:
    """Send counting reviews to people as audit items, whatever the machine decided; return the ids newly marked.

    An audit item waits for a person like any item routed to humans (its stored state says so), and its page
    hides the machine's verdict until the person decided. Reviews that stopped counting, and reviews marked
    before, are left alone: marking twice changes nothing.
    """
    marked = []
    with transaction.atomic():
        reviews = (
            Review.objects.counting()
            .select_for_update(of=("self",))
            .filter(pk__in=list(review_ids), audit=False)
            .exclude(route__in=[Route.ERROR, Route.NOT_SCORABLE])
            .order_by("pk")
        )
        for review in reviews:
            with rollups_tracking([review.pk]):
                decided = Decision.objects.filter(review=review).exists()
                state = _stored_state(matches_item=True, for_people=True, decided=decided)
                _state_write(review.pk, state, audit=True)
            marked.append(review.pk)
    return marked


def review_reinstate(review: Review) -> Review:
    """A grader found a review of exactly the evidence it was about to judge: make it the subject's live one
    (it may have been replaced by a review of other evidence since) rather than call the judge again."""
    subject = review.subject
    with transaction.atomic():
        type(subject).objects.select_for_update().filter(pk=subject.pk).first()
        review_state_refresh(subject=type(subject).objects.get(pk=subject.pk))
    review.refresh_from_db(fields=["state"])
    return review


def _live_review(field: str, subject_id: int) -> Review | None:
    return Review.objects.select_for_update().filter(**{field: subject_id}, state__in=LIVE_STATES).first()


def trial_review_record(
    *, subject: Conversation | Draft, identity: dict, outcome: dict, started_at: datetime
) -> Review:
    """Write a trial review (grading/criteria/trials.py): the whole identity, the outcome, the state `trial`. It
    touches no other review and sends nothing anywhere (no webhook, no evaluation export); the rollups count
    nothing of it, by their own rule for the state."""
    field = _subject_field(subject)
    with rollups_tracking() as tracked:
        review = _review_insert(
            tracked,
            org_id=subject.org_id,
            kind=_SUBJECT_KINDS[type(subject)],
            **{field: subject},
            started_at=started_at,
            finished_at=timezone.now(),
            state=ReviewState.TRIAL,
            **identity,
            **outcome,
        )
    return review


def _review_insert(tracked: Tracked, **values: Any) -> Review:
    """`Review.objects.create(**values)` as one plain INSERT, booked for the rollups by `tracked` from the row it
    returns, in the same statement. The values are prepared by the fields themselves, as save() prepares them;
    nothing listens for a review's save."""
    review = Review(**values)
    params = [field.get_db_prep_save(field.pre_save(review, True), connection) for field in _INSERTED]
    with connection.cursor() as cursor:
        cursor.execute(_INSERT_REVIEW, params)
        rows = cursor.fetchall()
    tracked.inserted_book(rows)
    review.pk = rows[0][0]  # Tracked.INSERTED_SELECT reads the review's id first
    review._state.adding, review._state.db = False, connection.alias
    return review


_INSERTED = [field for field in Review._meta.concrete_fields if not field.primary_key]
# What the new review contributes to the rollups is read from the row the INSERT returns: one round trip, not two.
_INSERT_REVIEW = _sql(
    "WITH inserted AS (INSERT INTO {review} ({columns}) VALUES ({values}) RETURNING *) {contributions}",
    review=_REVIEW,
    columns=_columns(_INSERTED),
    values=sql.SQL(", ").join([sql.Placeholder()] * len(_INSERTED)),
    contributions=sql.SQL(Tracked.INSERTED_SELECT),
)


# --- an item's ticket: the grading it is owed (grading/passes/inflight.py) --------------------------------------


def tickets_write(*, kind: str, item_ids: Sequence[int], task_ids: Sequence[str], now: datetime) -> None:
    """Give each item its ticket, the id of the task that owes it a grading, queued `now` (the planner's pass)."""
    with connection.cursor() as cursor:
        cursor.execute(_TICKETS_WRITE[kind], [now, list(item_ids), list(task_ids)])


def ticket_return(*, kind: str, item_id: int, task_id: str) -> None:
    """The task `task_id` is done with the item: it is no longer queued, unless a newer ticket was issued since.
    (`review_record` does the same in its filing statement, for the task that wrote the review.)"""
    with connection.cursor() as cursor:
        cursor.execute(_TICKET_RETURN[kind], [item_id, task_id])


_TICKETS_WRITE = {
    kind: _sql(
        "UPDATE {item} AS item SET queued_at = %s, grading_task_id = ticket.task_id"
        " FROM unnest(%s::bigint[], %s::text[]) AS ticket(id, task_id) WHERE item.id = ticket.id",
        item=model._meta.db_table,
    )
    for model, kind in _SUBJECT_KINDS.items()
}
_TICKET_RETURN = {
    kind: _sql(
        "UPDATE {item} SET {ticket_returned} WHERE id = %s AND grading_task_id = %s",
        item=model._meta.db_table,
        ticket_returned=_TICKET_RETURNED,
    )
    for model, kind in _SUBJECT_KINDS.items()
}


class NotWaiting(Exception):
    """The review is not waiting for a person (decided already, or it stopped counting); nothing was written."""


class InvalidDecision(Exception):
    """A decision that does not fit the review's kind; the message says what to give. Nothing was written."""


DRAFT_OUTCOMES = (Decision.Outcome.APPROVE, Decision.Outcome.REJECT, Decision.Outcome.SEND_BACK)
NOTE_REQUIRED = (Decision.Outcome.REJECT, Decision.Outcome.SEND_BACK)


def decision_record(
    *,
    review_id: int,
    decided_by: AbstractBaseUser,
    decided_at: datetime,
    outcome: str = "",
    checks: dict[str, str] | None = None,
    note: str = "",
) -> Decision:
    """Record a person's decision on a review waiting for one, and mark the review decided.

    1. Drafts take an outcome (a note for reject and send back); conversations a verdict for every check and
       a note, summarised as the routes would be (fail if any check fails, else unknown if any is unknown).
    2. The review must be waiting at the moment of writing: evidence and criteria still current, undecided.
    Runs inside the caller's transaction when there is one (the people side checks the lease under the same
    row lock first).
    """
    with transaction.atomic():
        review = Review.objects.select_for_update().filter(pk=review_id).first()
        if review is None:
            raise NotWaiting(review_id)
        values = _decision_values(review, outcome=outcome, checks=checks or {}, note=note)
        if not Review.objects.waiting().filter(pk=review_id).exists():
            raise NotWaiting(review_id)
        with rollups_tracking([review_id]):
            try:
                with transaction.atomic():
                    decision = Decision.objects.create(
                        org_id=review.org_id,
                        review=review,
                        note=note,
                        decided_by=decided_by,
                        decided_at=decided_at,
                        **values,
                    )
            except IntegrityError:  # the constraint is the last line: a concurrent decision got in first
                raise NotWaiting(review_id) from None
            _state_write(review_id, ReviewState.DECIDED)
        evaluations_export_on_commit(review_id=review_id, decision_id=decision.pk)
    return decision


def _decision_values(review: Review, *, outcome: str, checks: dict[str, str], note: str) -> dict:
    if review.kind == ItemKind.DRAFT:
        if outcome not in DRAFT_OUTCOMES:
            raise InvalidDecision("Choose approve, reject or send back.")
        if outcome in NOTE_REQUIRED and not note:
            raise InvalidDecision(f"A note is required to {Decision.Outcome(outcome).label}.")
        return {"outcome": outcome, "checks": {}}
    if set(checks) != set(CHECKS) or any(verdict not in VERDICTS for verdict in checks.values()):
        raise InvalidDecision("Give a verdict (pass, fail or unknown) for every check.")
    if not note:
        raise InvalidDecision("A note is required with a verdict: say what the evidence shows.")
    verdicts = [checks[name] for name in CHECKS]
    if "fail" in verdicts:
        summary = Decision.Outcome.FAIL
    elif "unknown" in verdicts:
        summary = Decision.Outcome.UNKNOWN
    else:
        summary = Decision.Outcome.PASS
    return {"outcome": summary, "checks": {name: checks[name] for name in CHECKS}}


def _subject_field(subject: Conversation | Draft) -> str:
    return "draft" if isinstance(subject, Draft) else "conversation"

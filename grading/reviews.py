# ruff: noqa: S608 - the SQL below is assembled from table and column names of the models; values are parameters.
"""Grading one conversation into a Review that names its evidence (DESIGN 3 and 4), and writing reviews
of either kind.

The judge is called outside any transaction; the review is written afterwards in one short atomic
block, and the identity constraint makes a second review of the same evidence impossible.
"""

import logging
from collections.abc import Sequence
from datetime import datetime
from functools import cache, lru_cache
from typing import Any, TypeVar

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, connection, transaction
from django.db.models import Model
from django.utils import timezone

from grading import evidence
from grading.criteria import criteria_active
from grading.judge.backends import ConversationJudge, judge_from_settings
from grading.judge.client import ZERO_USAGE, JudgeContextExceeded, JudgeError
from grading.judge.conversation import combine_stages, with_evidence_on_path
from grading.models import (
    COUNTING_STATES,
    LIVE_STATES,
    NO_JUDGE,
    Conversation,
    CriteriaVersion,
    Decision,
    Draft,
    ItemKind,
    Org,
    Review,
    ReviewState,
    Route,
)
from grading.models import for_people as is_for_people
from grading.otlp.export import evaluations_export_on_commit
from grading.outcomes import CHECKS, UNKNOWN_CHECK, VERDICTS
from grading.rollups import Tracked, rollups_tracking
from grading.rules import DraftRules
from grading.selectors import PathState, as_python, conversation_path
from grading.weeks import monday

logger = logging.getLogger(__name__)

NO_JUDGE_IDENTITY = {"backend": NO_JUDGE}


def conversation_grade(
    *, conversation_id: int, judge: ConversationJudge | None = None, now: datetime | None = None, ticket: str = ""
) -> Review | None:
    """Grade the conversation as it is now; return its review (an existing one when already graded). A grading
    task names itself as `ticket`: its ticket is handed back with the review it writes (`review_record`).

    1. Read the messages and compute the active path, fingerprint and scorability.
    2. Skip the judge when a review of this exact identity exists (errors excepted: they are retried).
    3. Not scorable: record why, with no judge call. Otherwise judge each stage, outside any transaction.
    4. Write the review and make it the conversation's current one.
    """
    conversation = subject_to_grade(Conversation, conversation_id)
    if conversation is None:
        return None
    criteria = criteria_of(conversation)
    now = now or timezone.now()
    state = conversation_path(conversation, now=now)
    judge = judge or judge_from_settings()
    identity = path_identity(state, criteria, judge)
    existing = earlier_review(conversation, identity)
    if existing is not None:
        return existing if existing.state in COUNTING_STATES else review_reinstate(existing)
    if state.not_scorable_reason:
        outcome = not_scorable_outcome(state.not_scorable_reason)
    else:
        outcome = path_outcome(state.path, criteria, judge)
    return review_record(conversation, identity, outcome, started_at=now, ticket=ticket)


def path_identity(state: PathState, criteria: CriteriaVersion, judge: ConversationJudge) -> dict:
    """The score identity of a review of the active path under `criteria` (no judge when it is not scorable)."""
    not_scorable = state.not_scorable_reason
    return {
        "fingerprint": evidence.fingerprint(state.path),
        "criteria_version": criteria,
        "judge": NO_JUDGE_IDENTITY if not_scorable else judge.identity.as_json(),
        "judge_key": NO_JUDGE if not_scorable else judge.identity.key,
    }


def not_scorable_outcome(reason: evidence.NotScorable) -> dict:
    return {"route": Route.NOT_SCORABLE, "reason": str(reason), "detail": evidence.REASON_TEXT[reason], "stages": 0}


def path_outcome(path: list[evidence.EvidenceMessage], criteria: CriteriaVersion, judge: ConversationJudge) -> dict:
    """Judge a scorable path under `criteria` in stages that fit the judge's context, and combine the stages'
    verdicts: a review's outcome fields. Grading records it as the conversation's review; a criteria trial as a
    trial review.

    1. Stage the path to the judge's budget, counted in its tokens (`judge.stage_budget`, `judge.measure`).
       A message that cannot fit even alone makes the conversation not scorable by this judge: evidence is
       never cut, and sending it would be refused on every pass.
    2. Judge each stage. A context-length refusal has taught the judge its real window and token counts, so
       stage again, smaller, and start over (at most _RESTAGINGS times); any other judge error is an `error`.
    3. While waiting on the judge this thread holds no database connection when a pool can lend it back.
    """
    path_ids = {m.id for m in path}
    usage = ZERO_USAGE
    stages: list[evidence.Stage] = []
    for _ in range(_RESTAGINGS + 1):
        budget, stages = path_stages(path, criteria, judge)
        if oversized := next((stage for stage in stages if stage.oversized), None):
            return _too_long(oversized, budget, len(stages), usage)
        per_stage = []
        _release_database_connection()
        try:
            for stage in stages:
                judgement = judge.judge_stage(
                    rubric=criteria.rubric, criteria_number=criteria.number, stage=stage, stage_count=len(stages)
                )
                usage = usage + judgement.usage
                per_stage.append(with_evidence_on_path(judgement.verdicts, path_ids))
        except JudgeContextExceeded as exc:
            logger.info("judge refused a stage of %s as too long (%s); staging again", len(stages), exc)
            continue
        except JudgeError as exc:
            logger.warning("judge failed on a stage of %s: %s", len(stages), exc)
            return {
                "route": Route.ERROR,
                "reason": type(exc).__name__,
                "detail": str(exc),
                "stages": len(stages),
                "usage": usage.as_json(),
            }
        checks = combine_stages(per_stage)
        route, reason = _route(checks)
        return {"route": route, "reason": reason, "checks": checks, "stages": len(stages), "usage": usage.as_json()}
    detail = f"the judge refused stages as too long {_RESTAGINGS + 1} times, the last staging had {len(stages)}"
    return {
        "route": Route.ERROR,
        "reason": "JudgeContextExceeded",
        "detail": detail,
        "stages": len(stages),
        "usage": usage.as_json(),
    }


def path_stages(
    path: list[evidence.EvidenceMessage], criteria: CriteriaVersion, judge: ConversationJudge
) -> tuple[int, list[evidence.Stage]]:
    """The stages `judge` reads the path in under `criteria` (its token budget per stage, and the stages): what
    grading sends, and what a trial counts before it spends anything."""
    budget = judge.stage_budget(rubric=criteria.rubric, criteria_number=criteria.number)
    return budget, evidence.stages(path, budget=budget, measure=judge.measure)


# A refusal teaches the judge the server's figures, so one re-staging nearly always fits; a few more allow for
# a server whose error states no figures (each refusal then still raises the token estimate a little).
_RESTAGINGS = 3


def _too_long(stage: evidence.Stage, budget: int, stage_count: int, usage) -> dict:
    [message] = stage.messages
    reason = evidence.NotScorable.TOO_LONG_FOR_JUDGE
    return {
        "route": Route.NOT_SCORABLE,
        "reason": str(reason),
        "detail": f"{evidence.REASON_TEXT[reason]} Message {message.id!r} needs more than the {budget} tokens "
        f"a stage may carry.",
        "stages": stage_count,
        "usage": usage.as_json(),
    }


def _release_database_connection() -> None:
    """Hand this thread's database connection back to the pool before a long wait on the judge, so a worker's
    threads need only as many connections as are touching the database at once, not one each. Only with a
    connection pool (without one, closing means reconnecting afterwards) and never inside a transaction."""
    if connection.settings_dict.get("OPTIONS", {}).get("pool") and not connection.in_atomic_block:
        connection.close()


def _route(checks: dict[str, dict]) -> tuple[Route, str]:
    """Any unknown goes to humans; otherwise all pass is a pass and anything else a fail."""
    verdicts = [checks[name]["verdict"] for name in CHECKS]
    if "unknown" in verdicts:
        return Route.HUMAN, UNKNOWN_CHECK
    if all(verdict == "pass" for verdict in verdicts):
        return Route.PASS, ""
    return Route.FAIL, ""


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
    where = " AND ".join(f"{_REVIEW_COLUMNS[key]} = %s" for key in match)
    pk = _scalar(
        f"SELECT id FROM grading_review WHERE {_subject_field(subject)}_id = %s AND {where}"
        " AND route <> %s AND state <> %s LIMIT 1",
        [subject.pk, *match.values(), Route.ERROR, ReviewState.TRIAL],
    )
    return None if pk is None else Review.objects.get(pk=pk)


_REVIEW_COLUMNS = {key: Review._meta.get_field(key).column for key in _IDENTITY_KEYS}


# --- the criteria a grader applies ------------------------------------------------------------------------------


_SUBJECT_KINDS = {Conversation: ItemKind.CONVERSATION, Draft: ItemKind.DRAFT}
Subject = TypeVar("Subject", Conversation, Draft)


def subject_to_grade(model: type[Subject], pk: int) -> Subject | None:
    """The item a grader is about to grade, with its org, the pk of its org's active criteria version of its kind
    (`active_criteria_id`) and whether a finished review (not an error, not a trial) read its evidence as stored
    (`evidence_reviewed`), in one read; None when it is gone."""
    with connection.cursor() as cursor:
        cursor.execute(_subject_sql(model), [_SUBJECT_KINDS[model], Route.ERROR, ReviewState.TRIAL, pk])
        row = cursor.fetchone()
    if row is None:
        return None
    width = len(model._meta.concrete_fields)
    subject = _instance(model, row[:width])
    subject.org = _instance(Org, row[width:-2])
    subject.active_criteria_id, subject.evidence_reviewed = row[-2:]
    return subject


# The statements a grader runs for every item are plain SQL, written once per process: composing them with the
# ORM costs many times the CPU of sending them as SQL, and a grader sends them for every item.
@cache
def _subject_sql(model: type[Subject]) -> str:
    item, org = model._meta, Org._meta
    columns = [f"i.{f.column}" for f in item.concrete_fields] + [f"o.{f.column}" for f in org.concrete_fields]
    return f"""
        SELECT {", ".join(columns)},
            (SELECT v.id FROM grading_criteriaversion v WHERE v.org_id = i.org_id AND v.kind = %s AND v.is_active
             LIMIT 1),
            EXISTS (SELECT FROM grading_review r WHERE r.{_SUBJECT_KINDS[model]}_id = i.id
                    AND r.fingerprint = i.fingerprint AND r.route <> %s AND r.state <> %s)
        FROM {item.db_table} i JOIN {org.db_table} o ON o.id = i.org_id WHERE i.id = %s
    """


def _instance(model: type[Model], row: Sequence) -> Model:
    """A model instance from a row of all its concrete columns, in order, as the ORM would build it."""
    return model.from_db(connection.alias, None, as_python(model._meta.concrete_fields, row))


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


def _stored_state(*, matches_item: bool, for_people: bool, decided: bool) -> ReviewState:
    """The state of an item's latest review, as far as the item and the decisions go (ReviewState says what
    is read when asked instead). `for_people`: see `grading.models.for_people`."""
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
    grading task `ticket` still holds it (grading/inflight.py): a written review and an item still owed one never
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
                    for_people = is_for_people(route=outcome["route"], audit=False)  # marked for audit later, if ever
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
        cursor.execute(
            _lock_for_filing_sql(type(subject)), [subject.pk, ticket, ticket, list(LIVE_STATES), criteria.pk]
        )
        row = cursor.fetchone()
    if row is None:
        raise type(subject).DoesNotExist(f"{field} {subject.pk} is gone")
    *filed_by, criteria_active, ticket_returned, live = row
    return dict(zip(columns, filed_by, strict=True)), criteria_active, ticket_returned, live


@cache
def _lock_for_filing_sql(model: type[Subject]) -> str:
    # One statement. The ticket's UPDATE runs only when the ticket is the task's, on the row `item` has locked.
    # The item's row is locked before the live review's, as review_state_refresh locks them: `live` reads the
    # item's id through a subquery, which runs (and locks) first. A constraint allows one live review.
    table, field = model._meta.db_table, _SUBJECT_KINDS[model]
    columns = _FILED_BY[field]
    return f"""
        WITH item AS (SELECT id, grading_task_id, {", ".join(columns)} FROM {table} WHERE id = %s FOR UPDATE),
        returned AS (
            UPDATE {table} AS owed SET queued_at = NULL, grading_task_id = '' FROM item
            WHERE owed.id = item.id AND item.grading_task_id = %s AND %s <> '' RETURNING owed.id
        ),
        live AS (
            SELECT id FROM grading_review WHERE {field}_id = (SELECT id FROM item) AND state = ANY(%s)
            LIMIT 1 FOR UPDATE
        )
        SELECT {", ".join(f"item.{column}" for column in columns)},
            EXISTS (SELECT FROM grading_criteriaversion WHERE id = %s AND is_active),
            EXISTS (SELECT FROM returned),
            (SELECT id FROM live)
        FROM item
    """


# The item's columns `review_record` reads: its fingerprint and what `_filing` files the review by.
_FILED_BY = {
    "draft": ("fingerprint", "updated_at"),
    "conversation": ("fingerprint", "application", "started_at", "last_activity_at"),
}


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
    for_people = is_for_people(route=live.route, audit=live.audit)
    decided = for_people and Decision.objects.filter(review=live).exists()
    _set_state(live, _stored_state(matches_item=True, for_people=for_people, decided=decided))


def _set_state(review: Review, state: ReviewState) -> None:
    """Change a review's stored state, booking what that changes in the rollups."""
    if review.state != state:
        with rollups_tracking([review.pk]):
            _state_write(review.pk, state)
        review.state = state


def _state_write(review_id: int, state: ReviewState) -> None:
    """The stored state's one write; the caller books the rollups (`_set_state`, or `review_record`'s own block)."""
    with connection.cursor() as cursor:
        cursor.execute("UPDATE grading_review SET state = %s WHERE id = %s", [state, review_id])


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
                Review.objects.filter(pk=review.pk).update(audit=True, state=state)
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


def _review_insert(tracked: Tracked, **values: Any) -> Review:
    """`Review.objects.create(**values)` as one plain INSERT, booked for the rollups by `tracked`: the ORM's save
    would be most of the write's CPU. The values are prepared by the fields themselves, as save() prepares them;
    nothing listens for a review's save."""
    review = Review(**values)
    params = [field.get_db_prep_save(field.pre_save(review, True), connection) for field in _INSERTED]
    review.pk = tracked.insert(_INSERT_REVIEW, params)
    review._state.adding, review._state.db = False, connection.alias
    return review


_INSERTED = [field for field in Review._meta.concrete_fields if not field.primary_key]
_INSERT_REVIEW = f"""
    INSERT INTO grading_review ({", ".join(field.column for field in _INSERTED)})
    VALUES ({", ".join(["%s"] * len(_INSERTED))})
"""


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
            Review.objects.filter(pk=review_id).update(state=ReviewState.DECIDED)
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

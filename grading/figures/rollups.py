# ruff: noqa: S608 - the SQL below is assembled from this module's constants; values are parameters.
"""The dashboards' figures kept as counters (DESIGN 8), so a page view reads a few thousand rows, never all reviews.

A counter belongs to a cell (org, kind, criteria version, application, ISO week) and says one thing: how many
counting reviews routed `pass`, how many said `unknown` on `grounded`, how many tokens a week's judging took, how
many audit items a person and the machine agreed on. What one review contributes is `_contributions` below, read
from the review alone (its stored state, its outcome, its decision, its labels, and where it was filed when it was
graded), so a change can be booked as "what it contributes now minus what it contributed before".

Upkeep, in the same transaction as the write (so the counters are exact at every commit and a rolled-back write
leaves them untouched): every write in grading that changes what a review contributes (a review written, its
state changed, a decision, the audit mark, a label) runs inside `rollups_tracking` for the reviews it touches.
Increments commute, so concurrent writers never lose one another's counts; each writer's rows are upserted in key
order, so two writers cannot deadlock on them.

Every hour the beat rebuilds every org's counters from the reviews (`rollups_rebuild`, one task per org on a
worker): the same figures computed by one GROUP BY over the raw tables (`live_counters`), compared in
one snapshot with what is stored, the difference booked. It is also the independent check (the benchmark and the
tests compare both). Thumbs are filed by their conversation's present application and week, which a source may
change without any review changing; the rebuild puts such thumbs right.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

from django.db import connection, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from grading.models import (
    COUNTING_STATES,
    Conversation,
    Decision,
    Draft,
    Feedback,
    ItemKind,
    Label,
    Org,
    ReviewState,
    Rollup,
    RollupRebuild,
    Route,
)
from grading.outcomes import CHECKS, SUB_SCORES, VERDICTS
from grading.reviews.reads import staleness_audit

PASS_FAIL = Label.PASS_FAIL
# Upper bounds (seconds) of the waiting-time histograms: a median is read off them to within one bucket.
WAIT_BUCKETS = (60, 300, 900, 1800, 3600, 7200, 14400, 28800, 86400, 172800, 604800)
OVER = "more"  # the bucket past the last bound
_STATE_COUNTERS = (*COUNTING_STATES, ReviewState.STALE)
# A counter's key: (org id, kind, criteria id, application, week, metric, key1, key2).
Key = tuple[int, str, int, str, date, str, str, str]


def monday(moment: datetime | date) -> date:
    """The Monday of the ISO week of `moment` (in UTC): how every figure is filed by week."""
    if isinstance(moment, datetime):
        moment = moment.astimezone(UTC).date() if timezone.is_aware(moment) else moment.date()
    return moment - timedelta(days=moment.weekday())


def wait_bucket(seconds: int) -> str:
    for bound in WAIT_BUCKETS:
        if seconds <= bound:
            return str(bound)
    return OVER


# --- what one review contributes ------------------------------------------------------------------------------

_FIELDS = (
    "id", "org_id", "kind", "criteria_version_id", "state", "route", "reason", "checks", "findings", "sub_scores",
    "repairs", "usage", "judge_passed", "started_at", "finished_at", "submitted_at", "audit", "application", "week",
    "fingerprint", "conversation_id", "draft_id", "conversation__application", "conversation__started_at",
)  # fmt: skip


def _verdict(check: object) -> str:
    verdict = check.get("verdict") if isinstance(check, dict) else None
    return verdict if verdict in VERDICTS else "unknown"


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def machine_verdict(review: dict, check: str) -> str | None:
    """What the machine said on `check` (a conversation check, or pass_fail for the whole item); None when it
    gave no verdict to compare (an error, a conversation that could not be scored)."""
    route = review["route"]
    if route not in (Route.PASS, Route.FAIL, Route.HUMAN):
        return None
    if check == PASS_FAIL:
        if route != Route.HUMAN:
            return route
        if review["kind"] == ItemKind.DRAFT:  # unsure: the judge's own pass verdict is what it leaned to
            return "pass" if review["judge_passed"] else "fail"
        return "unknown"
    checks = review["checks"] if isinstance(review["checks"], dict) else {}
    return _verdict(checks.get(check))


def human_verdicts(kind: str, decision: dict) -> list[tuple[str, str]]:
    """A person's decision as (check, verdict) pairs: a draft approved passes, rejected or sent back fails."""
    if kind == ItemKind.DRAFT:
        return [(PASS_FAIL, "pass" if decision["outcome"] == Decision.Outcome.APPROVE else "fail")]
    checks = decision["checks"] if isinstance(decision["checks"], dict) else {}
    return [(name, checks.get(name) if checks.get(name) in VERDICTS else "unknown") for name in CHECKS]


def agreement_group(review: dict) -> str:
    """Which sample a person's decision belongs to: the audit sample (picked by a rule that ignores the machine)
    or the items the machine was unsure about (biased: the hard ones)."""
    if review["audit"]:
        return "audit"
    return "unsure" if review["route"] == Route.HUMAN else ""


def _contributions(review: dict, decision: dict | None, labels: Sequence[dict]) -> Counter:
    """The counters one review adds (see the module docstring). Mirrored by `_LIVE_SQL`; the tests hold them equal."""
    out: Counter = Counter()
    state = review["state"]
    if state == ReviewState.TRIAL:
        return out
    kind, route = review["kind"], review["route"]
    if kind == ItemKind.DRAFT:
        application = ""
        week = review["week"] or monday(review["finished_at"])
    else:
        application = review["application"] or review["conversation__application"] or ""
        week = review["week"] or monday(review["conversation__started_at"])
    base = (review["org_id"], kind, review["criteria_version_id"], application)

    def add(metric: str, key1: str = "", key2: str = "", value: int = 1, *, at: date = week) -> None:
        out[(*base, at, metric, key1[:64], key2[:64])] += value

    # What judging cost, and what failed, in the week it happened: facts of the review whatever its state.
    spent = monday(review["finished_at"])
    usage = review["usage"] if isinstance(review["usage"], dict) else {}
    if "prompt_tokens" in usage:
        add("judged", at=spent)
        add("tokens", "prompt", value=int(usage.get("prompt_tokens") or 0), at=spent)
        add("tokens", "completion", value=int(usage.get("completion_tokens") or 0), at=spent)
    if route == Route.ERROR:
        add("error", review["reason"], at=spent)
    submitted = review["submitted_at"] or review["started_at"]
    if decision is not None:
        decided = monday(decision["decided_at"])
        waited = max(0, int((decision["decided_at"] - review["finished_at"]).total_seconds()))
        add("decided_by", str(decision["decided_by_id"] or 0), at=decided)
        add("decision_wait_s", value=waited, at=decided)
        add("decision_wait", wait_bucket(waited), at=decided)

    if state in _STATE_COUNTERS:
        add("state", state)
    if state not in COUNTING_STATES:
        return out
    add("route", route, "" if route in (Route.PASS, Route.FAIL) else review["reason"])
    if decision is not None:
        add("decision", decision["outcome"])
    if kind == ItemKind.CONVERSATION:
        if route in (Route.PASS, Route.FAIL, Route.HUMAN):
            checks = review["checks"] if isinstance(review["checks"], dict) else {}
            for name in CHECKS:
                add("check", name, _verdict(checks.get(name)))
    else:
        repairs = review["repairs"]
        applied = repairs.get("applied") if isinstance(repairs, dict) else None
        if route == Route.PASS and isinstance(applied, list) and applied:
            add("repaired_pass")
        findings = review["findings"] if isinstance(review["findings"], list) else []
        for code in sorted(
            {f["code"][:64] for f in findings if isinstance(f, dict) and isinstance(f.get("code"), str)}
        ):
            add("finding", code)
        sub_scores = review["sub_scores"] if isinstance(review["sub_scores"], dict) else {}
        for name in SUB_SCORES:
            if _number(sub_scores.get(name)):
                add("subscore_milli", name, value=round(sub_scores[name] * 1000))
                add("subscore_n", name)
        if route in (Route.PASS, Route.FAIL, Route.HUMAN):
            waited = max(0, int((review["finished_at"] - submitted).total_seconds()))
            add("verdict_wait_s", value=waited)
            add("verdict_wait", wait_bucket(waited))
        if decision is not None:
            waited = max(0, int((decision["decided_at"] - submitted).total_seconds()))
            add("human_wait_s", value=waited)
            add("human_wait", wait_bucket(waited))
    group = agreement_group(review)
    if decision is not None and group:
        for check, human in human_verdicts(kind, decision):
            machine = machine_verdict(review, check)
            if machine is not None:
                add(f"agree_{group}", check, f"{machine}>{human}")
    for label in labels:
        machine = machine_verdict(review, label["check_name"])
        if machine is not None:
            add("agree_label", label["check_name"], f"{machine}>{label['verdict']}")
    return out


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
        decision = dict(zip(_DECISION_FIELDS, row[len(_FIELDS) : -1], strict=True))
        decision["checks"] = _json(decision["checks"])
        labels = _json(row[-1]) or []
        total.update(_contributions(review, decision if decision["outcome"] is not None else None, labels))
    return total


_JSON_FIELDS = ("checks", "findings", "sub_scores", "repairs", "usage")
_DECISION_FIELDS = ("outcome", "checks", "decided_at", "decided_by_id")


def _contributions_select(reviews: str) -> str:
    """The columns of _FIELDS in order (its last two, the conversation's, from the join), the review's decision (NULLs
    when it has none) and its labels (those of its subject that speak about the evidence it read), of the reviews
    in `reviews`: the table, or the row an INSERT returns (Tracked.insert)."""
    return f"""
    SELECT {", ".join(f"r.{name}" for name in _FIELDS[:-2])}, c.application, c.started_at,
        d.outcome, d.checks, d.decided_at, d.decided_by_id,
        (SELECT json_agg(json_build_object('check_name', l.check_name, 'verdict', l.verdict)) FROM grading_label l
            WHERE l.fingerprint = r.fingerprint
            AND (l.conversation_id = r.conversation_id OR l.draft_id = r.draft_id))
    FROM {reviews} r
    LEFT JOIN grading_conversation c ON c.id = r.conversation_id
    LEFT JOIN grading_decision d ON d.review_id = r.id
    """


_CONTRIBUTIONS_SQL = _contributions_select("grading_review") + "WHERE r.id = ANY(%s)"
_INSERTED_CONTRIBUTIONS = _contributions_select("inserted")


def _json(value: object) -> object:
    """A json column as Python: Django reads jsonb as text (its JSONField decodes it), plain json arrives decoded."""
    return json.loads(value) if isinstance(value, str) else value


@dataclass
class Tracked:
    """The reviews a write touches, and what the ones it creates contribute."""

    review_ids: list[int]
    inserted: Counter = field(default_factory=Counter)
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
    _apply(delta)


def rollups_thumbs_refresh(*, conversation_id: int, before: Counter) -> None:
    """Book a change of a conversation's thumbs: call with `thumbs_of(conversation_id)` taken before the write."""
    delta = thumbs_of(conversation_id)
    delta.subtract(before)
    _apply(delta)


def thumbs_of(conversation_id: int) -> Counter:
    conversation = Conversation.objects.filter(pk=conversation_id).values("org_id", "application", "started_at").first()
    out: Counter = Counter()
    if conversation is None:
        return out
    for value in Feedback.objects.filter(conversation_id=conversation_id).values_list("value", flat=True):
        week = monday(conversation["started_at"])
        out[
            (conversation["org_id"], ItemKind.CONVERSATION, 0, conversation["application"], week, "thumbs", value, "")
        ] += 1
    return out


# One statement text whatever the number of counters, and one parameter for all of them: the counters go as one
# JSON array, which the json module writes in C, where nine arrays of them would cost psycopg a Python loop per
# element in every write. The same statement first takes the orgs' advisory locks shared, in the order given (see
# _LOCK_CLASS): the WHERE's subquery depends on no row, so PostgreSQL runs it once before the first counter is
# produced, and it reads the whole `locked` CTE. json_to_recordset yields the counters in the order given, which is
# key order (see _apply).
_UPSERT = """
    WITH locked AS MATERIALIZED (
        SELECT pg_advisory_xact_lock_shared(%s, org_id) FROM unnest(%s::integer[]) AS org_id
    )
    INSERT INTO grading_rollup (org_id, kind, criteria_id, application, week, metric, key1, key2, value, updated_at)
    SELECT cell.*, %s FROM json_to_recordset(%s::json) AS cell(
        org_id bigint, kind text, criteria_id integer, application text, week date,
        metric text, key1 text, key2 text, value bigint
    )
    WHERE (SELECT count(*) FROM locked) > 0
    ON CONFLICT ON CONSTRAINT rollup_unique_cell_counter
    DO UPDATE SET value = grading_rollup.value + EXCLUDED.value, updated_at = EXCLUDED.updated_at
"""
_CELL = ("org_id", "kind", "criteria_id", "application", "week", "metric", "key1", "key2", "value")


# Advisory lock class of the rollups: writers of an org hold it shared, its rebuild exclusive (see rollups_rebuild).
_LOCK_CLASS = 7_417


def _apply(delta: Counter) -> None:
    rows = sorted((key, value) for key, value in delta.items() if value)
    if not rows:
        return
    org_ids = sorted({key[0] for key, _ in rows})
    cells = json.dumps([dict(zip(_CELL, (*key, value), strict=True)) for key, value in rows], default=date.isoformat)
    with connection.cursor() as cursor:
        cursor.execute(_UPSERT, [_LOCK_CLASS, org_ids, timezone.now(), cells])


# --- the same figures from the raw tables ---------------------------------------------------------------------

_WEEK = "date_trunc('week', ({}) AT TIME ZONE 'UTC')::date"
_BUCKET = "CASE " + " ".join(f"WHEN {{0}} <= {bound} THEN '{bound}'" for bound in WAIT_BUCKETS) + f" ELSE '{OVER}' END"
_VERDICT = "CASE WHEN {0} IN ('pass', 'fail', 'unknown') THEN {0} ELSE 'unknown' END"
_MACHINE_PASS_FAIL = """CASE WHEN r.route IN ('pass', 'fail') THEN r.route
    WHEN r.kind = 'draft' THEN (CASE WHEN r.judge_passed THEN 'pass' ELSE 'fail' END) ELSE 'unknown' END"""  # noqa: S105 - SQL, not a password
_MACHINE_CHECK = _VERDICT.format("r.checks -> {0} ->> 'verdict'")
_SCORED = "r.route IN ('pass', 'fail', 'human')"
_COLS = "r.org_id, r.kind, r.criteria_id, r.application"

_LIVE_SQL = f"""
WITH r AS MATERIALIZED (
    SELECT rv.id, rv.org_id, rv.kind, rv.criteria_version_id AS criteria_id,
        CASE WHEN rv.kind = 'draft' THEN '' ELSE COALESCE(NULLIF(rv.application, ''),
            (SELECT c.application FROM grading_conversation c WHERE c.id = rv.conversation_id), '') END AS application,
        COALESCE(rv.week, CASE WHEN rv.kind = 'draft' THEN {_WEEK.format("rv.finished_at")}
            ELSE (SELECT {_WEEK.format("c.started_at")} FROM grading_conversation c WHERE c.id = rv.conversation_id)
            END) AS week,
        {_WEEK.format("rv.finished_at")} AS spent_week,
        rv.state, rv.state IN ('current', 'waiting', 'decided') AS counting, rv.route, left(rv.reason, 64) AS reason,
        rv.checks, rv.findings, rv.sub_scores, rv.repairs, rv.usage, rv.judge_passed, rv.finished_at,
        COALESCE(rv.submitted_at, rv.started_at) AS submitted, rv.audit, rv.fingerprint, rv.conversation_id,
        rv.draft_id
    FROM grading_review rv WHERE rv.org_id = ANY(%(orgs)s) AND rv.state <> 'trial'
), d AS MATERIALIZED (
    SELECT r.*, dc.outcome, dc.checks AS human_checks, dc.decided_at, COALESCE(dc.decided_by_id, 0) AS decided_by,
        greatest(0, floor(extract(epoch FROM dc.decided_at - r.finished_at)))::bigint AS waited,
        greatest(0, floor(extract(epoch FROM dc.decided_at - r.submitted)))::bigint AS human_waited
    FROM r JOIN grading_decision dc ON dc.review_id = r.id
), checks(name) AS (VALUES ('grounded'), ('complete'), ('usable')),
counters(org_id, kind, criteria_id, application, week, metric, key1, key2, value) AS (
    SELECT {_COLS}, r.spent_week, 'judged', '', '', count(*) FROM r WHERE r.usage ? 'prompt_tokens'
        GROUP BY 1, 2, 3, 4, 5
    UNION ALL SELECT {_COLS}, r.spent_week, 'tokens', 'prompt', '',
        sum(COALESCE(trunc((r.usage ->> 'prompt_tokens')::numeric), 0)) FROM r WHERE r.usage ? 'prompt_tokens'
        GROUP BY 1, 2, 3, 4, 5
    UNION ALL SELECT {_COLS}, r.spent_week, 'tokens', 'completion', '',
        sum(COALESCE(trunc((r.usage ->> 'completion_tokens')::numeric), 0)) FROM r WHERE r.usage ? 'prompt_tokens'
        GROUP BY 1, 2, 3, 4, 5
    UNION ALL SELECT {_COLS}, r.spent_week, 'error', r.reason, '', count(*) FROM r WHERE r.route = 'error'
        GROUP BY 1, 2, 3, 4, 5, 7
    UNION ALL SELECT {_COLS}, {_WEEK.format("r.decided_at")}, 'decided_by', r.decided_by::text, '', count(*)
        FROM d r GROUP BY 1, 2, 3, 4, 5, 7
    UNION ALL SELECT {_COLS}, {_WEEK.format("r.decided_at")}, 'decision_wait_s', '', '', sum(r.waited)
        FROM d r GROUP BY 1, 2, 3, 4, 5
    UNION ALL SELECT {_COLS}, {_WEEK.format("r.decided_at")}, 'decision_wait', {_BUCKET.format("r.waited")}, '',
        count(*) FROM d r GROUP BY 1, 2, 3, 4, 5, 7
    UNION ALL SELECT {_COLS}, r.week, 'state', r.state, '', count(*) FROM r
        WHERE r.state IN ('current', 'waiting', 'decided', 'stale') GROUP BY 1, 2, 3, 4, 5, 7
    UNION ALL SELECT {_COLS}, r.week, 'route', r.route, CASE WHEN r.route IN ('pass', 'fail') THEN '' ELSE r.reason END,
        count(*) FROM r WHERE r.counting GROUP BY 1, 2, 3, 4, 5, 7, 8
    UNION ALL SELECT {_COLS}, r.week, 'decision', r.outcome, '', count(*) FROM d r WHERE r.counting
        GROUP BY 1, 2, 3, 4, 5, 7
    UNION ALL SELECT {_COLS}, r.week, 'check', checks.name, {_MACHINE_CHECK.format("checks.name")}, count(*)
        FROM r CROSS JOIN checks WHERE r.counting AND r.kind = 'conversation' AND {_SCORED} GROUP BY 1, 2, 3, 4, 5, 7, 8
    UNION ALL SELECT {_COLS}, r.week, 'repaired_pass', '', '', count(*) FROM r
        WHERE r.counting AND r.kind = 'draft' AND r.route = 'pass' AND jsonb_typeof(r.repairs -> 'applied') = 'array'
        AND jsonb_array_length(r.repairs -> 'applied') > 0 GROUP BY 1, 2, 3, 4, 5
    UNION ALL SELECT org_id, kind, criteria_id, application, week, 'finding', code, '', count(*) FROM (
        SELECT DISTINCT r.id, {_COLS}, r.week, left(f ->> 'code', 64) AS code
        FROM r CROSS JOIN LATERAL jsonb_array_elements(
            CASE WHEN jsonb_typeof(r.findings) = 'array' THEN r.findings ELSE '[]'::jsonb END) f
        WHERE r.counting AND r.kind = 'draft' AND jsonb_typeof(f) = 'object' AND jsonb_typeof(f -> 'code') = 'string'
    ) found GROUP BY 1, 2, 3, 4, 5, 7
    UNION ALL SELECT {_COLS}, r.week, 'subscore_milli', s.name, '',
        sum(round((r.sub_scores ->> s.name)::numeric * 1000))
        FROM r CROSS JOIN (VALUES ('aeo'), ('writing'), ('org_fit')) s(name)
        WHERE r.counting AND r.kind = 'draft' AND jsonb_typeof(r.sub_scores -> s.name) = 'number'
        GROUP BY 1, 2, 3, 4, 5, 7
    UNION ALL SELECT {_COLS}, r.week, 'subscore_n', s.name, '', count(*)
        FROM r CROSS JOIN (VALUES ('aeo'), ('writing'), ('org_fit')) s(name)
        WHERE r.counting AND r.kind = 'draft' AND jsonb_typeof(r.sub_scores -> s.name) = 'number'
        GROUP BY 1, 2, 3, 4, 5, 7
    UNION ALL SELECT {_COLS}, r.week, 'verdict_wait_s', '', '',
        sum(greatest(0, floor(extract(epoch FROM r.finished_at - r.submitted)))::bigint)
        FROM r WHERE r.counting AND r.kind = 'draft' AND {_SCORED} GROUP BY 1, 2, 3, 4, 5
    UNION ALL SELECT {_COLS}, r.week, 'verdict_wait',
        {_BUCKET.format("greatest(0, floor(extract(epoch FROM r.finished_at - r.submitted)))")}, '', count(*)
        FROM r WHERE r.counting AND r.kind = 'draft' AND {_SCORED} GROUP BY 1, 2, 3, 4, 5, 7
    UNION ALL SELECT {_COLS}, r.week, 'human_wait_s', '', '', sum(r.human_waited) FROM d r
        WHERE r.counting AND r.kind = 'draft' GROUP BY 1, 2, 3, 4, 5
    UNION ALL SELECT {_COLS}, r.week, 'human_wait', {_BUCKET.format("r.human_waited")}, '', count(*) FROM d r
        WHERE r.counting AND r.kind = 'draft' GROUP BY 1, 2, 3, 4, 5, 7
    UNION ALL SELECT {_COLS}, r.week, CASE WHEN r.audit THEN 'agree_audit' ELSE 'agree_unsure' END, checks.name,
        {_MACHINE_CHECK.format("checks.name")} || '>' || {_VERDICT.format("r.human_checks ->> checks.name")}, count(*)
        FROM d r CROSS JOIN checks WHERE r.counting AND r.kind = 'conversation' AND {_SCORED}
        AND (r.audit OR r.route = 'human') GROUP BY 1, 2, 3, 4, 5, 6, 7, 8
    UNION ALL SELECT {_COLS}, r.week, CASE WHEN r.audit THEN 'agree_audit' ELSE 'agree_unsure' END, 'pass_fail',
        {_MACHINE_PASS_FAIL} || '>' || CASE WHEN r.outcome = 'approve' THEN 'pass' ELSE 'fail' END, count(*)
        FROM d r WHERE r.counting AND r.kind = 'draft' AND {_SCORED} AND (r.audit OR r.route = 'human')
        GROUP BY 1, 2, 3, 4, 5, 6, 7, 8
    UNION ALL SELECT {_COLS}, r.week, 'agree_label', l.check_name,
        CASE WHEN l.check_name = 'pass_fail' THEN {_MACHINE_PASS_FAIL} ELSE {_MACHINE_CHECK.format("l.check_name")} END
        || '>' || l.verdict, count(*)
        FROM r JOIN grading_label l ON l.fingerprint = r.fingerprint
            AND (l.conversation_id = r.conversation_id OR l.draft_id = r.draft_id)
        WHERE r.counting AND {_SCORED} GROUP BY 1, 2, 3, 4, 5, 7, 8
    UNION ALL SELECT c.org_id, 'conversation', 0, c.application, {_WEEK.format("c.started_at")}, 'thumbs', f.value, '',
        count(*) FROM grading_feedback f JOIN grading_conversation c ON c.id = f.conversation_id
        WHERE c.org_id = ANY(%(orgs)s) GROUP BY 1, 2, 3, 4, 5, 7
)
SELECT org_id, kind, criteria_id, application, week, metric, key1, key2, sum(value)::bigint FROM counters
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8 HAVING sum(value) <> 0
"""


def live_counters(*, org_ids: Sequence[int]) -> dict[Key, int]:
    """Every counter of these orgs, computed now from the raw tables (one statement): what the rollup must hold."""
    with connection.cursor() as cursor:
        cursor.execute(_LIVE_SQL, {"orgs": list(org_ids)})
        return {tuple(row[:8]): row[8] for row in cursor.fetchall()}


def stored_counters(*, org_ids: Sequence[int]) -> dict[Key, int]:
    """Every counter the rollup holds for these orgs, as `live_counters` returns them."""
    rows = Rollup.objects.filter(org_id__in=list(org_ids)).exclude(value=0)
    columns = ("org_id", "kind", "criteria_id", "application", "week", "metric", "key1", "key2", "value")
    return {tuple(row[:8]): row[8] for row in rows.values_list(*columns)}


# The newest change is returned on one row only: a page reads thousands of counters and needs one timestamp.
_SCOPE_SQL = """
    SELECT org_id, kind, criteria_id, application, week, metric, key1, key2, value,
        CASE WHEN row_number() OVER (ORDER BY updated_at DESC) = 1 THEN updated_at END
    FROM grading_rollup WHERE org_id = %s AND value <> 0 AND (week BETWEEN %s AND %s OR metric = 'state')
"""


@dataclass(frozen=True)
class ScopeCounters:
    rows: dict[Key, int]  # every counter of the weeks asked for
    states: dict[tuple[str, int, str], int]  # (kind, criteria id, stored state) -> reviews, over every week
    last_write: datetime | None  # the newest change among the counters read: how fresh these figures are


def scope_counters(*, org_id: int, since: date, until: date) -> ScopeCounters:
    """What a page view reads: one indexed range of the org's counters, plus its state counters of every week
    (the staleness audit and the queue depth are whole-org figures). Read with one statement and no ORM: the
    page reads a few thousand rows and the dashboard is meant to cost about what a trivial page costs."""
    rows: dict[Key, int] = {}
    states: Counter = Counter()
    last_write = None
    with connection.cursor() as cursor:
        cursor.execute(_SCOPE_SQL, [org_id, since, until])
        for *key, value, updated_at in cursor.fetchall():
            if key[5] == "state":
                states[(key[1], key[2], key[6])] += value
            if since <= key[4] <= until:
                rows[tuple(key)] = value
            if updated_at is not None:
                last_write = updated_at
    return ScopeCounters(rows, dict(states), last_write)


def rollup_last_rebuild(org: Org) -> RollupRebuild | None:
    return RollupRebuild.objects.filter(org=org).order_by("-rebuilt_at").first()


def orgs_with_items() -> list[int]:
    """The orgs with anything to count: the hourly rebuild's orgs."""
    with_items = Exists(Conversation.objects.filter(org=OuterRef("pk"))) | Exists(
        Draft.objects.filter(org=OuterRef("pk"))
    )
    return list(Org.objects.filter(with_items).values_list("pk", flat=True))


def rollups_rebuild(*, org_id: int) -> RollupRebuild:
    """Recompute an org's counters from the reviews, book the difference from what is stored (the drift: zero
    unless something changed a review's contribution without booking it), and record it.

    1. Count from the raw tables and read the stored counters in one snapshot (REPEATABLE READ). Every writer
       changes its reviews and books their counters in one transaction, so a snapshot sees both or neither: the
       difference is drift alone, whatever is being written meanwhile. Nobody waits on this.
       Called inside a transaction that already began (the demo's seed, a test), the snapshot cannot be chosen:
       the org's writers are held off instead (each holds the org's advisory lock shared while it books; this
       takes it exclusive until it commits).
    2. Book the difference as increments: they commute with the writers' own.
    3. Record the staleness audit's mismatch count (a join over every counting review: done here, hourly, not
       per page view).
    """
    started = time.perf_counter()
    nested = connection.in_atomic_block
    with transaction.atomic():
        with connection.cursor() as cursor:
            if nested:
                cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_LOCK_CLASS, org_id])
            else:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        fresh = live_counters(org_ids=[org_id])
        stored = stored_counters(org_ids=[org_id])
        audit = staleness_audit(Org.objects.get(pk=org_id))
    drift = Counter(fresh)
    drift.subtract(stored)
    with transaction.atomic():
        _apply(drift)
        return RollupRebuild.objects.create(
            org_id=org_id,
            rebuilt_at=timezone.now(),
            seconds=time.perf_counter() - started,
            rows=len(fresh),
            drifted=sum(1 for value in drift.values() if value),
            mismatched=dict(audit.mismatched),
        )

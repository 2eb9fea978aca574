"""Reads for the review queue: which reviews wait for a person, which still count, and what an item page shows.

Every read takes the operator's org ids, so a view that forgets to filter by org has nothing to pass.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import Case, Exists, IntegerField, OuterRef, QuerySet, Value, When
from django.utils import timezone

from grading.judge.conversation import CHECKS
from grading.models import Conversation, CriteriaVersion, Draft, ItemKind, Review, Route
from grading.selectors import current_conversation_reviews, current_draft_reviews
from reviewer.access import orgs_for
from reviewer.models import Claim, Decision, QueueHead, Role

PAGE_SIZE = 25  # a screenful: operators work from the top; j/k and paging reach the rest

REASON_LABELS = {
    "band": "band",
    "unknown_check": "unknown check",
    "judge_contradiction": "judge contradicts itself",
    "spread": "spread straddles",
}
SUB_SCORE_LABELS = {"aeo": "AEO compliance", "writing": "writing quality", "org_fit": "org fit"}

# Drafts come first: a pipeline is blocked on each one, while a conversation review is after the fact.
# The same expression is indexed (reviewer migration 0003), so the queue reads in index order.
PRIORITY = Case(When(kind=ItemKind.DRAFT, then=Value(0)), default=Value(1), output_field=IntegerField())


def operator_org_ids(user) -> list[int]:
    """The orgs in which `user` is an operator: the only orgs the queue reads from."""
    return list(orgs_for(user, Role.OPERATOR).values_list("pk", flat=True))


# --- which reviews count --------------------------------------------------------------------------------------


def reviews_still_counting(kind: str | None = None) -> QuerySet[Review]:
    """Reviews that count: the item's latest, for the item's present fingerprint, under the active criteria.

    Conversations use grading's own selector; drafts follow the same rule through `current_draft_reviews`.
    """
    if kind == ItemKind.CONVERSATION:
        return current_conversation_reviews()
    if kind == ItemKind.DRAFT:
        return current_draft_reviews()
    return current_conversation_reviews() | current_draft_reviews()


def review_still_counts(review: Review) -> bool:
    """Whether the review counts, asked of the database (what claims and decisions rely on)."""
    return reviews_still_counting(review.kind).filter(pk=review.pk).exists()


def review_shown_as_counting(review: Review) -> bool:
    """The same rule read from the review as loaded with its item and criteria (`review_for_operator`), for
    display only: services ask `review_still_counts` again under lock before acting."""
    item = review.conversation if review.kind == ItemKind.CONVERSATION else review.draft
    return (
        review.is_current
        and review.criteria_version.is_active
        and item is not None
        and item.fingerprint == review.fingerprint
    )


def stale_reason(review: Review) -> str:
    """Why a review no longer counts, in words for the operator. Reads the loaded item and criteria."""
    if not review.criteria_version.is_active:
        return (
            f"A new {review.kind} criteria version was published after this review (it was judged under "
            f"v{review.criteria_version.number}); the item will be graded again under the active one."
        )
    item = review.conversation if review.kind == ItemKind.CONVERSATION else review.draft
    if item is not None and item.fingerprint != review.fingerprint:
        if review.kind == ItemKind.CONVERSATION:
            return (
                "The conversation changed since this review: its active path now has different messages "
                "(new, edited, or another branch chosen). The new path will be graded again."
            )
        return "The pipeline resubmitted the draft since this review; the new content will be graded again."
    if not review.is_current:
        return "A newer review of this item replaced this one."
    return "This review no longer counts."


# --- the queue ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QueueFilters:
    kind: str = ""
    application: str = ""
    reason: str = ""
    criteria_version: int | None = None

    def as_query(self, **extra: Any) -> dict[str, Any]:
        params = {
            "kind": self.kind,
            "application": self.application,
            "reason": self.reason,
            "criteria": self.criteria_version or "",
        }
        return {key: value for key, value in (params | extra).items() if value not in ("", None)}

    @property
    def active(self) -> bool:
        return bool(self.kind or self.application or self.reason or self.criteria_version)


NO_FILTERS = QueueFilters()


def queue_reviews(*, org_ids: Sequence[int], filters: QueueFilters = NO_FILTERS) -> QuerySet[Review]:
    """The queue, by definition: every review routed to humans that still counts (grading's rule, through
    `reviews_still_counting`) and has no decision, in the given orgs.

    The reads below compute the same set as SQL that walks the queue indexes in order (`_branch`); a test holds
    the two equal. This form is the reference, and what the decision and claim services re-check against.
    """
    kind = filters.kind or (ItemKind.CONVERSATION if filters.application else None)
    reviews = (
        reviews_still_counting(kind)
        .filter(is_current=True, route=Route.HUMAN, org_id__in=list(org_ids))
        .filter(~Exists(Decision.objects.filter(review_id=OuterRef("pk"))))
        .annotate(priority=PRIORITY)
    )
    if filters.application:
        reviews = reviews.filter(conversation__application=filters.application)
    if filters.reason:
        reviews = reviews.filter(reason=filters.reason)
    if filters.criteria_version:
        reviews = reviews.filter(criteria_version_id=filters.criteria_version)
    return reviews


PRIORITIES = {ItemKind.DRAFT: 0, ItemKind.CONVERSATION: 1}
Key = tuple[int, datetime, int]  # (priority, finished_at, review id): the queue order
Bound = tuple[datetime, int]  # (finished_at, review id) within one priority

_REVIEW = Review._meta.db_table
_CRITERIA = CriteriaVersion._meta.db_table
_DECISION = Decision._meta.db_table
_CLAIM = Claim._meta.db_table
_ITEMS = {0: (Draft._meta.db_table, "draft_id"), 1: (Conversation._meta.db_table, "conversation_id")}
# Exactly the expression of the queue indexes (reviewer migration 0003) and of PRIORITY, so the planner uses them.
_PRIORITY_SQL = "(CASE WHEN r.kind = 'draft' THEN 0 ELSE 1 END)"


def queue_heads(org_ids: Sequence[int]) -> dict[tuple[int, int], Bound]:
    """The decided-prefix marks (reviewer.models.QueueHead) of the orgs, by (org, priority)."""
    rows = QueueHead.objects.filter(org_id__in=list(org_ids)).values_list(
        "org_id", "priority", "finished_at", "review_id"
    )
    return {(org_id, priority): (finished_at, review_id) for org_id, priority, finished_at, review_id in rows}


@dataclass(frozen=True)
class Branch:
    """The queue of one org and priority as `FROM ... WHERE ...` SQL over `r` (the review) and its parameters."""

    org_id: int
    priority: int
    sql: str
    params: list[Any]

    def where(self, condition: str, *params: Any) -> Branch:
        return Branch(self.org_id, self.priority, f"{self.sql} AND {condition}", [*self.params, *params])


def _branch(org_id: int, priority: int, filters: QueueFilters, head: Bound | None) -> Branch:
    """One org and priority of `queue_reviews`, in a form the planner serves from the queue indexes.

    - The item's fingerprint is read by primary key: a join would let the planner guess that almost no
      fingerprint matches (it cannot know) and sort every candidate rather than walk the index and stop.
    - A review is always graded under its own org's criteria of its own kind, so "its version is the active
      one" is membership of the org's active versions.
    - It starts after the decided prefix (QueueHead), so decided items that are still current are never read.
    """
    item_table, item_column = _ITEMS[priority]
    application = " AND i.application = %s" if filters.application else ""
    # Table names are ours; every value is a parameter.
    sql = (
        f"FROM {_REVIEW} r WHERE r.org_id = %s AND {_PRIORITY_SQL} = %s AND r.is_current AND r.route = 'human'"  # noqa: S608
        f" AND r.criteria_version_id IN (SELECT cv.id FROM {_CRITERIA} cv WHERE cv.org_id = %s AND cv.is_active)"
        f" AND r.fingerprint = (SELECT i.fingerprint FROM {item_table} i WHERE i.id = r.{item_column}{application})"
        f" AND NOT EXISTS (SELECT 1 FROM {_DECISION} d WHERE d.review_id = r.id)"
    )
    branch = Branch(org_id, priority, sql, [org_id, priority, org_id, *([filters.application] if application else [])])
    if filters.reason:
        branch = branch.where("r.reason = %s", filters.reason)
    if filters.criteria_version:
        branch = branch.where("r.criteria_version_id = %s", filters.criteria_version)
    if head is not None:
        branch = branch.where("(r.finished_at, r.id) > (%s, %s)", *head)
    return branch


def queue_branches(
    *,
    org_ids: Sequence[int],
    filters: QueueFilters,
    heads: dict[tuple[int, int], Bound],
    after: Key | None = None,
    before: Key | None = None,
) -> list[Branch]:
    """The queue as one index range per priority and org, priority first.

    Within a branch, (finished_at, id) order is index order, so a branch with a LIMIT reads about as many
    index entries as it returns. A cursor narrows the branch of its own priority and drops the branches on the
    wrong side of it. Callers merge branches in (priority, finished_at, id) order.
    """
    kind = filters.kind or (ItemKind.CONVERSATION if filters.application else None)
    priorities = [PRIORITIES[kind]] if kind in PRIORITIES else sorted(PRIORITIES.values())
    branches = []
    for priority in priorities:
        if (after and after[0] > priority) or (before and before[0] < priority):
            continue
        for org_id in org_ids:
            branch = _branch(org_id, priority, filters, heads.get((org_id, priority)))
            if after and after[0] == priority:
                branch = branch.where("(r.finished_at, r.id) > (%s, %s)", after[1], after[2])
            if before and before[0] == priority:
                branch = branch.where("(r.finished_at, r.id) < (%s, %s)", before[1], before[2])
            branches.append(branch)
    return branches


@contextmanager
def ordered_scans() -> Iterator[None]:
    """Read the queue in index order. Every queue read has an index that gives its order, but the planner cannot
    estimate the per-row checks and would rather sort all it might need; with sorting priced out it walks the
    index and stops at the LIMIT. Scoped to this transaction (SET LOCAL)."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_sort = off")
        yield


def _union(parts: list[tuple[str, list[Any]]]) -> tuple[str, list[Any]]:
    return " UNION ALL ".join(f"({sql})" for sql, _ in parts), [p for _, params in parts for p in params]


@dataclass(frozen=True)
class QueueRow:
    review_id: int
    url: str
    kind: str
    reason: str
    title: str
    context: str
    reason_label: str
    summary: str
    checks: list[tuple[str, str, str]]  # conversations: (letter, verdict, mark)
    criteria_label: str
    waiting: str
    finished_at: datetime
    claim: Claim | None = None
    mine: bool = False
    held_by: str = ""


def queue_rows(
    *, org_ids: Sequence[int], filters: QueueFilters, heads: dict, after: Key | None, before: Key | None, limit: int
) -> list[QueueRow]:
    """One page of rows in queue order (reversed when paging backwards): each branch's first `limit` ids,
    merged, then the columns a row shows. One query."""
    direction = "DESC" if before is not None else "ASC"
    branches = queue_branches(org_ids=org_ids, filters=filters, heads=heads, after=after, before=before)
    if not branches:
        return []
    union, params = _union(
        [
            (
                f"SELECT r.id, {b.priority} AS priority, r.finished_at {b.sql} "
                f"ORDER BY r.finished_at {direction}, r.id {direction} LIMIT %s",
                [*b.params, limit],
            )
            for b in branches
        ]  # fmt: skip
    )
    sql = f"""
        SELECT r.id, r.kind, r.reason, r.score, r.judge_passed, r.sub_scores, r.checks, r.finished_at, cv.number,
               d.slug, d.title, c.external_id, c.application
        FROM (SELECT * FROM ({union}) AS u ORDER BY priority {direction}, finished_at {direction}, id {direction}
              LIMIT %s) AS page
        JOIN {_REVIEW} r ON r.id = page.id
        JOIN {_CRITERIA} cv ON cv.id = r.criteria_version_id
        LEFT JOIN {_ITEMS[0][0]} d ON d.id = r.draft_id
        LEFT JOIN {_ITEMS[1][0]} c ON c.id = r.conversation_id
        ORDER BY page.priority {direction}, page.finished_at {direction}, page.id {direction}
    """  # noqa: S608 - table names are ours; every value is a parameter
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, limit])
        return [_queue_row(*row) for row in cursor.fetchall()]


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str | bytes) else value


_ITEM_URL = "/queue/items/{}/"  # reviewer.urls `review_detail`: formatted here, a reverse() per row is slow


def _queue_row(review_id, kind, reason, score, judge_passed, sub_scores, checks, finished_at, criteria_number,
               slug, title, external_id, application) -> QueueRow:  # fmt: skip
    row_checks: list[tuple[str, str, str]] = []
    if kind == ItemKind.DRAFT:
        sub = _json(sub_scores) or {}
        parts = [f"{score:.1f}" if score is not None else "no score"]
        if sub:
            parts.append("/".join(str(sub.get(name, "?")) for name in SUB_SCORE_LABELS))
        if reason == "judge_contradiction" and judge_passed is not None:
            parts.append(f"but the judge said {'pass' if judge_passed else 'fail'}")
        summary, item_title, context = " · ".join(parts), slug, title
    else:
        verdicts = _json(checks) or {}
        for name in CHECKS:
            verdict = (verdicts.get(name) or {}).get("verdict", "unknown")
            row_checks.append((name[0].upper(), verdict, {"unknown": "?", "fail": "✗"}.get(verdict, "")))
        summary, item_title, context = "", external_id, application
    return QueueRow(
        review_id=review_id,
        url=_ITEM_URL.format(review_id),
        kind=kind,
        reason=reason,
        title=item_title,
        context=context,
        reason_label=REASON_LABELS.get(reason, reason or "human"),
        summary=summary,
        checks=row_checks,
        criteria_label=f"{'draft' if kind == ItemKind.DRAFT else 'conv'} v{criteria_number}",
        waiting="",
        finished_at=finished_at,
    )


COUNT_CAP = 100  # counts above this read "100+": exact where it matters, a bounded read where it does not


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

    @property
    def total_label(self) -> str:
        if self.capped:
            return f"{sum(min(n, COUNT_CAP) for n in self.counts.values()):,}+"
        return f"{self.total:,}"


def queue_stats(*, org_ids: Sequence[int], filters: QueueFilters, heads: dict) -> QueueStats:
    """Counts per reason (whatever the reason filter) and the oldest waiting item, in one query.

    1. Each count reads at most COUNT_CAP + 1 rows of each branch (a LIMIT inside the count), served by the
       (org, reason, priority, ...) index from the decided-prefix mark on: a queue of 100,000 costs what a
       queue of a hundred does.
    2. The oldest item is the first row of each branch.
    """
    branches = queue_branches(org_ids=org_ids, filters=replace(filters, reason=""), heads=heads)
    if not branches:
        return QueueStats(counts=dict.fromkeys([*REASON_LABELS, ""], 0), oldest=None)
    # One correlated count per branch, run once per reason (planned once, not once per reason).
    per_reason = _union(
        [(f"SELECT 1 {b.sql} AND r.reason = reasons.reason LIMIT %s", [*b.params, COUNT_CAP + 1]) for b in branches]
    )
    everything = _union([(f"SELECT 1 {b.sql} LIMIT %s", [*b.params, COUNT_CAP + 1]) for b in branches])
    oldest = _union(
        [(f"SELECT r.finished_at {b.sql} ORDER BY r.finished_at, r.id LIMIT 1", b.params) for b in branches]
    )
    sql = f"""
        SELECT reasons.reason, (SELECT count(*) FROM ({per_reason[0]}) AS counted)
        FROM unnest(%s::text[]) AS reasons(reason)
        UNION ALL SELECT NULL, (SELECT count(*) FROM ({everything[0]}) AS counted)
        UNION ALL SELECT NULL, (SELECT extract(epoch FROM min(finished_at)) FROM ({oldest[0]}) AS oldest)::bigint
    """  # noqa: S608 - built from our own fragments; every value is a parameter
    with connection.cursor() as cursor:
        cursor.execute(sql, [*per_reason[1], list(REASON_LABELS), *everything[1], *oldest[1]])
        rows = cursor.fetchall()
    counts = {reason: count for reason, count in rows[:-2]}
    # Reasons grading may add later are counted as "other", exactly whenever the whole queue is under the cap.
    everything_count, oldest_epoch = rows[-2][1], rows[-1][1]
    counts[""] = max(0, everything_count - sum(counts.values())) if everything_count <= COUNT_CAP else 0
    oldest_at = datetime.fromtimestamp(oldest_epoch, tz=UTC) if oldest_epoch is not None else None
    return QueueStats(counts=counts, oldest=oldest_at)


def queue_first_free(
    *, org_ids: Sequence[int], filters: QueueFilters, heads: dict, now: datetime, passed_over: Sequence[int]
) -> tuple[int, int, str] | None:
    """(review id, org id, kind) of the first item nobody holds, in queue order, its row locked FOR UPDATE;
    rows other claimers have locked are skipped (SKIP LOCKED). Run inside the claim's transaction.

    Priority by priority; across orgs, the oldest of each org's first free item (the other rows stay locked
    only until the transaction ends)."""
    by_priority: dict[int, list[tuple]] = {}
    for branch in queue_branches(org_ids=org_ids, filters=filters, heads=heads):
        if by_priority and branch.priority > min(by_priority):
            break
        held = f"SELECT 1 FROM {_CLAIM} c WHERE c.review_id = r.id AND c.ended_at IS NULL AND c.expires_at > %s"  # noqa: S608
        free = branch.where(f"NOT EXISTS ({held})", now)
        if passed_over:
            free = free.where("r.id <> ALL(%s)", list(passed_over))
        sql = f"SELECT r.finished_at, r.id, r.org_id, r.kind {free.sql} ORDER BY r.finished_at, r.id LIMIT 1"
        with connection.cursor() as cursor:
            cursor.execute(f"{sql} FOR UPDATE OF r SKIP LOCKED", free.params)
            row = cursor.fetchone()
        if row is not None:
            by_priority.setdefault(branch.priority, []).append(row)
    if not by_priority:
        return None
    _, review_id, org_id, kind = min(by_priority[min(by_priority)])
    return review_id, org_id, kind


@dataclass(frozen=True)
class ReasonCount:
    reason: str
    label: str
    count: int

    @property
    def count_label(self) -> str:
        return count_label(self.count)


def count_label(count: int) -> str:
    return f"{COUNT_CAP:,}+" if count > COUNT_CAP else f"{count:,}"


@dataclass(frozen=True)
class QueuePage:
    rows: list[QueueRow]
    total: int
    total_label: str
    counts: list[ReasonCount]
    oldest: str
    held_by_others: int
    my_claims: list[Claim]
    next_cursor: int | None
    previous_cursor: int | None
    applications: list[str]
    criteria_versions: list[CriteriaVersion]
    refreshed_at: datetime


def _cursor_key(org_ids: Sequence[int], review_id: int | None) -> Key | None:
    if review_id is None:
        return None
    return (
        Review.objects.filter(pk=review_id, org_id__in=list(org_ids))
        .annotate(priority=PRIORITY)
        .values_list("priority", "finished_at", "pk")
        .first()
    )


def queue_page(
    *,
    user,
    org_ids: Sequence[int],
    filters: QueueFilters = NO_FILTERS,
    after: int | None = None,
    before: int | None = None,
    now: datetime | None = None,
    page_size: int = PAGE_SIZE,
) -> QueuePage:
    """One page of the queue, oldest first within priority, with counts per reason and who holds what.

    A cursor names a review (the last of the previous page, or the first of the next); one that is not in
    the operator's orgs is ignored. The number of queries does not depend on the number of items.
    """
    now = now or timezone.now()
    key_after, key_before = _cursor_key(org_ids, after), _cursor_key(org_ids, before)
    if key_before is not None:
        key_after = None
    heads = queue_heads(org_ids)
    with ordered_scans():
        rows = queue_rows(
            org_ids=org_ids, filters=filters, heads=heads, after=key_after, before=key_before, limit=page_size + 1
        )
        stats = queue_stats(org_ids=org_ids, filters=filters, heads=heads)
    more = len(rows) > page_size
    rows = rows[:page_size]
    if key_before is not None:
        rows.reverse()
    has_more_after, has_more_before = (True, more) if key_before is not None else (more, key_after is not None)

    claims = list(
        Claim.objects.filter(org_id__in=list(org_ids), ended_at__isnull=True, expires_at__gt=now)
        .select_related("holder")
        .order_by("expires_at")
    )
    claim_by_review = {claim.review_id: claim for claim in claims}
    rows = [_with_claim(row, claim_by_review.get(row.review_id), user, now) for row in rows]
    counts = [ReasonCount(reason, label, stats.counts[reason]) for reason, label in REASON_LABELS.items()]
    if stats.counts[""]:
        counts.append(ReasonCount("", "other", stats.counts[""]))
    return QueuePage(
        rows=rows,
        total=stats.total,
        total_label=stats.total_label,
        counts=counts,
        oldest=_age(now - stats.oldest) if stats.oldest else "",
        held_by_others=sum(1 for claim in claims if claim.holder_id != user.pk),
        my_claims=[claim for claim in claims if claim.holder_id == user.pk],
        next_cursor=rows[-1].review_id if rows and has_more_after else None,
        previous_cursor=rows[0].review_id if rows and has_more_before else None,
        applications=queue_applications(org_ids),
        criteria_versions=list(
            CriteriaVersion.objects.filter(org_id__in=list(org_ids), is_active=True)
            .select_related("org")
            .order_by("org__slug", "kind")
        ),
        refreshed_at=now,
    )


def _with_claim(row: QueueRow, claim: Claim | None, user, now: datetime) -> QueueRow:
    mine = claim is not None and claim.holder_id == user.pk
    held_by = ""
    if claim is not None:
        held_by = f"{'you' if mine else claim.holder.get_username()} (until {claim.expires_at:%H:%M})"
    return replace(row, claim=claim, mine=mine, held_by=held_by, waiting=_age(now - row.finished_at))


def _age(delta: timedelta) -> str:
    minutes = max(0, int(delta.total_seconds() // 60))
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes:02d} min"
    return f"{hours // 24} d {hours % 24} h"


def queue_applications(org_ids: Sequence[int]) -> list[str]:
    """The distinct applications of the orgs' conversations, by a loose index scan over (org, application):
    one index probe per application instead of reading every conversation."""
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
        SELECT DISTINCT application FROM apps ORDER BY application
    """  # noqa: S608 - the table name is ours; values are parameters
    with connection.cursor() as cursor:
        cursor.execute(sql, [list(org_ids), list(org_ids)])
        return [row[0] for row in cursor.fetchall()]


# --- claims ---------------------------------------------------------------------------------------------------


def open_claim(review_id: int) -> Claim | None:
    """The review's claim that has not ended (it may have expired: compare `expires_at` with now)."""
    return Claim.objects.filter(review_id=review_id, ended_at__isnull=True).select_related("holder").first()


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


def review_for_operator(*, org_ids: Sequence[int], review_id: int) -> Review | None:
    """A review routed to humans in one of the operator's orgs, with what the item page reads beside it."""
    return (
        Review.objects.filter(pk=review_id, org_id__in=list(org_ids), route=Route.HUMAN)
        .select_related("org", "criteria_version", "conversation", "draft")
        .first()
    )


def decision_of(review: Review) -> Decision | None:
    return Decision.objects.filter(review=review).select_related("decided_by").first()


def other_reviews(review: Review, limit: int = 20) -> list[Review]:
    """The item's other reviews, newest first: history that stopped counting, or the one that replaced this."""
    subject = {"conversation_id": review.conversation_id} if review.conversation_id else {"draft_id": review.draft_id}
    return list(
        Review.objects.filter(**subject)
        .exclude(pk=review.pk)
        .select_related("criteria_version")
        .only(
            "pk",
            "route",
            "reason",
            "fingerprint",
            "finished_at",
            "is_current",
            "score",
            "kind",
            "criteria_version__number",
            "criteria_version__kind",
        )  # fmt: skip
        .order_by("-finished_at", "-pk")[:limit]
    )

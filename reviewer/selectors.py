"""Reads for the review queue: which reviews wait for a person, which still count, and what an item page shows.

Every read takes the operator's org ids, so a view that forgets to filter by org has nothing to pass.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from typing import Any

import nh3
from django.db import connection, transaction
from django.db.models import Case, Exists, IntegerField, OuterRef, QuerySet, Value, When
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

from grading import evidence
from grading.judge.conversation import CHECKS
from grading.models import Conversation, CriteriaVersion, Draft, Feedback, ItemKind, Message, Review, Route
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


@dataclass(frozen=True)
class IdentityRow:
    label: str
    value: str


def judge_label(judge: dict) -> str:
    """`openai · gpt-4.1-mini · prompt 5be0c2 · t=0` from the judge identity on a review."""
    if not isinstance(judge, dict):
        return str(judge)
    parts = [str(judge[key]) for key in ("backend", "model") if judge.get(key)]
    if judge.get("prompt_hash"):
        parts.append(f"prompt {str(judge['prompt_hash'])[:8]}")
    if "temperature" in judge:
        parts.append(f"t={judge['temperature']:g}" if isinstance(judge["temperature"], int | float) else "")
    known = {"backend", "model", "prompt_hash", "temperature"}
    parts += [f"{key}={value}" for key, value in sorted(judge.items()) if key not in known]
    return " · ".join(part for part in parts if part)


def identity_rows(review: Review, *, messages_on_path: int | None = None) -> list[IdentityRow]:
    fingerprint = review.fingerprint
    if messages_on_path is not None:
        fingerprint += f" ({messages_on_path} messages on the path, nothing truncated)"
    rows = [IdentityRow("fingerprint", fingerprint), IdentityRow("judge", judge_label(review.judge))]
    if review.kind == ItemKind.DRAFT:
        rows.append(IdentityRow("memory", review.memory_snapshot or "none read"))
    rows.append(IdentityRow("judged at", f"{review.finished_at:%d %b %Y %H:%M:%S} UTC"))
    stages = review.stages
    if review.kind == ItemKind.CONVERSATION:
        rows.append(IdentityRow("stages", "1 (the whole path in one call)" if stages == 1 else f"{stages}"))
    usage = review.usage or {}
    if usage.get("prompt_tokens") is not None:
        rows.append(
            IdentityRow("tokens", f"{usage.get('prompt_tokens', 0):,} in · {usage.get('completion_tokens', 0):,} out")
        )
    return rows


# --- conversations: the path as the user saw it -------------------------------------------------------------


@dataclass
class ShownToolCall:
    id: str
    name: str
    arguments: str


@dataclass
class ShownMessage:
    id: str
    anchor: str
    role: str
    name: str | None
    text: str
    preformatted: bool
    tool_calls: list[ShownToolCall]
    tool_call_id: str | None
    created_at: datetime | None
    hidden: bool
    truncated: bool
    cited_by: list[str] = field(default_factory=list)
    feedback: str | None = None


@dataclass
class Fold:
    """Messages that are not evidence: abandoned branches at one point of the path, or unconnected ones."""

    branches: int
    messages: list[ShownMessage]
    label: str


@dataclass
class PathEntry:
    message: ShownMessage | None = None
    fold: Fold | None = None


@dataclass(frozen=True)
class CheckView:
    name: str
    verdict: str
    rationale: str
    cited: list[ShownMessage]
    missing_ids: list[str]


@dataclass(frozen=True)
class ConversationEvidence:
    path: list[PathEntry]
    path_length: int
    abandoned: int
    branch_points: int
    checks: list[CheckView]
    feedback: list[tuple[ShownMessage | None, str, str]]  # (message, message id, up/down)
    not_scorable: str | None


def conversation_evidence(review: Review) -> ConversationEvidence:
    """The conversation's active path with abandoned branches folded where they leave it, and each check with
    the messages it cites. Two queries: the messages and the thumbs."""
    conversation = review.conversation
    rows = list(Message.objects.filter(conversation=conversation).order_by("created_at", "pk"))
    messages = [m.as_evidence() for m in rows]
    result = evidence.active_path(messages, conversation.active_message_id)
    path_ids = [m.id for m in result.path]
    anchors = {m.id: f"msg-{n}" for n, m in enumerate(messages, start=1)}
    shown = {m.id: _shown(m, anchors[m.id]) for m in messages}
    feedback = list(Feedback.objects.filter(conversation=conversation).order_by("created_at"))
    for thumb in feedback:
        if thumb.message_external_id in shown:
            shown[thumb.message_external_id].feedback = thumb.value

    checks = []
    for name in CHECKS:
        check = review.checks.get(name) or {}
        cited_ids = [str(i) for i in check.get("message_ids") or []]
        for message_id in cited_ids:
            if message_id in shown:
                shown[message_id].cited_by.append(name)
        checks.append(
            CheckView(
                name=name,
                verdict=check.get("verdict", "unknown"),
                rationale=str(check.get("rationale", "")),
                cited=[shown[i] for i in cited_ids if i in shown],
                missing_ids=[i for i in cited_ids if i not in shown],
            )
        )

    path, abandoned, branch_points = _path_with_folds(messages, path_ids, shown)
    return ConversationEvidence(
        path=path,
        path_length=len(path_ids),
        abandoned=abandoned,
        branch_points=branch_points,
        checks=checks,
        feedback=[(shown.get(t.message_external_id), t.message_external_id, t.value) for t in feedback],
        not_scorable=evidence.REASON_TEXT.get(result.problem) if result.problem else None,
    )


def _path_with_folds(
    messages: list[evidence.EvidenceMessage], path_ids: list[str], shown: dict[str, ShownMessage]
) -> tuple[list[PathEntry], int, int]:
    """1. Index children by parent id (a root's parent is None).
    2. Walk the path; after each message (and before the first, for other roots) fold every child that is
       not the next path message, with its whole subtree (iteratively, so cycles and depth are harmless).
    3. Whatever is left is not connected to the path at all (an unresolved parent, a loop): one last fold.
    """
    children: dict[str | None, list[str]] = {}
    for m in messages:
        children.setdefault(m.parent_id, []).append(m.id)
    on_path = set(path_ids)
    placed = set(path_ids)
    entries: list[PathEntry] = []
    abandoned = 0
    branch_points = 0

    def subtree(root: str) -> list[ShownMessage]:
        found, stack = [], [root]
        while stack:
            current = stack.pop()
            if current in placed:
                continue
            placed.add(current)
            found.append(shown[current])
            stack.extend(reversed(children.get(current, [])))
        return found

    for parent in [None, *path_ids]:
        if parent is not None:
            entries.append(PathEntry(message=shown[parent]))
        off_path = [child for child in children.get(parent, []) if child not in on_path]
        if not off_path or (parent is None and not path_ids):
            continue
        folded = [m for child in off_path for m in subtree(child)]
        if folded:
            branch_points += 1
            abandoned += len(folded)
            where = "before the path starts" if parent is None else f"after {parent}"
            entries.append(
                PathEntry(
                    fold=Fold(
                        branches=len(off_path),
                        messages=folded,
                        label=f"{len(off_path)} abandoned branch{'es' if len(off_path) > 1 else ''} {where} "
                        f"({len(folded)} message{'s' if len(folded) > 1 else ''}). Not evidence.",
                    )
                )
            )
    rest = [shown[m.id] for m in messages if m.id not in placed]
    if rest:
        abandoned += len(rest)
        entries.append(
            PathEntry(fold=Fold(branches=0, messages=rest, label=f"{len(rest)} messages not connected to the path."))
        )
    return entries, abandoned, branch_points


def _shown(m: evidence.EvidenceMessage, anchor: str) -> ShownMessage:
    text, preformatted = _display_content(m.content, is_tool=m.role == "tool")
    calls = []
    if isinstance(m.tool_calls, list):
        for call in m.tool_calls:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                calls.append(
                    ShownToolCall(
                        id=str(call.get("id") or ""),
                        name=str(function.get("name") or "?"),
                        arguments=_pretty_json(function.get("arguments")),
                    )
                )
            else:
                calls.append(ShownToolCall(id="", name="?", arguments=_pretty_json(call)))
    elif m.tool_calls is not None:
        calls.append(ShownToolCall(id="", name="?", arguments=_pretty_json(m.tool_calls)))
    return ShownMessage(
        id=m.id,
        anchor=anchor,
        role=m.role,
        name=m.name,
        text=text,
        preformatted=preformatted,
        tool_calls=calls,
        tool_call_id=m.tool_call_id,
        created_at=m.created_at,
        hidden=m.hidden,
        truncated=m.truncated,
    )


def _display_content(content: object, *, is_tool: bool) -> tuple[str, bool]:
    """The text to show and whether it is preformatted (tool output and JSON keep their layout)."""
    if content is None:
        return "", False
    if isinstance(content, str):
        if is_tool:
            return _pretty_json(content), True
        return content, False
    if isinstance(content, list):
        parts = []
        for part in content:
            if (
                isinstance(part, dict)
                and part.get("type") in evidence.TEXT_PART_TYPES
                and isinstance(part.get("text"), str)
            ):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
            else:
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                parts.append(f"[{kind}]")
        return "\n".join(parts), is_tool
    return _pretty_json(content), True


def _pretty_json(value: object) -> str:
    """JSON laid out for reading; a string that is not JSON is shown as it is."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value
        if not isinstance(value, dict | list):
            return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=False, default=str)


# --- drafts: the article with its findings in place ---------------------------------------------------------

_MARKDOWN = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table").disable("image")
_ALLOWED_TAGS = {
    "p", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "a", "em", "strong", "code", "pre", "blockquote",
    "hr", "br", "table", "thead", "tbody", "tr", "th", "td", "del", "s",
}  # fmt: skip
_VOID_TAGS = {"br", "hr"}
# Highlight boundaries travel through Markdown rendering and sanitizing as private-use characters:
# start of highlight i is U+F0000 + i, its end U+100000 + i (planes 15 and 16; the body's own are replaced).
_START, _END, _LIMIT = 0xF0000, 0x100000, 0xFFFD
_SENTINELS = re.compile("([\U000f0000-\U0010ffff])")
_COMPONENT = re.compile(r"</?[A-Z][A-Za-z0-9]*(?:\s[^<>]*)?/?>")


@dataclass(frozen=True)
class Highlight:
    start: int
    end: int
    css: str  # fatal | fixable | proof
    title: str


def render_markdown(body: str, highlights: Sequence[Highlight] = ()) -> SafeString:
    """The draft rendered as the reader would see it, sanitized, with `highlights` marked in place.

    1. Replace private-use characters of planes 15-16 in the body (one for one: offsets stay valid) and
       insert a start and an end sentinel for each highlight, at its character offsets.
    2. Render Markdown with raw HTML off (MDX components and any markup show as text) and images off.
    3. Sanitize with nh3 to a small allowlist: links keep only http(s)/mailto or relative hrefs.
    4. Re-serialize the sanitized tree, escaping every text and attribute again, turning sentinels into
       `<mark>` elements (closed and reopened at tag boundaries, so they always nest) and component tags
       into chips. Only fixed markup is ever added; no input reaches the output unescaped.
    """
    text = _SENTINELS.sub("\ufffd", body)
    events = []
    for index, highlight in enumerate(highlights[:_LIMIT]):
        start, end = max(0, highlight.start), min(len(text), highlight.end)
        if start < end:
            events.append((start, 1, chr(_START + index)))
            events.append((end, 0, chr(_END + index)))
    for position, _, sentinel in sorted(events, reverse=True):
        text = text[:position] + sentinel + text[position:]
    rendered = _MARKDOWN.render(text)
    cleaned = nh3.clean(
        rendered,
        tags=_ALLOWED_TAGS,
        attributes={"a": {"href"}},
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )
    serializer = _HighlightSerializer(list(highlights))
    serializer.feed(cleaned)
    serializer.close()
    return mark_safe("".join(serializer.out))  # noqa: S308 - every piece is escaped by the serializer


class _HighlightSerializer(HTMLParser):
    def __init__(self, highlights: list[Highlight]) -> None:
        super().__init__(convert_charrefs=True)
        self.highlights = highlights
        self.out: list[str] = []
        self.active: dict[int, None] = {}
        self.mark_open = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _ALLOWED_TAGS:
            return
        self._close_mark()
        kept = "".join(
            f' {name}="{html.escape(value or "", quote=True)}"'
            for name, value in attrs
            if (tag, name) in {("a", "href"), ("a", "rel")}
        )
        self.out.append(f"<{tag}{kept}>")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if tag not in _ALLOWED_TAGS or tag in _VOID_TAGS:
            return
        self._close_mark()
        self.out.append(f"</{tag}>")

    def handle_data(self, data: str) -> None:
        for piece in _SENTINELS.split(data):
            if not piece:
                continue
            if len(piece) == 1 and _SENTINELS.fullmatch(piece):
                code = ord(piece)
                self._close_mark()
                if _START <= code < _START + _LIMIT:
                    self.active[code - _START] = None
                elif _END <= code < _END + _LIMIT:
                    self.active.pop(code - _END, None)
                continue
            position = 0
            for match in _COMPONENT.finditer(piece):
                self._text(piece[position : match.start()])
                self._close_mark()
                self.out.append('<span class="comp">')
                self._text(match.group())
                self._close_mark()
                self.out.append("</span>")
                position = match.end()
            self._text(piece[position:])

    def _text(self, text: str) -> None:
        if not text:
            return
        if self.active and not self.mark_open and text.strip():
            marks = [self.highlights[i] for i in self.active if i < len(self.highlights)]
            css = min((m.css for m in marks), key=["fatal", "fixable", "proof"].index, default="fatal")
            title = "; ".join(dict.fromkeys(m.title for m in marks))
            self.out.append(f'<mark class="{css}" title="{html.escape(title, quote=True)}">')
            self.mark_open = True
        self.out.append(html.escape(text, quote=False))

    def _close_mark(self) -> None:
        if self.mark_open:
            self.out.append("</mark>")
            self.mark_open = False

    def close(self) -> None:
        super().close()
        self._close_mark()


def proof_highlights(body: str, terms: Iterable[str]) -> list[Highlight]:
    """Where the org's proof terms (customer names, figures) appear in the body: shown in green."""
    found = []
    for term in dict.fromkeys(t for t in terms if t.strip()):
        pattern = re.compile(rf"(?<!\w){re.escape(term)}(?!\w)", re.IGNORECASE)
        found += [Highlight(m.start(), m.end(), "proof", f"proof point: {term}") for m in pattern.finditer(body)]
    return found


def finding_highlights(findings: Iterable[dict]) -> list[Highlight]:
    found = []
    for finding in findings:
        if not isinstance(finding, dict):
            continue
        css = "fixable" if finding.get("severity") == "fixable" else "fatal"
        for span in finding.get("spans") or []:
            if isinstance(span, list | tuple) and len(span) == 2 and all(isinstance(x, int) for x in span):
                found.append(Highlight(span[0], span[1], css, str(finding.get("message") or finding.get("code", ""))))
    return found


@dataclass(frozen=True)
class DiffLine:
    css: str
    text: str


def diff_lines(diff: str) -> list[DiffLine]:
    lines = []
    for line in diff.splitlines():
        if line.startswith(("+++", "---")):
            css = "meta"
        elif line.startswith("+"):
            css = "add"
        elif line.startswith("-"):
            css = "del"
        elif line.startswith("@@"):
            css = "meta"
        else:
            css = ""
        lines.append(DiffLine(css, line))
    return lines


@dataclass(frozen=True)
class Scale:
    """Where the score sits on the 1-10 scale, in percent of the width, for a small SVG."""

    band_start: float
    threshold: float
    score: float | None
    spread_from: float | None
    spread_to: float | None
    band_start_value: float
    threshold_value: float

    @property
    def band_width(self) -> float:
        return round(self.threshold - self.band_start, 2)

    @property
    def pass_width(self) -> float:
        return round(100.0 - self.threshold, 2)

    @property
    def spread_width(self) -> float:
        return round((self.spread_to or 0.0) - (self.spread_from or 0.0), 2)


def _percent(value: float) -> float:
    return round(max(0.0, min(100.0, (value - 1.0) / 9.0 * 100.0)), 2)


def draft_scale(review: Review) -> Scale:
    threshold, band = review.criteria_version.threshold, review.criteria_version.band
    spread_from = spread_to = None
    center = review.judge_score if review.judge_score is not None else review.score
    if review.spread is not None and center is not None:
        spread_from, spread_to = _percent(center - review.spread), _percent(center + review.spread)
    return Scale(
        band_start=_percent(threshold - band),
        threshold=_percent(threshold),
        score=_percent(review.score) if review.score is not None else None,
        spread_from=spread_from,
        spread_to=spread_to,
        band_start_value=threshold - band,
        threshold_value=threshold,
    )


def why_human(review: Review) -> str:
    """Why the machine handed this item to a person, in one or two sentences."""
    threshold, band = review.criteria_version.threshold, review.criteria_version.band
    score = f"{review.score:.1f}" if review.score is not None else "no score"
    if review.reason == "band":
        return (
            f"Score {score} against threshold {threshold:.1f}: inside the marginal band {threshold - band:.1f}–"
            f"{threshold:.1f}. No remaining hard finding."
        )
    if review.reason == "judge_contradiction":
        said = "pass" if review.judge_passed else "fail"
        return f"The judge said {said}, but its own score of {score} against threshold {threshold:.1f} says otherwise."
    if review.reason == "spread" and review.spread is not None:
        center = review.judge_score if review.judge_score is not None else review.score or 0
        return (
            f"The judge is unsure: its score {center:.1f} spreads from {center - review.spread:.1f} to "
            f"{center + review.spread:.1f}, across the threshold {threshold:.1f}."
        )
    if review.reason == "unknown_check":
        return (
            "At least one check came back unknown: the recorded evidence leaves it open. "
            "Unknowns never count in the quality number."
        )
    return review.detail or "The machine could not decide on its own."


@dataclass(frozen=True)
class SubScore:
    label: str
    value: int | float | None
    percent: float


def sub_scores(review: Review) -> list[SubScore]:
    scores = review.sub_scores or {}
    rows = []
    for key, label in SUB_SCORE_LABELS.items():
        value = scores.get(key)
        percent = round(max(0.0, min(1.0, value / 5.0)) * 100.0, 1) if isinstance(value, int | float) else 0.0
        rows.append(SubScore(label, value, percent))
    return rows


def draft_body_for_review(review: Review) -> str:
    """The body the review's findings point into: the repaired one when repairs ran, else the draft's."""
    repairs = review.repairs or {}
    body = repairs.get("body") if isinstance(repairs, dict) else None
    return body if isinstance(body, str) else review.draft.body

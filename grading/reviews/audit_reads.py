"""Reading the audit trail: an org's events filtered and keyset-paged (the audit page, the API) or all of them as
CSV, and one item's trail, its events merged with its reviews' history.

Paging is by keyset on (at, id), newest first, never OFFSET: the `audit_org_recent` index hands out each page as
one range however deep it is, and an event written while someone pages cannot shift the next page (no row skipped
or repeated, equal timestamps included: the id breaks the tie).

A machine's grading is no audit event: the planner grades items again whenever their evidence or criteria change,
at a rate where an event each would double the writes of grading. An item's trail reads its reviews instead, and
says why each grading happened from the one before it (`why_graded`).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta

from django.db.models import Q, QuerySet
from django.utils.dateparse import parse_date, parse_datetime

from grading.core.errors import FieldInvalid
from grading.core.schemas import identifier_checked, storable_time
from grading.core.spreadsheets import csv_lines
from grading.models import AuditEvent, Conversation, Draft, ItemKind, Review, ReviewState, Route
from grading.reviews.blind import SEEN, blind_items, item_blind

PAGE_SIZE = 50
PAGE_SIZE_MAX = 500
TRAIL_LENGTH = 50  # entries an item's page shows; the audit page, filtered by the item, has the rest
CHUNK = 2000  # rows per fetch from the server-side cursor of the CSV
_TEXT_LIMITS = {"actor": 150, "action": 64, "object_type": 64, "object_id": 64, "conversation": 200}
_CURSOR = re.compile(r"(\d{1,19})\.(\d{1,19})")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class InvalidAuditFilter(FieldInvalid):
    """A filter or cursor that cannot be read; `field` names it. Nothing was read."""


@dataclass(frozen=True)
class AuditFilters:
    """Which of an org's events to read. Every field narrows; the defaults read them all."""

    actor: str = ""  # a person's username
    api_key: int | None = None  # an API key's id
    action: str = ""  # one action (`claim.decline`), or a family (`claim`: every `claim.*`)
    object_type: str = ""  # the object's model (`reviewer.claim`)
    object_id: str = ""
    item_kind: str = ""  # with item_id: the events of one conversation or draft
    item_id: int | None = None
    conversation: str = ""  # a conversation's external id, as pipelines know it: its events while it exists
    since: datetime | None = None  # at or after
    until: datetime | None = None  # before; a date means through the end of that day (UTC)


NO_FILTERS = AuditFilters()


def audit_filters_from(params: Mapping[str, str]) -> AuditFilters:
    """The filters from a query string (the page's form, the API's parameters); a value that cannot be read is an
    InvalidAuditFilter naming it."""
    text = {name: _text(params, name, limit) for name, limit in _TEXT_LIMITS.items()}
    filters = AuditFilters(
        **text,
        api_key=_whole_number(params, "api_key"),
        item_kind=_item_kind(params),
        item_id=_whole_number(params, "item_id"),
        since=_moment(params, "since", end_of_day=False),
        until=_moment(params, "until", end_of_day=True),
    )
    if (filters.item_id is None) != (not filters.item_kind):
        field = "item_kind" if filters.item_id is not None else "item_id"
        raise InvalidAuditFilter(field, "give item_kind and item_id together")
    if filters.since and filters.until and filters.since >= filters.until:
        raise InvalidAuditFilter("until", "must be after since")
    return filters


def _text(params: Mapping[str, str], name: str, limit: int) -> str:
    value = (params.get(name) or "").strip()
    if len(value) > limit:
        raise InvalidAuditFilter(name, f"at most {limit} characters")
    try:
        return identifier_checked(value)
    except ValueError as refused:
        raise InvalidAuditFilter(name, str(refused)) from None


def _whole_number(params: Mapping[str, str], name: str) -> int | None:
    value = (params.get(name) or "").strip()
    if not value:
        return None
    if not value.isascii() or not value.isdigit() or int(value) >= 2**63:
        raise InvalidAuditFilter(name, "must be an id (a whole number)")
    return int(value)


def _item_kind(params: Mapping[str, str]) -> str:
    value = (params.get("item_kind") or "").strip()
    if value and value not in ItemKind.values:
        raise InvalidAuditFilter("item_kind", f"must be one of {', '.join(ItemKind.values)}")
    return value


def _moment(params: Mapping[str, str], name: str, *, end_of_day: bool) -> datetime | None:
    """An ISO-8601 date or time (UTC when it names no zone), within the years 1 to 9999 in UTC; a date that ends
    a range means the first instant after it, which must be within them too (9999-12-31 has none)."""
    value = (params.get(name) or "").strip()
    if not value:
        return None
    try:  # a date first: parse_datetime reads one as its midnight
        day = parse_date(value)
        moment = None if day else parse_datetime(value)
    except ValueError:  # well formed, but no such date or time (2026-02-30)
        moment = day = None
    if day is None and moment is None:
        raise InvalidAuditFilter(name, "must be an ISO-8601 date or time, such as 2026-12-04 or 2026-12-04T16:20Z")
    try:
        if day is not None:
            moment = datetime.combine(day + timedelta(days=1) if end_of_day else day, time(), tzinfo=UTC)
        return storable_time(moment)
    except (OverflowError, ValueError):
        last = "9999-12-30" if end_of_day else "9999-12-31"
        raise InvalidAuditFilter(name, f"must be within the years 1 to 9999 in UTC (its last day is {last})") from None


def audit_events(org_id: int, filters: AuditFilters = NO_FILTERS) -> QuerySet[AuditEvent]:
    """The org's events that `filters` keep, newest first."""
    events = AuditEvent.objects.filter(org_id=org_id)
    if filters.actor:
        events = events.filter(actor__username=filters.actor)
    if filters.api_key is not None:
        events = events.filter(api_key_id=filters.api_key)
    if filters.action:
        events = events.filter(Q(action=filters.action) | Q(action__startswith=filters.action + "."))
    if filters.object_type:
        events = events.filter(object_type=filters.object_type)
    if filters.object_id:
        events = events.filter(object_id=filters.object_id)
    if filters.item_kind:
        events = events.filter(item_kind=filters.item_kind, item_id=filters.item_id)
    if filters.conversation:
        named = Conversation.objects.filter(org_id=org_id, external_id=filters.conversation).values("pk")
        events = events.filter(item_kind=ItemKind.CONVERSATION, item_id__in=named)
    if filters.since:
        events = events.filter(at__gte=filters.since)
    if filters.until:
        events = events.filter(at__lt=filters.until)
    return events.order_by("-at", "-pk")


# --- pages ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AuditPage:
    events: list[AuditEvent]  # newest first, each with its actor and key
    older: str | None  # the cursor of the next page, None on the last


def cursor_of(event: AuditEvent) -> str:
    """Where a page ends: the last event's time (microseconds since the epoch, exact) and id."""
    delta = event.at - _EPOCH
    return f"{(delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds}.{event.pk}"


def cursor_read(text: str) -> tuple[datetime, int]:
    match = _CURSOR.fullmatch(text.strip())
    if match is None:
        raise InvalidAuditFilter("before", "is not a cursor a page of events gave")
    micros, event_id = int(match[1]), int(match[2])
    try:
        return _EPOCH + timedelta(microseconds=micros), event_id
    except OverflowError:
        raise InvalidAuditFilter("before", "is not a cursor a page of events gave") from None


def audit_page(
    org_id: int, filters: AuditFilters, *, reader_id: int | None, before: str = "", size: int = PAGE_SIZE
) -> AuditPage:
    """One page of the org's events that `filters` keep, newest first, older than the cursor `before`, each
    event's detail as `reader_id` may see it (`blinded`)."""
    events = audit_events(org_id, filters).select_related("actor", "api_key")
    if before:
        at, event_id = cursor_read(before)
        # `at <= cursor` lets the index range start at the cursor; the OR then drops the rows before it at that time.
        events = events.filter(at__lte=at).filter(Q(at__lt=at) | Q(pk__lt=event_id))
    rows = list(events[: size + 1])
    return AuditPage(blinded(rows[:size], reader_id=reader_id), cursor_of(rows[size - 1]) if len(rows) > size else None)


def blinded(events: list[AuditEvent], *, reader_id: int | None) -> list[AuditEvent]:
    """The events, each with its detail (in memory, never saved) as `reader_id` may see it: blind review
    (grading/reviews/blind.py) takes out what people answered or decided on an item still blind to them. None
    reads as no person (an API key): nobody's answer is theirs."""
    blinds = {
        kind: blind_items(kind, {event.item_id for event in events if event.item_kind == kind})
        for kind in ItemKind.values
    }
    for event in events:
        blind = blinds[event.item_kind].get(event.item_id, SEEN) if event.item_kind else SEEN
        event.detail = blind.detail_shown(event.action, _detail(event), actor_id=event.actor_id, reader_id=reader_id)
    return events


def _detail(event: AuditEvent) -> dict:
    return event.detail if isinstance(event.detail, dict) else {"detail": event.detail}


# --- CSV --------------------------------------------------------------------------------------------------------

CSV_COLUMNS = (
    "id", "at", "action", "actor", "api_key", "api_key_prefix", "object_type", "object_id", "item_kind", "item_id",
    "detail",
)  # fmt: skip
_CSV_VALUES = (
    "pk", "at", "action", "actor__username", "api_key__name", "api_key__prefix", "object_type", "object_id",
    "item_kind", "item_id", "detail", "actor_id",
)  # fmt: skip


def audit_csv(org_id: int, filters: AuditFilters, *, reader_id: int | None) -> Iterator[str]:
    """Every event `filters` keep, newest first, as CSV lines (safe to open in a spreadsheet), each detail as
    `reader_id` may see it (`blinded`): read `CHUNK` rows at a time from a server-side cursor, so a long trail costs
    the memory of one chunk."""
    rows = audit_events(org_id, filters).values_list(*_CSV_VALUES).iterator(chunk_size=CHUNK)
    return csv_lines(itertools.chain([CSV_COLUMNS], _csv_rows(rows, reader_id=reader_id)))


def _csv_rows(rows: Iterator[tuple], *, reader_id: int | None) -> Iterator[tuple]:
    while chunk := list(itertools.islice(rows, CHUNK)):
        blinds = {kind: blind_items(kind, {row[9] for row in chunk if row[8] == kind}) for kind in ItemKind.values}
        for *head, detail, actor_id in chunk:
            blind = blinds[head[8]].get(head[9], SEEN) if head[8] else SEEN
            detail = detail if isinstance(detail, dict) else {"detail": detail}
            shown = blind.detail_shown(head[2], detail, actor_id=actor_id, reader_id=reader_id)
            head[1] = head[1].isoformat()
            yield (*head, json.dumps(shown, sort_keys=True, ensure_ascii=False))


# --- an item's trail --------------------------------------------------------------------------------------------

GRADED = "review.graded"  # a trail entry that is a grading from the reviews' history, not an audit event


class Why:
    """Why an item was graded, read from the review before: the codes of `why_graded`."""

    FIRST = "first"
    EVIDENCE = "evidence"  # the evidence changed (new messages, an edited draft)
    CRITERIA = "criteria"  # another criteria version (a publication)
    RETRY = "retry"  # the grading before failed (a judge error)
    JUDGE = "judge"  # the same evidence and criteria, another judge
    MEMORY = "memory"  # a draft's org memory changed
    AGAIN = "again"  # nothing of the identity changed: graded again as asked (a lost task redone, a pass run)


def why_graded(review: Review, before: Review | None) -> str:
    if before is None:
        return Why.FIRST
    if review.fingerprint != before.fingerprint:
        return Why.EVIDENCE
    if review.criteria_version_id != before.criteria_version_id:
        return Why.CRITERIA
    if before.route == Route.ERROR:
        return Why.RETRY
    if review.judge_key != before.judge_key:
        return Why.JUDGE
    if review.memory_snapshot != before.memory_snapshot:
        return Why.MEMORY
    return Why.AGAIN


@dataclass(frozen=True)
class TrailEntry:
    at: datetime
    action: str  # an audit event's action, or GRADED
    actor: str  # the person's username; "" for none (a key, the machine)
    api_key: str  # the key's name; "" for none
    detail: dict  # as the reader may see it
    review: Review | None = None  # GRADED: the review
    why: str = ""  # GRADED: a `Why` code
    verdicts_hidden: bool = False  # GRADED: the machine's verdicts are not the reader's to see (blind review)


def item_trail(item: Conversation | Draft, *, reader_id: int | None, limit: int = TRAIL_LENGTH) -> list[TrailEntry]:
    """The item's last `limit` events and gradings, newest first, as `reader_id` may see them (blind review:
    grading/reviews/blind.py), in four queries.

    1. Its audit events, newest `limit` (the `audit_item_trail` index).
    2. Its reviews (trial reviews are no grading of the item), newest `limit` and the one before the oldest, so
       each can say why it happened.
    3. Merge by time and keep the newest `limit`.
    """
    kind = ItemKind.DRAFT if isinstance(item, Draft) else ItemKind.CONVERSATION
    blind = item_blind(kind, item.pk)
    events = (
        AuditEvent.objects.filter(org_id=item.org_id, item_kind=kind, item_id=item.pk)
        .select_related("actor", "api_key")
        .order_by("-at", "-pk")[:limit]
    )
    reviews = list(
        Review.objects.filter(**{kind: item})
        .exclude(state=ReviewState.TRIAL)
        .select_related("criteria_version")
        .order_by("-finished_at", "-pk")[: limit + 1]
    )
    entries = [
        TrailEntry(
            at=event.at,
            action=event.action,
            actor=event.actor.get_username() if event.actor else "",
            api_key=event.api_key.name if event.api_key else "",
            detail=blind.detail_shown(event.action, _detail(event), actor_id=event.actor_id, reader_id=reader_id),
        )
        for event in events
    ]
    entries += [
        TrailEntry(at=review.finished_at, action=GRADED, actor="", api_key="", detail={}, review=review,
                   why=why_graded(review, before), verdicts_hidden=blind.verdicts)
        for review, before in zip(reviews[:limit], [*reviews[1:], None], strict=False)
    ]  # fmt: skip
    entries.sort(key=lambda entry: entry.at, reverse=True)
    return entries[:limit]

"""Model calls whose span and messages arrive apart, joined whichever comes first.

The instrumentations' default sends a model call's messages as OTLP log records (grading/otlp/logs.py), exported
by a batch processor of their own: the span and its messages reach Tollgate in separate requests, in either
order, seconds or minutes apart. Whichever part comes first waits in a PendingCall row, keyed by org, trace id and
span id, its log records in PendingEvent rows appended as they come (nothing reads them back before the call is
whole); the request that brings the other part takes it from there, and the call is written by the receiver with
the request's other calls, ordered by span start as they are, so what is stored does not depend on which part
came first. A written call's row is kept without its content until it expires, so that an exporter's resend of
either part finds it written instead of waiting for the other part again.

While a call's span is here and its messages are not, its conversation is not scorable
(`Conversation.content_awaited_since`, evidence `content_awaited`): the record is known to be incomplete, and a
score of it would not name what the agent said. Every answer says how many calls wait longer than
OTLP_CONTENT_WAIT_MINUTES (the messages may never come: a producer exporting no logs).

What waits is bounded:
- A call is given up OTLP_PENDING_EXPIRY_HOURS after its first part came: every request gives up its org's, the
  daily retention pass everyone's (`pending_expire`). Its conversation is then graded on the messages that came.
- Per org, at most OTLP_PENDING_MAX_CALLS calls wait, their log records holding at most OTLP_PENDING_MAX_BYTES.
  The parts of a new call beyond either are rejected, and a waiting call whose new records would go beyond the
  bytes is refused. Parts that make a call whole are never refused for either: they empty the store.
- A call that can never be written is refused as soon as that is known: a message over MAX_MESSAGE_BYTES, more
  records than MAX_MESSAGES_PER_CONVERSATION, or, when log records make it whole, its conversation refused by a
  limit (in a logs request a conversation apart: the others are written). Its content goes at once; its row keeps
  the reason until it expires, so a later part of it is rejected naming the reason instead of making a call with
  a message missing.

Rejections go in the answer's `partial_success` (200), naming the setting, never 413: a full store is the state of
the org, not a fault of the request, and a 413 (which an exporter must not retry) drops the whole batch, the parts
that would complete waiting calls and empty the store included, so a full store could never drain; a 429 would be
retried whole, again and again while the store is full. Partial success keeps what fits and tells the exporter,
which does not retry it, how many were dropped and why (the Collector logs it as a warning).
"""

import hashlib
import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, OuterRef, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from grading.core.errors import LimitExceeded
from grading.delivery import enqueue
from grading.models import Conversation, Org
from grading.models.otlp import PendingCall, PendingEvent
from grading.otlp.genai import AwaitedCall, ContentError, ModelCall, ReadSpans, SpanOrigin, call_content
from grading.otlp.logs import LAST_EVENTS, ContentEvent, ReadLogs
from grading.otlp.receiver import (
    Groups,
    IngestResult,
    InvalidConversation,
    conversation_key,
    traces_check,
    traces_ingest,
)
from grading.reviews.sql import pending_calls_save

SPAN_FIELDS = (
    "span_seen_at",
    "conversation_external_id",
    "application",
    "started_at",
    "ended_at",
    "response_id",
    "end_user",
    "metadata",
)
EVENT_FIELDS = ("event_count", "stored_bytes", "replied")
REFUSED_FIELDS = ("refused", "end_user", "event_count", "stored_bytes", "replied")
# A request gives up at most this many of its org's expired calls, so its own time stays bounded; the daily pass
# takes the rest, EXPIRY_BATCH a transaction.
EXPIRED_PER_REQUEST = 1_000
EXPIRY_BATCH = 1_000

Key = tuple[str, str]  # (trace id, span id)


def content_wait() -> timedelta:
    return timedelta(minutes=settings.OTLP_CONTENT_WAIT_MINUTES)


def pending_expiry() -> timedelta:
    return timedelta(hours=settings.OTLP_PENDING_EXPIRY_HOURS)


@dataclass(frozen=True)
class _Joined:
    done: list[int]  # PendingCall rows whose calls the request writes
    rejected: list[str]
    conversations: set[str]  # external ids whose content_awaited_since may have changed
    waiting: int  # calls of this request still missing their other part
    groups: Groups  # the request's calls, joined ones included, checked and grouped for the receiver to write
    left: int = 0  # calls the request made whole and left for a worker to write


def spans_receive(*, org: Org, read: ReadSpans, now: datetime | None = None) -> IngestResult:
    """A trace export: calls whose spans carry their messages as before, calls awaiting theirs joined with
    messages already here or left waiting, tool results; the answer counts what waits."""
    now = now or timezone.now()
    key = conversation_key(read)
    joined = _arrived(org, now, read, spans=[(call, key(call.origin)) for call in read.awaiting])
    return _settled(org, now, joined, traces_ingest(org=org, groups=joined.groups, rejected=read.rejected))


def logs_receive(*, org: Org, read: ReadLogs, now: datetime | None = None) -> IngestResult:
    """A logs export: content events kept beside their calls' spans, and the calls now whole written."""
    now = now or timezone.now()
    joined = _arrived(org, now, ReadSpans(), events=read.events)
    return _settled(org, now, joined, traces_ingest(org=org, groups=joined.groups, rejected=read.rejected))


def pending_expire(*, now: datetime | None = None) -> int:
    """The daily pass: every org's calls whose first part came over OTLP_PENDING_EXPIRY_HOURS ago given up,
    EXPIRY_BATCH a transaction, their conversations' marks following. Returns how many went."""
    expired = PendingCall.objects.filter(received_at__lt=(now or timezone.now()) - pending_expiry())
    # Whole calls a worker was sent to write and did not (the broker was down), before any of them expires.
    whole = PendingCall.objects.filter(written_at=None, refused="", span_seen_at__isnull=False, replied=True)
    for org_id in whole.order_by("org_id").values_list("org_id", flat=True).distinct():
        whole_calls_write(org_id=org_id)
    gone = 0
    while True:
        with transaction.atomic():
            taken, awaited = _expired_delete(expired, EXPIRY_BATCH)
            for org_id, external_ids in awaited.items():
                _marks_refresh(org_id, external_ids)
        gone += taken
        if taken < EXPIRY_BATCH:
            return gone


def _expired_delete(expired: QuerySet[PendingCall], limit: int) -> tuple[int, dict[int, set[str]]]:
    """Delete up to `limit` of `expired`, but none a request holds (it is joining it: the next pass takes it).
    Returns how many went, and per org the conversations of the calls among them whose messages were awaited."""
    taken = list(
        expired.select_for_update(skip_locked=True)
        .order_by("pk")
        .values_list("pk", "org_id", "conversation_external_id", "span_seen_at", "written_at", "refused")[:limit]
    )
    if not taken:
        return 0, {}
    PendingCall.objects.filter(pk__in=[row[0] for row in taken]).delete()
    awaited: dict[int, set[str]] = defaultdict(set)
    for _, org_id, conversation, span_seen_at, written_at, refused in taken:
        if span_seen_at is not None and written_at is None and not refused:
            awaited[org_id].add(conversation)
    return len(taken), awaited


@dataclass
class _Store:
    """The org's waiting calls and the bytes their log records hold, against OTLP_PENDING_MAX_CALLS and
    OTLP_PENDING_MAX_BYTES, as this request adds to them. Read once a request, without a lock: requests of one org
    at once can each take the last room, so the caps hold to within what those requests bring."""

    calls: int
    bytes: int

    @classmethod
    def of(cls, org: Org) -> "_Store":
        totals = _waiting(org).aggregate(calls=Count("pk"), bytes=Coalesce(Sum("stored_bytes"), 0))
        return cls(totals["calls"], totals["bytes"])

    def admit(self, added: int) -> str | None:
        """Take room for a new waiting call whose records hold `added` bytes; or say why there is none."""
        most = settings.OTLP_PENDING_MAX_CALLS
        if self.calls >= most:
            return f"not kept: the org has OTLP_PENDING_MAX_CALLS ({most}) model calls waiting for their other part"
        if refusal := self.grow(added):
            return f"not kept: {refusal}"
        self.calls += 1
        return None

    def grow(self, added: int) -> str | None:
        """Take `added` bytes for a waiting call's new records; or say why they do not fit."""
        most = settings.OTLP_PENDING_MAX_BYTES
        if self.bytes + added > most:
            return (
                f"its log records would take what the org's waiting model calls hold over OTLP_PENDING_MAX_BYTES "
                f"({most} bytes)"
            )
        self.bytes += added
        return None

    def release(self, row: PendingCall, admitted_bytes: int) -> None:
        """A call counted as waiting is refused: its room is free again (a call admitted by this request took
        `admitted_bytes` more than its row says)."""
        self.calls -= 1
        self.bytes -= row.stored_bytes + admitted_bytes


def _arrived(
    org: Org,
    now: datetime,
    read: ReadSpans,
    *,
    spans: Sequence[tuple[AwaitedCall, str]] = (),  # with the external id of each one's conversation
    events: Sequence[ContentEvent] = (),
) -> _Joined:
    """In one transaction: keep the parts that arrived beside those already waiting, and take the calls now whole.

    1. Give up the org's expired calls (up to EXPIRED_PER_REQUEST).
    2. Admit the calls new to the store within its caps (the parts of one beyond them are rejected and nothing of
       it is kept), insert the rows missing (a concurrent request may insert the same one: the constraint keeps
       one), then lock every row of the request in key order: two requests bringing the two parts of a call at
       once meet in one row, one after the other, and the second finds the call whole.
    3. Add to each row the request's parts of it: a span's fields, or the log records not already kept, appended;
       or refuse the call (a message over MAX_MESSAGE_BYTES, more records than MAX_MESSAGES_PER_CONVERSATION, its
       new records over OTLP_PENDING_MAX_BYTES while it still waits).
    4. Take the calls now whole (span and reply here) and check them as the receiver will write them: in a spans
       request all at once, so that a refusal keeps nothing of the request (as for spans carrying their messages);
       in a logs request, a conversation apart, and the calls of a conversation refused by a limit are refused.
       The records that complete a call taken now are not kept: the receiver writes them into its conversation.
    """
    arrival = _Arrival(org, now, spans, events)
    if not arrival.parts:
        return _Joined([], [], set(), 0, traces_check(org=org, read=read))
    with transaction.atomic():
        expired = PendingCall.objects.filter(org=org, received_at__lt=now - pending_expiry())
        conversations = _expired_delete(expired, EXPIRED_PER_REQUEST)[1].get(org.pk, set())
        rows = arrival.rows_locked()
        arrival.add(rows)
        taken = arrival.whole_taken(rows, read if spans else None)
        arrival.write(rows)
    settled = {*taken.calls, *taken.left, *arrival.refused, *taken.bare}
    waiting = sum(1 for row in rows.values() if row.written_at is None and row.pk not in settled)
    conversations |= {conversation for _, conversation in spans}
    conversations |= {call.origin.conversation_id for call in taken.calls.values()}
    conversations |= {row.conversation_external_id for row in arrival.refused.values() if row.span_seen_at}
    return _Joined(list(taken.calls), arrival.rejected, conversations, waiting, taken.groups, len(taken.left))


def whole_calls_write(*, org_id: int) -> int:
    """The worker's part: write the org's calls that are whole and not written (a logs request completed calls of
    more conversations than it writes), MAX_OTLP_CONVERSATIONS_PER_REQUEST conversations at a time, in external
    id order. Returns how many calls it wrote."""
    org = Org.objects.filter(pk=org_id).first()
    if org is None:
        return 0
    whole = _waiting(org).filter(span_seen_at__isnull=False, replied=True)
    after, written = "", 0
    while True:
        now = timezone.now()
        with transaction.atomic():
            conversations = list(
                whole.filter(conversation_external_id__gt=after)
                .order_by("conversation_external_id")
                .values_list("conversation_external_id", flat=True)
                .distinct()[: settings.MAX_OTLP_CONVERSATIONS_PER_REQUEST]
            )
            if not conversations:
                return written
            after = conversations[-1]
            # A request working one of these holds it: it writes the call itself.
            locked = whole.filter(conversation_external_id__in=conversations).select_for_update(skip_locked=True)
            rows = {(row.trace_id, row.span_id): row for row in locked.order_by("trace_id", "span_id")}
            arrival = _Arrival(org, now, (), ())
            taken = arrival.whole_taken(rows, None)
            arrival.write(rows)
        traces_ingest(org=org, groups=taken.groups, rejected=[])
        _written(org.pk, now, done=list(taken.calls), conversations=set(conversations))
        written += len(taken.calls)


@dataclass(frozen=True)
class _Taken:
    calls: dict[int, ModelCall]  # by row: the calls to write now
    groups: Groups  # those calls, checked and grouped for the receiver to write
    bare: list[int]  # rows whose records carry no message content: still awaited
    left: list[int]  # whole rows left for a worker to write (their conversations over the request's limit)


class _Arrival:
    """One request's parts of calls (spans or log records, never both), laid onto the org's waiting calls: what
    `_arrived` steps 2 and 3 keep, reject and refuse."""

    def __init__(
        self, org: Org, now: datetime, spans: Sequence[tuple[AwaitedCall, str]], events: Sequence[ContentEvent]
    ) -> None:
        self.org, self.now = org, now
        self.parts: Counter[Key] = Counter([(c.origin.trace_id, c.origin.span_id) for c, _ in spans])
        self.parts.update((e.trace_id, e.span_id) for e in events)
        self.spans = {(c.origin.trace_id, c.origin.span_id): (c, conversation) for c, conversation in spans}
        self.records: dict[Key, dict[str, ContentEvent]] = defaultdict(dict)  # a record sent twice is one
        for event in events:
            self.records[(event.trace_id, event.span_id)].setdefault(_event_key(event), event)
        self.rejected: list[str] = []  # one a span or record
        self.refused: dict[int, PendingCall] = {}
        self.changed: dict[int, tuple[str, ...]] = {}  # row -> the fields this request changed
        self.appended: dict[int, list[PendingEvent]] = {}  # row -> its new records, kept by `write`
        self.counted: set[Key] = set()  # the calls the store counts as waiting
        self.admitted: set[Key] = set()  # of those, the ones this request adds: their records' room is taken

    def rows_locked(self) -> dict[Key, PendingCall]:
        """Step 2: the request's rows, in key order, inserted if admitted and locked."""
        store = self.store = _Store.of(self.org)  # after step 1: what expired takes no room
        keys = sorted(self.parts)
        mine = PendingCall.objects.filter(org=self.org, span_id__in={span for _, span in keys})
        known = set(mine.values_list("trace_id", "span_id")) & set(keys)
        wanted = []
        for key in keys:
            new = list(self.records[key].values())
            if key in known:
                self.counted.add(key)  # unless it is written or refused: then its parts are not added
            elif _unwritable(0, new) is None:
                if refusal := store.admit(sum(event.size for event in new)):
                    self._reject(key, refusal)
                    continue
                self.counted.add(key)
                self.admitted.add(key)
            wanted.append(key)  # a call that can never be written is kept refused, taking no room
        missing = [key for key in wanted if key not in known]
        while True:  # a known row that went (expired) before it was locked is inserted again, as a new one is
            PendingCall.objects.bulk_create(
                [PendingCall(org=self.org, trace_id=trace, span_id=span) for trace, span in missing],
                ignore_conflicts=True,
            )
            locked = mine.select_for_update().order_by("trace_id", "span_id")
            rows = {(row.trace_id, row.span_id): row for row in locked}
            if not (missing := [key for key in wanted if key not in rows]):
                return {key: rows[key] for key in wanted}

    def add(self, rows: dict[Key, PendingCall]) -> None:
        """Step 3: each row's parts added, its new records appended (those already kept are resends), or the call
        refused."""
        kept = PendingEvent.objects.filter(
            call__in=list(rows.values()), key__in=[k for key in rows for k in self.records[key]]
        )
        kept = set(kept.values_list("call_id", "key"))
        for key, row in rows.items():
            if row.written_at is not None:
                continue  # a resent part: its call is written
            if row.refused:
                self._reject(key, f"refused, {row.refused}")
                continue
            if key in self.spans:
                self._span_add(row, *self.spans[key])
            new = {k: event for k, event in self.records[key].items() if (row.pk, k) not in kept}
            if not new:
                continue  # no records, or resent ones
            added = sum(event.size for event in new.values())
            replied = row.replied or any(event.name in LAST_EVENTS for event in new.values())
            refusal = _unwritable(row.event_count, new.values())
            if refusal is None and key not in self.admitted and not (row.span_seen_at and replied):
                refusal = self.store.grow(added)  # it still waits after this request: its records take room
            if refusal is not None:
                if key in self.counted:
                    self.store.release(row, added if key in self.admitted else 0)
                self.refuse(row, refusal)
                continue
            self.appended[row.pk] = [
                PendingEvent(call=row, name=e.name, values=e.values, time=e.time, key=k) for k, e in new.items()
            ]
            row.event_count += len(new)
            row.stored_bytes += added
            row.replied = replied
            self.changed[row.pk] = EVENT_FIELDS

    def _span_add(self, row: PendingCall, call: AwaitedCall, conversation: str) -> None:
        origin = call.origin
        row.span_seen_at = row.span_seen_at or self.now
        row.conversation_external_id = conversation
        row.application = origin.application[:100]
        row.started_at, row.ended_at = origin.started_at, origin.ended_at
        row.response_id = (call.response_id or "")[:200]
        row.end_user = (origin.end_user or "")[:200]
        row.metadata = dict(origin.metadata)
        self.changed[row.pk] = SPAN_FIELDS

    def refuse(self, row: PendingCall, refusal: str) -> None:
        """The call can never be written: its content goes (`write` deletes its records), the reason stays, and
        the request's parts of it are rejected naming it."""
        row.refused = refusal[:500]
        row.end_user, row.event_count, row.stored_bytes, row.replied = "", 0, 0, False
        self.refused[row.pk] = row
        self.appended.pop(row.pk, None)
        self.changed[row.pk] = REFUSED_FIELDS
        self._reject((row.trace_id, row.span_id), f"refused, {refusal}")

    def whole_taken(self, rows: dict[Key, PendingCall], read: ReadSpans | None) -> _Taken:
        """Step 4: the calls of the rows holding both parts (span and reply), checked as the receiver will write
        them. With the spans request's `read`, with its calls and at once: a refusal refuses the request. Else (log
        records completed them) a conversation apart, those a limit refuses refused, and the calls of at most
        MAX_OTLP_CONVERSATIONS_PER_REQUEST conversations taken: the rest are left whole for a worker to write (a
        request holds no smaller batch that would fit, and its time stays bounded)."""
        whole = [
            row
            for row in rows.values()
            if row.written_at is None and not row.refused and row.span_seen_at is not None and row.replied
        ]
        left = []
        if read is None:
            most = settings.MAX_OTLP_CONVERSATIONS_PER_REQUEST
            taken = set(sorted({row.conversation_external_id for row in whole})[:most])
            left = [row.pk for row in whole if row.conversation_external_id not in taken]
            whole = [row for row in whole if row.conversation_external_id in taken]
        calls, refusals = _calls(whole, self.appended)
        bare = [row for row in whole if row.pk not in calls and row.pk not in refusals]
        for row in bare:  # still awaited: its conversation is no more complete than before
            self.rejected.append(
                f"model call span {row.span_id}: its log records carry no message content (set "
                "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true)"
            )
        if read is not None:
            groups = traces_check(org=self.org, read=replace(read, calls=[*read.calls, *calls.values()]))
        else:
            groups, apart = _checked_apart(self.org, calls)
            refusals |= apart
        by_pk = {row.pk: row for row in whole}
        for pk, refusal in refusals.items():
            calls.pop(pk, None)
            self.refuse(by_pk[pk], refusal)
        for pk in calls:
            # Written by the receiver after this transaction: the records this request brought go straight into
            # the conversation, as a span's own messages do, and are not kept. Until `_written` settles the row it
            # stands as before them, so a request that fails in between leaves the call waiting for them (the
            # exporter's retry brings them), never whole without its records.
            if self.appended.pop(pk, None) is not None:
                del self.changed[pk]
        return _Taken(calls, groups, [row.pk for row in bare], left)

    def write(self, rows: dict[Key, PendingCall]) -> None:
        PendingEvent.objects.filter(call_id__in=list(self.refused)).delete()
        PendingEvent.objects.bulk_create([event for events in self.appended.values() for event in events])
        alike: dict[tuple[str, ...], list[PendingCall]] = defaultdict(list)
        for row in rows.values():
            if fields := self.changed.get(row.pk):
                alike[fields].append(row)
        for fields, changed in alike.items():  # one statement for each kind of change
            pending_calls_save(changed, fields)

    def _reject(self, key: Key, why: str) -> None:
        self.rejected.extend([f"model call span {key[1]}: {why}"] * self.parts[key])


def _event_key(event: ContentEvent) -> str:
    """What makes a record itself (its event, fields and time): a resent one adds nothing."""
    document = json.dumps([event.name, event.values, event.time], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(document.encode()).hexdigest()


def _unwritable(kept: int, new: Iterable[ContentEvent]) -> str | None:
    """Why a call that holds `kept` records and gains `new` could never be written, or None."""
    new = list(new)
    largest = max((event.largest_message for event in new), default=0)
    if largest > settings.MAX_MESSAGE_BYTES:
        return f"a message of it is {largest} bytes; MAX_MESSAGE_BYTES ({settings.MAX_MESSAGE_BYTES}) is the most"
    most = settings.MAX_MESSAGES_PER_CONVERSATION
    if kept + len(new) > most:
        return f"it has more log records than MAX_MESSAGES_PER_CONVERSATION ({most}), the messages a conversation holds"
    return None


def _calls(
    rows: list[PendingCall], appended: dict[int, list[PendingEvent]]
) -> tuple[dict[int, ModelCall], dict[int, str]]:
    """The calls of rows holding both parts, read from their records (those kept, read only now, once each, then
    those `appended` by this request), by row; and the rows whose records do not make a call, with why. A call
    whose records carry no message content (capture is off) is neither."""
    events: dict[int, list[tuple[str, dict]]] = defaultdict(list)
    earlier = [row.pk for row in rows if row.event_count > len(appended.get(row.pk, ()))]
    if earlier:
        stored = PendingEvent.objects.filter(call_id__in=earlier).order_by("call_id", "pk")
        for call_id, name, values in stored.values_list("call_id", "name", "values"):
            events[call_id].append((name, values))
    for row in rows:
        events[row.pk] += [(event.name, _as_kept(event.values)) for event in appended.get(row.pk, ())]
    calls, refusals = {}, {}
    for row in rows:
        try:
            call = _call(row, events[row.pk])
        except ContentError as exc:  # each record was read alone on arrival; together they may not make a call
            refusals[row.pk] = str(exc)
            continue
        if call is not None:
            calls[row.pk] = call
    return calls, refusals


def _as_kept(value: Any) -> Any:
    """A record's fields as a kept one reads back from PostgreSQL's jsonb: its objects' fields shortest name first
    (then by their bytes), a number written with an exponent of ten upwards as the whole number, no negative zero.
    So a call reads the same whether its records waited or completed it, and its messages (tool arguments as
    compact JSON, in the order of their fields) with it."""
    if isinstance(value, dict):
        return {key: _as_kept(value[key]) for key in sorted(value, key=lambda key: (len(key.encode()), key.encode()))}
    if isinstance(value, list):
        return [_as_kept(item) for item in value]
    if isinstance(value, float):
        if value == 0:
            return 0.0
        if "e+" in (written := repr(value)):
            return int(Decimal(written))
    return value


def _call(row: PendingCall, events: list[tuple[str, dict]]) -> ModelCall | None:
    """The call a row holds both parts of; None when its events carry no message content (capture is off)."""
    origin = SpanOrigin(
        trace_id=row.trace_id,
        span_id=row.span_id,
        started_at=row.started_at,
        ended_at=row.ended_at,
        conversation_id=row.conversation_external_id,
        application=row.application,
        where=f"the log records of span {row.span_id}",
        end_user=row.end_user or None,
        metadata=tuple(row.metadata.items()),
    )
    content = call_content(events, origin.where)  # None: a details event without messages
    inputs, outputs = content or ([], [])
    if not any(turn.content or turn.tool_calls for turn in [*inputs, *outputs]):
        return None
    return ModelCall(origin, inputs, outputs, row.response_id or None)


def _checked_apart(org: Org, calls: dict[int, ModelCall]) -> tuple[Groups, dict[int, str]]:
    """The calls log records completed, checked as the receiver will write them: all at once, and when that is
    refused, a conversation apart, so that one refused conversation refuses only its own calls. Returns the groups
    to write and the rows refused with why."""
    try:
        return traces_check(org=org, read=ReadSpans(calls=list(calls.values()))), {}
    except (InvalidConversation, LimitExceeded):
        pass
    by_conversation: dict[str, list[int]] = defaultdict(list)
    for pk, call in calls.items():
        by_conversation[call.origin.conversation_id].append(pk)
    groups: Groups = {}
    refusals: dict[int, str] = {}
    for pks in by_conversation.values():
        try:
            groups |= traces_check(org=org, read=ReadSpans(calls=[calls[pk] for pk in pks]))
        except LimitExceeded as exc:
            refusals |= dict.fromkeys(pks, f"{exc} ({exc.limit})")
        except InvalidConversation as exc:
            refusals |= dict.fromkeys(pks, str(exc))
    return groups, refusals


def _settled(org: Org, now: datetime, joined: _Joined, result: IngestResult) -> IngestResult:
    """After the write: the joined rows go, the conversations' marks follow what still waits, and the answer
    says what waits."""
    _written(org.pk, now, done=joined.done, conversations=joined.conversations)
    notes = []
    if joined.left:
        transaction.on_commit(lambda: enqueue.otlp_whole_calls(org_id=org.pk))
        notes.append(
            f"{joined.left} model call(s) this request made whole belong to conversations beyond "
            f"MAX_OTLP_CONVERSATIONS_PER_REQUEST ({settings.MAX_OTLP_CONVERSATIONS_PER_REQUEST}): a worker writes them"
        )
    if joined.waiting:
        notes.append(
            f"{joined.waiting} model call(s) of this request wait for their other part: a span whose messages "
            "come as OTLP log records to /api/v1/otlp/v1/logs, or log records whose span has not come"
        )
    overdue = _awaited(org.pk).filter(span_seen_at__lte=now - content_wait()).count()
    if overdue:
        notes.append(
            f"{overdue} model call(s) have waited over OTLP_CONTENT_WAIT_MINUTES "
            f"({settings.OTLP_CONTENT_WAIT_MINUTES}) for their messages as OTLP log records, and their "
            "conversations are not scorable: does the producer export logs (OTEL_LOGS_EXPORTER=otlp)?"
        )
    return IngestResult(result.conversations, result.messages, [*result.rejected, *joined.rejected], notes)


def _written(org_id: int, now: datetime, *, done: list[int], conversations: set[str]) -> None:
    """The `done` rows' calls are written: what they held is in their conversations now, so the rows keep no
    content; the conversations' marks follow what still waits."""
    with transaction.atomic():
        written = PendingCall.objects.filter(pk__in=done)
        written.update(written_at=now, end_user="", event_count=0, stored_bytes=0, replied=True)
        PendingEvent.objects.filter(call_id__in=done).delete()
        _marks_refresh(org_id, conversations)


def awaited_content_note(conversation: Conversation, now: datetime | None = None) -> str | None:
    """For the conversation's page: why it is not scorable while a call's messages are awaited, or None."""
    since = conversation.content_awaited_since
    if since is None:
        return None
    when = timezone.localtime(since).strftime("%Y-%m-%d %H:%M %Z")
    note = (
        f"Not scorable: the messages of a model call of this conversation, sent as OTLP log records, have been "
        f"awaited since {when}."
    )
    if (now or timezone.now()) - since < content_wait():
        return f"{note} It is graded once they come."
    return (
        f"{note} That is longer than OTLP_CONTENT_WAIT_MINUTES ({settings.OTLP_CONTENT_WAIT_MINUTES}): they may "
        "never come. Check that the producer exports its logs to /api/v1/otlp/v1/logs (OTEL_LOGS_EXPORTER=otlp)."
    )


def _marks_refresh(org_id: int, external_ids: set[str]) -> None:
    """Each conversation's `content_awaited_since`: the earliest span among its calls whose messages wait."""
    if not external_ids:
        return
    # Locked first, in one order: of two requests settling calls of one conversation at once, the later sees
    # what the earlier committed (a mark computed before the other's rows were written would outlive them).
    list(
        Conversation.objects.select_for_update()
        .filter(org_id=org_id, external_id__in=external_ids)
        .order_by("external_id")
        .values_list("pk")
    )
    earliest = (
        _awaited(org_id)
        .filter(conversation_external_id=OuterRef("external_id"))
        .order_by("span_seen_at")
        .values("span_seen_at")[:1]
    )
    Conversation.objects.filter(org_id=org_id, external_id__in=external_ids).update(
        content_awaited_since=Subquery(earliest)
    )


def _waiting(org: Org) -> QuerySet[PendingCall]:
    """The org's calls waiting for their other part (neither written nor refused)."""
    return PendingCall.objects.filter(org=org, written_at=None, refused="")


def _awaited(org_id: int) -> QuerySet[PendingCall]:
    """The org's calls whose span came and whose messages have not."""
    return PendingCall.objects.filter(org_id=org_id, span_seen_at__isnull=False, written_at=None, refused="")

"""Model calls whose span and messages arrive apart, joined whichever comes first.

The instrumentations' default sends a model call's messages as OTLP log records (grading/otlp/logs.py), exported
by a batch processor of their own: the span and its messages reach Tollgate in separate requests, in either
order, seconds or minutes apart. Whichever part comes first waits in a PendingCall row, keyed by org, trace id and
span id; the request that brings the other part takes it from there, and the call is written by the receiver
with the request's other calls, ordered by span start as they are, so what is stored does not depend on which
part came first.

While a call's span is here and its messages are not, its conversation is not scorable
(`Conversation.content_awaited_since`, evidence `content_awaited`): the record is known to be incomplete, and a
score of it would not name what the agent said. Every answer says how many calls wait longer than
OTLP_CONTENT_WAIT_MINUTES (the messages may never come: a producer exporting no logs). A row is kept for
PENDING_KEPT once its call is written (an exporter's resend of either part then finds it written, instead of
waiting for the other part again), or once its messages came if their span never does.
"""

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Case, DateTimeField, Min, QuerySet, Value, When
from django.utils import timezone

from grading.models import Conversation, Org
from grading.otlp.genai import AwaitedCall, ModelCall, ReadSpans, SpanOrigin, call_content
from grading.otlp.logs import LAST_EVENTS, ContentEvent, ReadLogs
from grading.otlp.models import PendingCall
from grading.otlp.receiver import Groups, IngestResult, conversation_key, traces_check, traces_ingest

PENDING_KEPT = timedelta(days=1)
SPAN_FIELDS = [
    "span_seen_at",
    "conversation_external_id",
    "application",
    "started_at",
    "ended_at",
    "response_id",
    "end_user",
]


def content_wait() -> timedelta:
    return timedelta(minutes=settings.OTLP_CONTENT_WAIT_MINUTES)


@dataclass(frozen=True)
class _Joined:
    done: list[int]  # PendingCall rows whose calls the request writes
    rejected: list[str]
    conversations: set[str]  # external ids whose content_awaited_since may have changed
    waiting: int  # calls of this request still missing their other part
    groups: Groups  # the request's calls, joined ones included, checked and grouped for the receiver to write


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


def _arrived(
    org: Org,
    now: datetime,
    read: ReadSpans,
    *,
    spans: list[tuple[AwaitedCall, str]] = (),  # with the external id of each one's conversation
    events: list[ContentEvent] = (),
) -> _Joined:
    """In one transaction: keep the parts that arrived beside those already waiting, and take the calls now whole.

    The rows are inserted if missing (a concurrent request may insert the same one: the constraint keeps one),
    then locked in key order, so two requests bringing the two parts of a call at once meet in one row, one
    after the other, and the second finds the call whole. The request is checked as the receiver will write it
    (`traces_check`, once) before anything of it is kept: a refusal keeps nothing.
    """
    keys = sorted({(c.origin.trace_id, c.origin.span_id) for c, _ in spans} | {(e.trace_id, e.span_id) for e in events})
    if not keys:
        return _Joined([], [], set(), 0, traces_check(org=org, read=read))
    with transaction.atomic():
        PendingCall.objects.bulk_create(
            [PendingCall(org=org, trace_id=trace, span_id=span) for trace, span in keys], ignore_conflicts=True
        )
        locked = PendingCall.objects.select_for_update().filter(org=org, span_id__in={span for _, span in keys})
        wanted = set(keys)
        rows = {
            (r.trace_id, r.span_id): r
            for r in locked.order_by("trace_id", "span_id")
            if (r.trace_id, r.span_id) in wanted
        }
        changed: dict[int, PendingCall] = {}
        fields = SPAN_FIELDS if spans else ["events"]  # a request brings spans or log records, never both
        for call, conversation in spans:
            row, origin = rows[(call.origin.trace_id, call.origin.span_id)], call.origin
            if row.written_at is not None:
                continue  # a resent span: its call is written
            changed[row.pk] = row
            row.span_seen_at = row.span_seen_at or now
            row.conversation_external_id = conversation
            row.application = origin.application[:100]
            row.started_at, row.ended_at = origin.started_at, origin.ended_at
            row.response_id = (call.response_id or "")[:200]
            row.end_user = (origin.end_user or "")[:200]
        for event in events:
            row = rows[(event.trace_id, event.span_id)]
            stored = [event.name, event.values, event.time]
            if row.written_at is None and stored not in row.events:  # else a resent record
                row.events.append(stored)
                changed[row.pk] = row
        for row in changed.values():  # a statement a row: bulk_update's one CASE over all rows costs their square
            PendingCall.objects.filter(pk=row.pk).update(**{name: getattr(row, name) for name in fields})
        calls, done, rejected = [], [], []
        waiting = 0
        for row in rows.values():
            if row.written_at is not None:
                continue
            if row.span_seen_at is None or not any(name in LAST_EVENTS for name, _, _ in row.events):
                waiting += 1
                continue
            call = _call(row)
            if call is None:  # still awaited: its conversation is no more complete than before
                rejected.append(
                    f"model call span {row.span_id}: its log records carry no message content (set "
                    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true)"
                )
                continue
            calls.append(call)
            done.append(row.pk)
        groups = traces_check(org=org, read=replace(read, calls=[*read.calls, *calls]))
        old = PendingCall.objects.filter(org=org, received_at__lt=now - PENDING_KEPT)
        (old.filter(written_at__isnull=False) | old.filter(span_seen_at=None)).delete()
    conversations = {conversation for _, conversation in spans} | {call.origin.conversation_id for call in calls}
    return _Joined(done, rejected, conversations, waiting, groups)


def _call(row: PendingCall) -> ModelCall | None:
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
    )
    inputs, outputs = call_content([(name, values) for name, values, _ in row.events], origin.where)
    if not any(turn.content or turn.tool_calls for turn in [*inputs, *outputs]):
        return None
    return ModelCall(origin, inputs, outputs, row.response_id or None)


def _settled(org: Org, now: datetime, joined: _Joined, result: IngestResult) -> IngestResult:
    """After the write: the joined rows go, the conversations' marks follow what still waits, and the answer
    says what waits."""
    with transaction.atomic():
        PendingCall.objects.filter(pk__in=joined.done).update(written_at=now)
        _marks_refresh(org, joined.conversations)
    notes = []
    if joined.waiting:
        notes.append(
            f"{joined.waiting} model call(s) of this request wait for their other part: a span whose messages "
            "come as OTLP log records to /api/v1/otlp/v1/logs, or log records whose span has not come"
        )
    overdue = _awaited(org).filter(span_seen_at__lte=now - content_wait()).count()
    if overdue:
        notes.append(
            f"{overdue} model call(s) have waited over OTLP_CONTENT_WAIT_MINUTES "
            f"({settings.OTLP_CONTENT_WAIT_MINUTES}) for their messages as OTLP log records, and their "
            "conversations are not scorable: does the producer export logs (OTEL_LOGS_EXPORTER=otlp)?"
        )
    return IngestResult(result.conversations, result.messages, [*result.rejected, *joined.rejected], notes)


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


def _marks_refresh(org: Org, external_ids: set[str]) -> None:
    """Each conversation's `content_awaited_since`: the earliest span among its calls whose messages wait."""
    if not external_ids:
        return
    # Locked first, in one order: of two requests settling calls of one conversation at once, the later sees
    # what the earlier committed (a mark computed before the other's rows were written would outlive them).
    list(
        Conversation.objects.select_for_update()
        .filter(org=org, external_id__in=external_ids)
        .order_by("external_id")
        .values_list("pk")
    )
    since = dict(
        _awaited(org)
        .filter(conversation_external_id__in=external_ids)
        .values("conversation_external_id")
        .annotate(since=Min("span_seen_at"))
        .values_list("conversation_external_id", "since")
    )
    marks = Case(
        *(When(external_id=key, then=Value(at)) for key, at in since.items()),
        default=Value(None),
        output_field=DateTimeField(),
    )
    Conversation.objects.filter(org=org, external_id__in=external_ids).update(content_awaited_since=marks)


def _awaited(org: Org) -> QuerySet[PendingCall]:
    """The org's calls whose span came and whose messages have not."""
    return PendingCall.objects.filter(org=org, span_seen_at__isnull=False, written_at=None)

"""A conversation in: created or merged by external id, appended to, and its people's thumbs; each write
recomputes the evidence (active path, fingerprint) and the review state in the same transaction."""

import base64
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from grading.core import evidence as ev
from grading.core.errors import ConversationNotFound, LimitExceeded
from grading.core.evidence import EvidenceMessage, active_path, branch_count, fingerprint
from grading.core.schemas import ConversationIn, FeedbackIn, MessageIn, MessagesIn
from grading.models import Conversation, Feedback, Message, Org
from grading.reviews.conversation_reads import quiet_period
from grading.reviews.rollups import rollups_thumbs_refresh, thumbs_of
from grading.reviews.services import review_rules_send, review_state_refresh, review_states_refresh
from grading.reviews.sql import conversations_save


@dataclass(frozen=True)
class ConversationWrite:
    conversation: Conversation
    # Every message after the merge, so callers need not read them again; None after an append that only
    # extended the active path, which reads none of the earlier messages.
    messages: list[EvidenceMessage] | None
    created: bool = False
    # Why the conversation cannot be scored as of the write, or None (evidence.not_scorable_reason).
    not_scorable_reason: ev.NotScorable | None = None


def conversation_upsert(*, org: Org, payload: ConversationIn, now: datetime | None = None) -> ConversationWrite:
    """Create the conversation or merge into it by message id."""
    now = now or timezone.now()
    with transaction.atomic():
        conversation = _locked_conversation(org, payload.external_id)
        created, inserted = conversation is None, False
        if created:
            conversation, inserted = _create_conversation(org, payload, now)
        before = _columns(conversation)
        _upsert_fields(conversation, payload)
        merge = _merge_messages(conversation, payload.messages, now, before)
        _merge_write(merge, may_be_reviewed=not inserted)
    return ConversationWrite(conversation, merge.messages, created, merge.reason)


def _upsert_fields(conversation: Conversation, payload: ConversationIn) -> None:
    conversation.application = payload.application
    conversation.closed = payload.closed
    conversation.active_message_id = payload.active_message_id
    if payload.end_user is not None:
        conversation.end_user = payload.end_user
    if payload.metadata is not None:
        conversation.metadata = payload.metadata


def conversation_append(
    *, org: Org, external_id: str, payload: MessagesIn, now: datetime | None = None
) -> ConversationWrite:
    """Merge new messages (or edits of known ids) into an existing conversation.

    Without `active_message_id` the active leaf falls back to the newest leaf, which is the appended
    message when it continues the active branch.
    """
    now = now or timezone.now()
    with transaction.atomic():
        conversation = _locked_conversation(org, external_id)
        if conversation is None:
            raise ConversationNotFound(external_id)
        before = _columns(conversation)
        _append_fields(conversation, payload)
        merge = _merge_messages(conversation, payload.messages, now, before)
        _merge_write(merge, may_be_reviewed=True)
    return ConversationWrite(conversation, merge.messages, not_scorable_reason=merge.reason)


def _append_fields(conversation: Conversation, payload: MessagesIn) -> None:
    conversation.active_message_id = payload.active_message_id
    if payload.closed is not None:
        conversation.closed = payload.closed
    if payload.end_user is not None:
        conversation.end_user = payload.end_user
    if payload.metadata is not None:
        conversation.metadata = payload.metadata


@dataclass(frozen=True)
class StoredConversation:
    """A conversation the caller locked in its transaction, with every message it holds (twins included)."""

    conversation: Conversation
    messages: list[Message]


def conversations_write(
    *,
    org: Org,
    writes: Sequence[tuple[StoredConversation | None, ConversationIn | MessagesIn]],
    now: datetime | None = None,
) -> list[ConversationWrite]:
    """What `conversation_upsert` writes for each new conversation (None, with its ConversationIn) and
    `conversation_append` for each stored one, in one transaction, with one statement per kind of write for them
    all (the conversations created, the messages inserted, the conversations updated, which of them have reviews)
    instead of a round of statements per conversation: the OTLP receiver writes a request's conversations so. The
    stored ones are locked by the caller and their messages read, so nothing is read again. When another writer
    created one of the new conversations meanwhile, each new one is written by `conversation_upsert`, which merges
    into the other's. Returns the writes in the order given."""
    now = now or timezone.now()
    # Within the caller's transaction, no savepoint of its own (two round trips a call): nothing here is retried
    # on a failure, which rolls the whole transaction back. `_inserted` keeps its savepoint, which is.
    with transaction.atomic(savepoint=False):
        merges: list[_Write | None] = []
        for stored, payload in writes:
            if stored is None:
                assert isinstance(payload, ConversationIn)
                conversation = _new_conversation(org, payload, now)
                before = _columns(conversation)
                _upsert_fields(conversation, payload)
                merges.append(_merge_messages(conversation, payload.messages, now, before, stored=[]))
            else:
                assert isinstance(payload, MessagesIn)
                conversation = stored.conversation
                before = _columns(conversation)
                _append_fields(conversation, payload)
                merges.append(_merge_messages(conversation, payload.messages, now, before, stored=stored.messages))
        created = [merge.conversation for (stored, _), merge in zip(writes, merges, strict=True) if stored is None]
        if created and not _inserted(created):  # each new one merged by conversation_upsert, below
            merges = [None if stored is None else merge for (stored, _), merge in zip(writes, merges, strict=True)]
        written = [merge for merge in merges if merge is not None]
        if replaced := [row.pk for merge in written for row in merge.replaced]:
            Message.objects.filter(pk__in=replaced).delete()
        Message.objects.bulk_create([row for merge in written for row in merge.new])
        Message.objects.bulk_update([row for merge in written for row in merge.edited], list(_MESSAGE_FIELDS))
        saved = [merge for (stored, _), merge in zip(writes, merges, strict=True) if stored and merge and merge.saved]
        if saved:
            conversations_save([merge.conversation for merge in saved])
            review_states_refresh(subjects=[merge.conversation for merge in saved])
        results = []
        for (stored, payload), merge in zip(writes, merges, strict=True):
            if merge is None:
                assert isinstance(payload, ConversationIn)
                results.append(conversation_upsert(org=org, payload=payload, now=now))
            else:
                results.append(ConversationWrite(merge.conversation, merge.messages, stored is None, merge.reason))
    return results


def _inserted(conversations: list[Conversation]) -> bool:
    """Insert new conversations with their evidence; False, inserting none, when another writer took an external
    id first."""
    try:
        with transaction.atomic():  # a savepoint: a concurrent first upsert may win an insert
            Conversation.objects.bulk_create(conversations)
    except IntegrityError:
        return False
    return True


def _locked_conversation(org: Org, external_id: str) -> Conversation | None:
    return _conversation(org, external_id, lock=True)


def _conversation(org: Org, external_id: str, *, lock: bool = False) -> Conversation | None:
    # At most one row (conversation_unique_external_id). No ORDER BY: `.first()` adds one on id, and a generic plan
    # may then walk the primary key and filter every conversation of the org.
    conversations = Conversation.objects.select_for_update() if lock else Conversation.objects
    found = conversations.filter(org=org, external_id=external_id)[:1]
    return found[0] if found else None


def _create_conversation(org: Org, payload: ConversationIn, now: datetime) -> tuple[Conversation, bool]:
    """The conversation inserted (True), or the one a concurrent first upsert inserted first (False)."""
    try:
        with transaction.atomic():  # a savepoint: a concurrent first upsert may win the insert
            conversation = _new_conversation(org, payload, now)
            conversation.save(force_insert=True)
            return conversation, True
    except IntegrityError:
        return _locked_conversation(org, payload.external_id), False


def _new_conversation(org: Org, payload: ConversationIn, now: datetime) -> Conversation:
    return Conversation(
        org=org,
        external_id=payload.external_id,
        application=payload.application,
        started_at=now,
        last_activity_at=now,
        fingerprint=fingerprint([]),
    )


def _columns(conversation: Conversation) -> tuple:
    """The conversation's stored values, to skip a write when a merge changed nothing (idempotent imports)."""
    return tuple(getattr(conversation, field.attname) for field in conversation._meta.concrete_fields)


@dataclass(frozen=True)
class _Write:
    """What a merge writes for one conversation, worked out in memory (`_merge_write` writes it)."""

    conversation: Conversation
    new: list[Message]  # to insert
    edited: list[Message]  # to update
    replaced: list[Message]  # stored twins to delete
    messages: list[EvidenceMessage] | None  # as ConversationWrite.messages
    reason: ev.NotScorable | None
    saved: bool  # a column of the conversation changed: its row is saved


def _merge_write(write: _Write, *, may_be_reviewed: bool) -> None:
    """One conversation's merge written, then its row and its reviews' states when its columns changed. A
    conversation this transaction inserted (`may_be_reviewed` False) has no review to keep true: nothing grades a row
    before its insert commits."""
    if write.replaced:
        Message.objects.filter(pk__in=[row.pk for row in write.replaced]).delete()
    Message.objects.bulk_create(write.new)
    Message.objects.bulk_update(write.edited, list(_MESSAGE_FIELDS))
    if write.saved:
        write.conversation.save()
        if may_be_reviewed:
            review_state_refresh(subject=write.conversation)


def _merge_messages(
    conversation: Conversation,
    incoming: list[MessageIn],
    now: datetime,
    before: tuple,
    *,
    stored: list[Message] | None = None,
) -> _Write:
    """Insert new ids, update changed ones (an edit), keep repeats of an id as twins, then recompute the evidence:
    what to write, worked out in memory from `stored` (every message the conversation holds) when the caller read
    them, else from what this reads.

    1. An append that continues the active path (new ids, each the child of the one before, the first a child
       of the active leaf, which stays the active leaf) reads no earlier message: `_recompute_evidence` extends
       the stored state.
    2. Otherwise load every message of the conversation (the path and fingerprint need them all). The first
       message under each id in the payload is merged: a new id is inserted, a known id whose fields differ is
       an edit and is updated in place.
    3. Later messages under the same id in the payload are its twins, kept as sent so that the record reads
       `duplicate_id` instead of one of them winning silently. Stored twins of that id are replaced when the
       payload's differ, and removed when the payload sends the id once: the source has said which it means.
    4. Enforce the size limits before anything is written (the caller's transaction rolls back otherwise).
    5. Recompute the active path, fingerprint, branch count and activity times from the merged set.
    """
    if (appended := _continuation(conversation, incoming, now, stored)) is not None:
        conversation_limits_check(incoming=incoming, total=conversation.message_count + len(appended))
        reason, saved = _recompute_evidence(conversation, appended, changed=True, now=now, before=before, appended=True)
        return _Write(conversation, appended, [], [], None, reason, saved)
    if stored is None:
        stored = list(conversation.messages.all()) if conversation.pk else []
    merge = _merged(conversation, stored, incoming, now)
    conversation_limits_check(incoming=incoming, total=len(merge.merged))
    changed = bool(merge.new or merge.edited or merge.replaced)
    reason, saved = _recompute_evidence(conversation, merge.merged, changed=changed, now=now, before=before)
    messages = [m.as_evidence() for m in merge.merged]
    return _Write(conversation, merge.new, merge.edited, merge.replaced, messages, reason, saved)


@dataclass(frozen=True)
class _Merge:
    merged: list[Message]  # every message after the merge, twins included
    new: list[Message]  # to insert
    edited: list[Message]  # to update
    replaced: list[Message]  # stored twins to delete


def _merged(conversation: Conversation, rows: list[Message], incoming: list[MessageIn], now: datetime) -> _Merge:
    """Steps 2 and 3 of `_merge_messages`, in memory: what to insert, update and delete."""
    existing = {m.external_id: m for m in rows if m.twin == 0}
    twins: dict[str, list[Message]] = {}
    for row in sorted((m for m in rows if m.twin), key=lambda m: m.twin):
        twins.setdefault(row.external_id, []).append(row)
    sent: dict[str, list[MessageIn]] = {}
    for message_in in incoming:
        sent.setdefault(message_in.id, []).append(message_in)
    new: list[Message] = []
    edited: list[Message] = []
    replaced: list[Message] = []
    for message_id, (message_in, *repeats) in sent.items():
        fields = _message_fields(message_in, now)
        current = existing.get(message_id)
        if current is None:
            message = Message(conversation=conversation, external_id=message_id, **fields)
            existing[message_id] = message
            new.append(message)
        elif _differs(current, fields):
            if message_in.created_at is None:
                del fields["created_at"]  # an edit does not move a message in time unless the source says so
            for name, value in fields.items():
                setattr(current, name, value)
            edited.append(current)
        stored = twins.get(message_id, [])
        wanted = [_message_fields(repeat, now) for repeat in repeats]
        if len(stored) != len(wanted) or any(_differs(row, f) for row, f in zip(stored, wanted, strict=False)):
            replaced += stored
            twins[message_id] = [
                Message(conversation=conversation, external_id=message_id, twin=number, **twin_fields)
                for number, twin_fields in enumerate(wanted, start=1)
            ]
            new += twins[message_id]
    merged = [*existing.values(), *(row for rows_of_id in twins.values() for row in rows_of_id)]
    return _Merge(merged, new, edited, replaced)


def _differs(row: Message, fields: dict) -> bool:
    # A time the source did not give is the time we received it, so comparing it would make every re-send an edit.
    return any(getattr(row, name) != value for name, value in fields.items() if name != "created_at")


def _continuation(
    conversation: Conversation, incoming: list[MessageIn], now: datetime, stored: list[Message] | None
) -> list[Message] | None:
    """The incoming messages as new rows when they only extend the active path and its leaf stays active, else
    None. Reads one indexed query (are any of these ids known?), never the earlier messages; nothing when the
    caller read the `stored` messages."""
    state = conversation.evidence_state
    if not conversation.pk or not incoming or not state or not state.get("end_is_leaf"):
        return None
    parent = conversation.active_path_ids[-1]
    for message_in in incoming:
        if message_in.parent_id != parent:
            return None
        parent = message_in.id
    if len({m.id for m in incoming}) != len(incoming):
        return None
    rows = [Message(conversation=conversation, external_id=m.id, **_message_fields(m, now)) for m in incoming]
    leaf = rows[-1].as_evidence()
    if conversation.active_message_id is None:
        # The newest-leaf rule: the new leaf must be newer than every other leaf (the old active leaf is no
        # longer a leaf; other branches did not change).
        others = state.get("others_newest")
        if others is not None and ev.recency(leaf) <= (datetime.fromisoformat(others[0]), others[1]):
            return None
    elif conversation.active_message_id != leaf.id:
        return None
    ids = [m.id for m in incoming]
    if stored is not None:
        known = not {row.external_id for row in stored}.isdisjoint(ids)
    else:
        known = conversation.messages.filter(external_id__in=ids).exists()
    if known:
        return None  # an edit of a known id: the general merge handles it
    return rows


_MESSAGE_FIELDS = (
    "parent_external_id",
    "role",
    "content",
    "tool_calls",
    "tool_call_id",
    "name",
    "created_at",
    "hidden",
    "truncated",
)


def _message_fields(message_in: MessageIn, now: datetime) -> dict:
    return {
        "parent_external_id": message_in.parent_id,
        "role": message_in.role,
        "content": message_in.content,
        "tool_calls": message_in.tool_calls,
        "tool_call_id": message_in.tool_call_id,
        "name": message_in.name,
        # The time we received it, when the source does not say: the newest-leaf rule needs a time.
        "created_at": message_in.created_at or now,
        "hidden": message_in.hidden,
        "truncated": message_in.truncated,
    }


def conversation_limits_check(*, incoming: list[MessageIn], total: int) -> None:
    """Raise LimitExceeded when a conversation would hold `total` messages, or one of `incoming` is too large. The
    merge checks before it writes; the OTLP receiver checks a whole request before its first transaction."""
    max_messages = settings.MAX_MESSAGES_PER_CONVERSATION
    if total > max_messages:
        raise LimitExceeded(
            "MAX_MESSAGES_PER_CONVERSATION", max_messages, f"a conversation may hold at most {max_messages} messages"
        )
    max_bytes = settings.MAX_MESSAGE_BYTES
    for message_in in incoming:
        size = len(message_in.model_dump_json().encode())
        if size > max_bytes:
            raise LimitExceeded(
                "MAX_MESSAGE_BYTES", max_bytes, f"message {message_in.id!r} is {size} bytes; the limit is {max_bytes}"
            )


def _recompute_evidence(
    conversation: Conversation,
    messages: list[Message],
    *,
    changed: bool,
    now: datetime,
    before: tuple,
    appended: bool = False,
) -> tuple[ev.NotScorable | None, bool]:
    """The one place that sets the conversation's evidence columns (fingerprint, active path, branch count, message
    count, activity times and `evidence_state`). Returns the scorability, and whether any of the conversation's
    columns changed (then the row is saved and its reviews' states refreshed).

    `messages` is every message of the conversation, or with `appended` only the new ones, which extend the
    active path (`_continuation`): the stored state then carries the fingerprint forward in O(appended).
    """
    read = _evidence_extended(conversation, messages) if appended else _evidence_read(conversation, messages)
    conversation.evidence_state = read.state
    if read.times:
        conversation.started_at = min([*read.times, conversation.started_at])
    if changed:
        # A closed (e.g. imported) conversation was last active at its last message; an open one, now.
        conversation.last_activity_at = read.newest if conversation.closed and read.newest else now
    saved = _columns(conversation) != before
    facts = replace(read.facts, waiting_on_tools=bool(read.open_calls))
    reason = ev.scorability(
        facts,
        closed=conversation.closed,
        last_activity=conversation.last_activity_at,
        now=now,
        quiet_period=quiet_period(),
        content_awaited=conversation.content_awaited_since is not None,
    )
    return reason, saved


@dataclass(frozen=True)
class _EvidenceRead:
    facts: ev.PathFacts
    open_calls: list[str | None]  # tool calls on the path still waiting for their results
    times: list[datetime]  # the messages' own times, of the messages read
    newest: datetime | None
    state: dict  # the conversation's next `evidence_state`


def _evidence_extended(conversation: Conversation, appended: list[Message]) -> _EvidenceRead:
    """The evidence columns carried forward over messages that extend the active path, from the stored state."""
    state = dict(conversation.evidence_state)
    new = [m.as_evidence() for m in appended]
    conversation.fingerprint, digest = ev.extend_digest(base64.b64decode(state["digest"]), new, path_was_empty=False)
    conversation.active_path_ids = [*conversation.active_path_ids, *(m.id for m in new)]
    conversation.message_count += len(new)
    facts = ev.PathFacts(
        problem=None,
        empty=False,
        truncated=state["truncated"] or any(m.truncated for m in new),
        waiting_on_tools=False,
    )
    open_calls = ev.extend_open_tool_calls(state["open_calls"], new)
    times = [m.created_at for m in new if m.created_at is not None]
    newest = max([*times, *([datetime.fromisoformat(state["newest"])] if state.get("newest") else [])], default=None)
    state |= {
        "digest": base64.b64encode(digest).decode(),
        "truncated": facts.truncated,
        "open_calls": open_calls,
        "newest": newest.isoformat() if newest else None,
    }
    return _EvidenceRead(facts, open_calls, times, newest, state)


def _evidence_read(conversation: Conversation, messages: list[Message]) -> _EvidenceRead:
    """The evidence columns computed afresh from every message of the conversation."""
    every = [m.as_evidence() for m in messages]
    result = active_path(every, conversation.active_message_id)
    conversation.active_path_ids = [m.id for m in result.path]
    conversation.branch_count = branch_count(every)
    conversation.message_count = len(messages)
    open_calls = ev.unanswered_tool_call_ids(result.path)
    facts = ev.PathFacts(
        problem=result.problem,
        empty=not result.path,
        truncated=any(m.truncated for m in result.path),
        waiting_on_tools=bool(open_calls),
    )
    times = [m.created_at for m in messages if m.created_at is not None]
    newest = max(times, default=None)
    state = {"truncated": facts.truncated, "open_calls": open_calls, "newest": newest.isoformat() if newest else None}
    if result.problem is None and result.path:
        conversation.fingerprint, digest = ev.path_digest(result.path)
        others = [ev.recency(m) for m in ev.leaves(every) if m.id != result.path[-1].id]
        newest_other = max(others, default=None)
        state |= {
            "digest": base64.b64encode(digest).decode(),
            # Appending under a message that already has children would add a branch: not a continuation.
            "end_is_leaf": not any(m.parent_id == result.path[-1].id for m in every),
            "others_newest": [newest_other[0].isoformat(), newest_other[1]] if newest_other else None,
        }
    else:
        conversation.fingerprint = fingerprint(result.path)
    return _EvidenceRead(facts, open_calls, times, newest, state)


def feedback_record(*, org: Org, payload: FeedbackIn) -> Feedback:
    conversation = _conversation(org, payload.conversation)
    if conversation is None:
        raise ConversationNotFound(payload.conversation)
    if not conversation.messages.filter(external_id=payload.message_id).exists():
        raise ConversationNotFound(f"{payload.conversation}/{payload.message_id}")
    with transaction.atomic():
        Conversation.objects.select_for_update().filter(pk=conversation.pk).first()
        before = thumbs_of(conversation.pk)
        feedback, _ = Feedback.objects.update_or_create(
            conversation=conversation, message_external_id=payload.message_id, defaults={"value": payload.value}
        )
        rollups_thumbs_refresh(conversation_id=conversation.pk, before=before)
        if payload.value == Feedback.Value.DOWN:  # a thumbs-down rule of its version may send it to people now
            review_rules_send(conversation=conversation)
    return feedback

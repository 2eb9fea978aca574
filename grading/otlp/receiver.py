"""Model calls and tool results onto conversation trees, written through the JSON API's own services.

A model call's input is the whole history so far; its output is the reply. So each call is laid onto the tree
that the conversation already has, from the root: an input message identical to a child of the current node
(role, content, tool calls, tool call id, name) is that child, and the walk goes down; the first one that
differs starts a new branch there. The output hangs under the last input message. A regenerated or retried
call therefore shares the whole history and puts its reply beside the first one, as a sibling, never as a
second copy of the history; the next call, whose input holds the reply the agent kept, walks down that branch.

A message's id is derived from the span that first carried it and its place there (`<span id>:in<k>`,
`<span id>:out<k>`, `<span id>:tool`), so re-sending a batch finds every message already in place and writes
nothing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.conf import settings
from django.db import transaction
from pydantic import TypeAdapter, ValidationError

from grading.conversations.ingest import StoredConversation, conversation_limits_check, conversations_write
from grading.core.errors import LimitExceeded
from grading.core.schemas import METADATA_KEYS_MAX, ConversationIn, ExternalId, MessageIn, MessagesIn
from grading.models import Conversation, Message, Org
from grading.models.otlp import SpanLink
from grading.otlp.genai import ModelCall, ReadSpans, SpanOrigin, ToolResult, Turn

_EXTERNAL_ID = TypeAdapter(ExternalId)
# Each transaction writes this many conversations, so that none of their locks is held for much of a second
# (bench/bench_otlp.py reports the longest transaction).
CONVERSATIONS_PER_TRANSACTION = 5


class InvalidConversation(Exception):
    """The messages read from the spans do not pass the JSON API's validation; names the conversation and field."""


@dataclass(frozen=True)
class IngestResult:
    conversations: int  # written (created or changed)
    messages: int  # new messages
    rejected: list[str]  # what could not become evidence, each with where it was and why
    warnings: list[str] = field(default_factory=list)  # what was kept and is not evidence yet


@dataclass
class _Node:
    id: str
    parent_id: str | None
    key: str
    role: str
    tool_calls: list | None
    tool_call_id: str | None


class _Tree:
    """The conversation as far as this request knows it: stored messages, then the ones this request adds."""

    def __init__(self, stored: list[Message]) -> None:
        self.children: dict[str | None, list[_Node]] = defaultdict(list)
        self.by_id: dict[str, _Node] = {}
        self.new: list[tuple[MessageIn, SpanOrigin, str | None]] = []
        for message in sorted(stored, key=lambda m: (m.created_at is None, m.created_at, m.external_id)):
            turn = Turn(message.role, message.content, message.tool_calls, message.tool_call_id, message.name)
            self._add(message.external_id, message.parent_external_id, turn)

    def _add(self, message_id: str, parent_id: str | None, turn: Turn) -> _Node:
        node = _Node(message_id, parent_id, _match_key(turn), turn.role, turn.tool_calls, turn.tool_call_id)
        self.children[parent_id].append(node)
        self.by_id[message_id] = node
        return node

    def child(self, parent_id: str | None, turn: Turn) -> _Node | None:
        key = _match_key(turn)
        return next((node for node in self.children[parent_id] if node.key == key), None)

    def place(
        self,
        turn: Turn,
        parent_id: str | None,
        message_id: str,
        created_at: datetime | None,
        origin: SpanOrigin,
        response_id: str | None = None,
    ) -> _Node:
        """The existing child of `parent_id` that is this message, or a new one with `message_id`."""
        existing = self.child(parent_id, turn) or self.by_id.get(message_id)
        if existing is not None:
            return existing
        self.new.append(
            (
                MessageIn.model_construct(
                    id=message_id,
                    parent_id=parent_id,
                    role=turn.role,
                    content=turn.content,
                    tool_calls=turn.tool_calls,
                    tool_call_id=turn.tool_call_id,
                    name=turn.name,
                    created_at=created_at,
                    hidden=False,
                    truncated=False,
                ),
                origin,
                response_id,
            )
        )
        return self._add(message_id, parent_id, turn)

    def answering_chain_end(self, call_id: str) -> tuple[_Node | None, bool]:
        """Where the result of tool call `call_id` belongs: after the assistant message that made the call and
        the results of that message's other calls already recorded (one chain, as in the OpenAI format).
        Returns (node to hang it under, whether the result is already there)."""
        caller = next(
            (
                node
                for node in self.by_id.values()
                if node.role == "assistant"
                and any(isinstance(c, dict) and c.get("id") == call_id for c in node.tool_calls or [])
            ),
            None,
        )
        if caller is None:
            return None, False
        call_ids = {c.get("id") for c in caller.tool_calls if isinstance(c, dict)}
        current = caller
        while True:
            answer = next(
                (n for n in self.children[current.id] if n.role == "tool" and n.tool_call_id in call_ids), None
            )
            if answer is None:
                return current, False
            if answer.tool_call_id == call_id:
                return answer, True
            current = answer


def _match_key(turn: Turn) -> str:
    """A tool result is the same message as another under the same parent when it answers the same call: the
    execute_tool span and the next model call's input may render one result differently (text vs. JSON)."""
    if turn.role == "tool" and turn.tool_call_id:
        return f"tool:{turn.tool_call_id}"
    return turn.key()


Groups = dict[str, list[ModelCall | ToolResult]]  # conversation external id -> its calls and results, in order


def traces_check(*, org: Org, read: ReadSpans) -> Groups:
    """Steps 1 and 2 of `traces_ingest`, which write nothing: the request's calls and tool results grouped by
    conversation, or the refusal (InvalidConversation, LimitExceeded) that writing them would meet."""
    groups = _grouped(read)
    limit = settings.MAX_OTLP_CONVERSATIONS_PER_REQUEST
    if len(groups) > limit:
        raise LimitExceeded(
            "MAX_OTLP_CONVERSATIONS_PER_REQUEST",
            limit,
            f"a request may write at most {limit} conversations; its spans belong to {len(groups)}: export "
            "smaller batches",
        )
    _planned(org, groups, lock=False)
    return groups


def traces_ingest(*, org: Org, groups: Groups, rejected: list[str]) -> IngestResult:
    """Write the model calls and tool results of one export request, as `traces_check` grouped them (steps 1 and
    2), in transactions of a bounded size; `rejected` are the request's spans already refused.

    1. Group by conversation: `gen_ai.conversation.id`, else the id another span of the same trace in this
       request names, else the trace id. Order each group by span start (then end, then span id). Refuse a
       request whose spans belong to more than MAX_OTLP_CONVERSATIONS_PER_REQUEST conversations.
    2. Plan every conversation on what is stored, without locking: lay every call onto its tree, attach each tool
       result after the call that requested it, and validate the new messages as the JSON API would (content,
       sizes, messages per conversation). A refusal here writes nothing.
    3. Write CONVERSATIONS_PER_TRANSACTION conversations per transaction, in external id order (so two requests
       lock in one order and cannot deadlock): lock the ones that exist, plan them again on what is stored now
       (another request may have written since step 2), and write them through `conversations_write`, as
       `conversation_upsert` (new) or `conversation_append` (existing) would each, from the messages the plan read,
       recording the span of every new message. No conversation's lock is held for more than one transaction.

    A limit that another writer's messages push a conversation over between steps 2 and 3 refuses the request with
    the earlier transactions committed; sending the request again writes only what is missing (message ids come
    from span ids).
    """
    rejected = list(rejected)
    written = messages = 0
    external_ids = sorted(groups)
    for start in range(0, len(external_ids), CONVERSATIONS_PER_TRANSACTION):
        with transaction.atomic():
            batch = {key: groups[key] for key in external_ids[start : start + CONVERSATIONS_PER_TRANSACTION]}
            plans, unanswered = _planned(org, batch, lock=True)
            rejected += unanswered
            writes = conversations_write(org=org, writes=[(plan.stored, plan.payload) for plan in plans])
            links = []
            for plan, write in zip(plans, writes, strict=True):
                links += [
                    SpanLink(
                        conversation=write.conversation,
                        message_external_id=message.id,
                        trace_id=origin.trace_id,
                        span_id=origin.span_id,
                        response_id=(response_id or "")[:200],
                    )
                    for message, origin, response_id in plan.new
                ]
                written += 1
                messages += len(plan.new)
            SpanLink.objects.bulk_create(links, ignore_conflicts=True)
    return IngestResult(written, messages, rejected)


@dataclass(frozen=True)
class _Plan:
    external_id: str
    stored: StoredConversation | None  # None: new
    new: list[tuple[MessageIn, SpanOrigin, str | None]]
    payload: ConversationIn | MessagesIn


def _planned(org: Org, groups: Groups, *, lock: bool) -> tuple[list[_Plan], list[str]]:
    """Each conversation's new messages laid on what is stored, validated and checked against the limits; with
    `lock`, the stored conversations are locked first, in external id order. Returns the plans of the
    conversations that gain messages, and the tool results that answer no call (rejected spans)."""
    stored_conversations = Conversation.objects.filter(org=org, external_id__in=list(groups)).order_by("external_id")
    if lock:
        stored_conversations = stored_conversations.select_for_update()
    stored = {c.external_id: c for c in stored_conversations}
    stored_messages: dict[int, list[Message]] = defaultdict(list)
    for message in Message.objects.filter(conversation__in=list(stored.values())):
        stored_messages[message.conversation_id].append(message)
    plans, rejected = [], []
    for external_id in sorted(groups):
        conversation = stored.get(external_id)
        tree = _Tree(stored_messages[conversation.pk] if conversation else [])
        application = end_user = None
        metadata = dict(conversation.metadata) if conversation else {}
        for item in groups[external_id]:
            application = application or item.origin.application
            end_user = end_user or item.origin.end_user
            _metadata_merge(metadata, item.origin.metadata)
            if isinstance(item, ModelCall):
                _lay_call(tree, item)
            elif not _attach_result(tree, item):
                rejected.append(
                    f"{item.origin.where} (execute_tool span {item.origin.span_id}): no assistant message in "
                    f"conversation {external_id!r} made tool call {item.call_id!r}"
                )
        if tree.new:
            payload = _validated(external_id, conversation, application, tree.new, end_user, metadata)
            conversation_limits_check(
                incoming=payload.messages,
                total=len(stored_messages[conversation.pk] if conversation else []) + len(tree.new),
            )
            stored_as = StoredConversation(conversation, stored_messages[conversation.pk]) if conversation else None
            plans.append(_Plan(external_id, stored_as, tree.new, payload))
    return plans, rejected


def _metadata_merge(metadata: dict[str, str], named: Iterable[tuple[str, str]]) -> None:
    """Lay a call's metadata over the conversation's: in call order, so the latest call's release is the
    conversation's. A name beyond the map's limit is left out, as a bad value is (`genai._metadata`)."""
    for key, value in named:
        if key in metadata or len(metadata) < METADATA_KEYS_MAX:
            metadata[key] = value


def conversation_key(read: ReadSpans) -> Callable[[SpanOrigin], str]:
    """The external id of the conversation a span belongs to: its `gen_ai.conversation.id` (or the convention's
    like), else the one another span of the same trace in the request names, else the trace id."""
    by_trace: dict[str, str] = {}
    for item in [*read.calls, *read.tool_results, *read.awaiting]:
        if item.origin.conversation_id:
            by_trace.setdefault(item.origin.trace_id, item.origin.conversation_id)
    return lambda origin: origin.conversation_id or by_trace.get(origin.trace_id) or origin.trace_id


def _grouped(read: ReadSpans) -> Groups:
    key = conversation_key(read)
    groups: dict[str, list[ModelCall | ToolResult]] = defaultdict(list)
    for item in [*read.calls, *read.tool_results]:
        groups[key(item.origin)].append(item)
    for awaited in read.awaiting:  # its conversation is marked as awaiting it: the id must be one too
        _external_id_checked(key(awaited.origin), awaited.origin.where)
    for external_id, items in groups.items():
        _external_id_checked(external_id, items[0].origin.where)
        items.sort(key=_call_order)
    return groups


def _external_id_checked(external_id: str, where: str) -> None:
    try:
        _EXTERNAL_ID.validate_python(external_id)
    except ValidationError as exc:
        raise InvalidConversation(
            f"{where} gen_ai.conversation.id: {exc.errors()[0]['msg']} (it becomes the conversation's external_id)"
        ) from None


def _call_order(item: ModelCall | ToolResult) -> tuple:
    origin = item.origin
    return (origin.started_at or origin.ended_at or _NEVER, origin.ended_at or _NEVER, origin.span_id)


_NEVER = datetime.max.replace(tzinfo=UTC)


def _lay_call(tree: _Tree, call: ModelCall) -> None:
    origin = call.origin
    parent_id: str | None = None
    for index, turn in enumerate(call.inputs):
        parent_id = tree.place(turn, parent_id, f"{origin.span_id}:in{index}", origin.started_at, origin).id
    for index, turn in enumerate(call.outputs):
        created_at = origin.ended_at or origin.started_at
        tree.place(turn, parent_id, f"{origin.span_id}:out{index}", created_at, origin, call.response_id)


def _attach_result(tree: _Tree, result: ToolResult) -> bool:
    parent, present = tree.answering_chain_end(result.call_id)
    if parent is None:
        return False
    if not present:
        turn = Turn("tool", result.content, tool_call_id=result.call_id)
        created_at = result.origin.ended_at or result.origin.started_at
        tree.place(turn, parent.id, f"{result.origin.span_id}:tool", created_at, result.origin)
    return True


def _validated(
    external_id: str,
    conversation: Conversation | None,
    application: str | None,
    new: list,
    end_user: str | None,
    metadata: dict[str, str],
) -> ConversationIn | MessagesIn:
    """The new messages as the JSON API's payload, validated as a posted one is (NUL, lone surrogates, sizes), with
    the end user a span named (`enduser.id`) and the metadata the spans name over the stored."""
    messages = [message.model_dump() for message, _, _ in new]
    named = {"end_user": end_user} if end_user is not None else {}
    if metadata != (conversation.metadata if conversation else {}):
        named["metadata"] = metadata
    try:
        if conversation is None:
            return ConversationIn.model_validate(
                {"external_id": external_id, "application": application, "messages": messages, **named}
            )
        return MessagesIn.model_validate({"messages": messages, **named})
    except ValidationError as exc:
        raise InvalidConversation(
            f"conversation {external_id!r}: " + "; ".join(_describe(error, new) for error in exc.errors()[:5])
        ) from None


def _describe(error: dict, new: list) -> str:
    """A validation error located at the span the message came from, not at a payload the client never sent."""
    loc = list(error["loc"])
    if len(loc) >= 2 and loc[0] == "messages" and isinstance(loc[1], int):
        message, origin, _ = new[loc[1]]
        field = ".".join(str(part) for part in loc[2:]) or "message"
        return f"{origin.where} (span {origin.span_id}), message {message.id}: {field}: {error['msg']}"
    return f"{'.'.join(str(part) for part in loc)}: {error['msg']}"

"""Reads of a conversation: its messages as evidence, its active path and whether it may be scored now, and its
state for the API."""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Field
from django.utils import timezone

from grading import evidence
from grading.models import Conversation, Message, Review
from grading.reviews.reads import current_review


def quiet_period() -> timedelta:
    return timedelta(minutes=settings.CONVERSATION_QUIET_MINUTES)


@dataclass(frozen=True)
class PathState:
    path: list[evidence.EvidenceMessage]
    not_scorable_reason: evidence.NotScorable | None


def conversation_path(
    conversation: Conversation, messages: list[evidence.EvidenceMessage] | None = None, now: datetime | None = None
) -> PathState:
    """The active path and whether it may be scored now: what grading judges and what the API reports."""
    if messages is None:
        messages = conversation_messages(conversation.pk)
    result = evidence.active_path(messages, conversation.active_message_id)
    reason = evidence.not_scorable_reason(
        result.path,
        closed=conversation.closed,
        last_activity=conversation.last_activity_at,
        now=now or timezone.now(),
        quiet_period=quiet_period(),
        path_problem=result.problem,
    )
    return PathState(result.path, reason)


def conversation_messages(conversation_id: int) -> list[evidence.EvidenceMessage]:
    """Every message of the conversation as evidence (`Message.as_evidence`), read as values: building a model
    instance per message would be most of the cost of reading a conversation for grading."""
    with connection.cursor() as cursor:
        cursor.execute(_MESSAGES_SQL, [conversation_id])
        rows = cursor.fetchall()
    return [evidence.EvidenceMessage(*as_python(_EVIDENCE_FIELDS, row)) for row in rows]


# Plain SQL: the ORM's values() read costs several times the CPU of the statement it sends, on every grading.
_EVIDENCE_FIELDS = [Message._meta.get_field(name) for name in Message.EVIDENCE_FIELDS]
_MESSAGES_SQL = f"""
    SELECT {", ".join(field.column for field in _EVIDENCE_FIELDS)} FROM grading_message WHERE conversation_id = %s
"""  # noqa: S608 - columns from the model


def as_python(fields: Sequence[Field], row: Sequence) -> list:
    """A row read by plain SQL, converted as the ORM converts those fields' columns (JSON decoded)."""
    return [
        field.from_db_value(value, None, connection) if value is not None and hasattr(field, "from_db_value") else value
        for field, value in zip(fields, row, strict=True)
    ]


@dataclass(frozen=True)
class ConversationState:
    conversation: Conversation
    path: list[evidence.EvidenceMessage]
    not_scorable_reason: evidence.NotScorable | None
    review: Review | None


def conversation_state(
    conversation: Conversation, messages: list[evidence.EvidenceMessage] | None = None, now: datetime | None = None
) -> ConversationState:
    path = conversation_path(conversation, messages, now)
    return ConversationState(conversation, path.path, path.not_scorable_reason, current_review(conversation))

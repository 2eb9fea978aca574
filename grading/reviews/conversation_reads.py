"""Reads of a conversation: its messages as evidence, its active path and whether it may be scored now, and its
state for the API."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from grading.core import evidence
from grading.models import Conversation, Review
from grading.reviews.reads import current_review
from grading.reviews.sql import conversation_messages


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
        content_awaited=conversation.content_awaited_since is not None,
    )
    return PathState(result.path, reason)


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

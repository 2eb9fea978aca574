"""Tollgate's Python client: `Tollgate` (blocking) and `AsyncTollgate` (asyncio), typed models, clear errors."""

from tollgate_client._core import Polling, Retries
from tollgate_client.client import AsyncTollgate, Tollgate
from tollgate_client.errors import (
    ApiError,
    ConfigurationError,
    FieldError,
    InvalidRequest,
    NotFound,
    TollgateError,
    TooLarge,
    TransportError,
    Unauthorized,
    Unavailable,
    WaitTimeout,
)
from tollgate_client.models import (
    AuditEvent,
    AuditEventsPage,
    Conversation,
    ConversationDetail,
    DraftStatus,
    Finding,
    Review,
    WhoAmI,
)

__all__ = [
    "ApiError",
    "AsyncTollgate",
    "AuditEvent",
    "AuditEventsPage",
    "ConfigurationError",
    "Conversation",
    "ConversationDetail",
    "DraftStatus",
    "FieldError",
    "Finding",
    "InvalidRequest",
    "NotFound",
    "Polling",
    "Retries",
    "Review",
    "Tollgate",
    "TollgateError",
    "TooLarge",
    "TransportError",
    "Unauthorized",
    "Unavailable",
    "WaitTimeout",
    "WhoAmI",
]

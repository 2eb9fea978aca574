"""The domain core both sides use: orgs, API keys, the audit trail, criteria, items, reviews and decisions.

One module per part of the model; Django and every caller read them here, as `grading.models`."""

from grading.models.criteria import (
    CriteriaTrial,
    CriteriaVersion,
    ItemKind,
    SlotsFor,
)
from grading.models.items import (
    EMBEDDING_DIMENSIONS,
    Article,
    Conversation,
    Draft,
    Feedback,
    MemoryItem,
    Message,
    MessageRole,
)
from grading.models.orgs import (
    ApiKey,
    AuditEvent,
    Org,
    new_webhook_secret,
)
from grading.models.reviews import (
    COUNTING_STATES,
    FOR_PEOPLE,
    LIVE_STATES,
    NO_JUDGE,
    Answer,
    Decision,
    Label,
    Review,
    ReviewQuerySet,
    ReviewState,
    Route,
    ServiceTarget,
    WebhookDelivery,
    for_people,
    state_now,
)
from grading.models.runs import (
    GradingRun,
    Rollup,
    RollupRebuild,
)

__all__ = [
    "Answer",
    "ApiKey",
    "Article",
    "AuditEvent",
    "COUNTING_STATES",
    "Conversation",
    "CriteriaTrial",
    "CriteriaVersion",
    "Decision",
    "Draft",
    "EMBEDDING_DIMENSIONS",
    "FOR_PEOPLE",
    "Feedback",
    "GradingRun",
    "ItemKind",
    "LIVE_STATES",
    "Label",
    "MemoryItem",
    "Message",
    "MessageRole",
    "NO_JUDGE",
    "Org",
    "Review",
    "ReviewQuerySet",
    "ReviewState",
    "Rollup",
    "RollupRebuild",
    "Route",
    "ServiceTarget",
    "SlotsFor",
    "WebhookDelivery",
    "for_people",
    "new_webhook_secret",
    "state_now",
]

"""What the client returns: dataclasses mirroring the API's answers.

A model with `SCHEMA` mirrors that schema of the OpenAPI document (/api/v1/openapi.json) field for field, and a test
of the repository fails when the two drift apart. The draft status is answered untyped by the server (`dict`), so
`DraftStatus` is checked against real answers instead. Fields the server adds later are ignored, not refused: an
older client keeps working against a newer server."""

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, TypeVar

T = TypeVar("T")


def from_json(cls: type[T], data: Any) -> T:
    """`cls` built from a JSON object, nested models and lists of them included; unknown keys are dropped."""
    hints = typing.get_type_hints(cls)
    values = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name in data:
            values[f.name] = _converted(hints[f.name], data[f.name])
    return cls(**values)


def _converted(hint: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        for option in typing.get_args(hint):
            if option is not type(None):
                return _converted(option, value)
    if origin is list:
        (item,) = typing.get_args(hint)
        return [_converted(item, v) for v in value]
    if dataclasses.is_dataclass(hint) and isinstance(value, dict):
        return from_json(hint, value)
    if hint is datetime and isinstance(value, str):
        return datetime.fromisoformat(value)
    return value


@dataclass(frozen=True)
class WhoAmI:
    SCHEMA: ClassVar[str] = "WhoAmI"
    org: str
    key_name: str  # the org key's name, or the personal token's
    person: str | None = None  # the username a personal token acts as; None for an org's key


# --- drafts -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DraftAccepted:
    SCHEMA: ClassVar[str] = "DraftAccepted"
    id: int
    status_url: str
    route: str


@dataclass(frozen=True)
class Finding:
    """A broken rule: `spans` are [start, end) character offsets into the checked body (the repaired one when the
    gate repaired the draft: `DraftStatus.repairs`)."""

    code: str
    message: str
    severity: str
    spans: list[list[int]] = field(default_factory=list)
    subject: str = ""


PENDING = "pending"
PASS = "pass"  # noqa: S105 - a route, not a password
FAIL = "fail"
HUMAN = "human"


@dataclass(frozen=True)
class DraftStatus:
    """A draft's verdict as GET /api/v1/drafts/{id} answers it. `route` is `pending` until graded, then `pass`,
    `fail`, `human` (people decide), `not_scorable` or `error`."""

    id: int
    external_id: str
    route: str
    run_id: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    reason: str | None = None
    state: str | None = None
    score: float | None = None
    spread: float | None = None
    sub_scores: dict[str, Any] | None = None
    checks: dict[str, Any] | None = None
    findings: list[Finding] = field(default_factory=list)
    judge_issues: list[Any] = field(default_factory=list)
    repairs: dict[str, Any] | None = None
    identity: dict[str, Any] | None = None
    decision: dict[str, Any] | None = None
    confidences: dict[str, float] | None = None
    confidence_source: str | None = None
    certificate: dict[str, Any] | None = None
    waiting: dict[str, Any] | None = None
    correction: dict[str, Any] | None = None

    @property
    def graded(self) -> bool:
        return self.route != PENDING


# --- conversations ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReviewIdentity:
    SCHEMA: ClassVar[str] = "ReviewIdentityOut"
    fingerprint: str
    criteria_version: int
    criteria_fingerprint: str
    judge: dict[str, Any]
    judged_at: datetime
    stages: int


@dataclass(frozen=True)
class Certificate:
    SCHEMA: ClassVar[str] = "CertificateOut"
    id: int
    computed_at: datetime
    agreement: float
    confidence: float


@dataclass(frozen=True)
class Review:
    SCHEMA: ClassVar[str] = "ReviewOut"
    route: str
    reason: str
    checks: dict[str, Any]
    identity: ReviewIdentity
    state: str
    is_current: bool
    confidences: dict[str, float]
    confidence_source: str
    certificate: Certificate | None


@dataclass(frozen=True)
class Conversation:
    SCHEMA: ClassVar[str] = "ConversationOut"
    external_id: str
    fingerprint: str
    scorable: bool
    not_scorable_reason: str | None
    active_path: list[str]
    branch_count: int
    metadata: dict[str, str]
    review: Review | None
    waiting: dict[str, Any] | None = None


@dataclass(frozen=True)
class Message:
    SCHEMA: ClassVar[str] = "CanonicalMessage"
    id: str
    role: str
    content: str | list[dict[str, Any]] | None
    tool_calls: list[dict[str, Any]] | None
    tool_call_id: str | None
    name: str | None


@dataclass(frozen=True)
class ConversationDetail(Conversation):
    """A conversation with its active path's messages and people's expected replies."""

    SCHEMA: ClassVar[str] = "ConversationDetailOut"
    messages: list[Message] = field(default_factory=list)
    expected_replies: list[dict[str, Any]] = field(default_factory=list)


# --- the audit trail ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ApiKeyRef:
    SCHEMA: ClassVar[str] = "ApiKeyOut"
    id: int
    name: str
    prefix: str


@dataclass(frozen=True)
class AuditObject:
    SCHEMA: ClassVar[str] = "AuditObjectOut"
    type: str
    id: str


@dataclass(frozen=True)
class AuditItem:
    SCHEMA: ClassVar[str] = "AuditItemOut"
    kind: str
    id: int


@dataclass(frozen=True)
class AuditEvent:
    SCHEMA: ClassVar[str] = "AuditEventOut"
    id: int
    at: datetime
    action: str
    actor: str | None
    api_key: ApiKeyRef | None
    object: AuditObject | None
    item: AuditItem | None
    detail: dict[str, Any]


@dataclass(frozen=True)
class AuditEventsPage:
    SCHEMA: ClassVar[str] = "AuditEventsOut"
    events: list[AuditEvent]
    next: str | None


MODELS_WITH_SCHEMAS: tuple[type, ...] = (
    WhoAmI,
    DraftAccepted,
    ReviewIdentity,
    Certificate,
    Review,
    Conversation,
    Message,
    ConversationDetail,
    ApiKeyRef,
    AuditObject,
    AuditItem,
    AuditEvent,
    AuditEventsPage,
)

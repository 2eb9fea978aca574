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


# --- criteria versions, trials, publishing --------------------------------------------------------------------


@dataclass(frozen=True)
class VersionRef:
    SCHEMA: ClassVar[str] = "VersionRef"
    id: int
    number: int


@dataclass(frozen=True)
class VersionSummary:
    SCHEMA: ClassVar[str] = "VersionSummaryOut"
    id: int
    kind: str
    number: int
    state: str
    created_at: datetime
    published_at: datetime | None
    based_on: VersionRef | None
    author: str | None
    revision: int
    judge: str
    checks: list[str]


@dataclass(frozen=True)
class Version(VersionSummary):
    """A version with everything it asks: what `criteria edit` changes."""

    SCHEMA: ClassVar[str] = "VersionOut"
    updated_at: datetime | None
    updated_by: str | None
    rubric: str
    rules: dict[str, Any] | None
    threshold: float | None
    band: float | None
    check_set: dict[str, Any]
    judge_configured: bool
    routing: list[Any]
    slots: int
    slots_for: str
    slots_share: int
    examples: int
    certification: dict[str, Any]


@dataclass(frozen=True)
class TrialItem:
    SCHEMA: ClassVar[str] = "TrialItemOut"
    kind: str
    id: int
    external_id: str
    judge_calls: int


@dataclass(frozen=True)
class CapWarning:
    SCHEMA: ClassVar[str] = "CapWarningOut"
    scope: str
    period: str
    measure: str
    spent: int
    estimate: int | None
    limit: int
    message: str


@dataclass(frozen=True)
class Spend:
    SCHEMA: ClassVar[str] = "SpendOut"
    judge_calls: int
    tokens: int | None
    cost_micros: int | None
    warnings: list[CapWarning]


@dataclass(frozen=True)
class TrialCount:
    SCHEMA: ClassVar[str] = "TrialCountOut"
    version: VersionRef
    k: int
    source: str
    items: list[TrialItem]
    judge_calls: int
    spend: Spend


@dataclass(frozen=True)
class Trial:
    SCHEMA: ClassVar[str] = "TrialOut"
    id: int
    version: VersionRef
    source: str
    items: int
    judge_calls: int
    graded: int
    requested_at: datetime
    finished_at: datetime | None


@dataclass(frozen=True)
class StaleGroup:
    SCHEMA: ClassVar[str] = "StaleGroupOut"
    application: str
    reviews: int
    judge_calls: int


@dataclass(frozen=True)
class PublishPlan:
    SCHEMA: ClassVar[str] = "PlanOut"
    version: VersionRef
    replaces: VersionRef | None
    made_at: datetime
    judge: str
    judge_configured: bool
    judge_changes: bool
    stale: int
    groups: list[StaleGroup]
    decided: int
    items: int
    waiting: int
    judge_calls: int
    tokens: int | None
    spend: Spend
    pass_cap: int
    next_pass_takes_at_least: int
    next_pass_takes_at_most: int
    passes: int


@dataclass(frozen=True)
class Published:
    SCHEMA: ClassVar[str] = "PublishedOut"
    version: Version
    published_now: bool
    replaced: VersionRef | None
    grading_pass: dict[str, Any] | None


# --- the queue (a person's token) --------------------------------------------------------------------------------


@dataclass(frozen=True)
class QueueRow:
    SCHEMA: ClassVar[str] = "QueueRowOut"
    review: int
    kind: str
    title: str
    context: str
    blind: bool
    reason: str
    reason_label: str
    summary: str
    checks: list[list[str]]
    criteria: str
    waiting: str
    due: str
    overdue: bool
    mine: bool
    held_by: str
    places: str
    assigned: str
    not_claimable: str
    page_url: str


@dataclass(frozen=True)
class QueuePage:
    SCHEMA: ClassVar[str] = "QueuePageOut"
    items: list[QueueRow]
    total: int
    total_label: str
    next: int | None


@dataclass(frozen=True)
class CheckAsked:
    SCHEMA: ClassVar[str] = "CheckAskedOut"
    key: str
    name: str
    question: str
    answers: list[str]


@dataclass(frozen=True)
class Claim:
    SCHEMA: ClassVar[str] = "ClaimOut"
    review: int
    kind: str
    title: str
    fingerprint: str
    expires_at: datetime
    outcomes: list[str]
    checks: list[CheckAsked]
    page_url: str


@dataclass(frozen=True)
class ClaimNext:
    SCHEMA: ClassVar[str] = "ClaimNextOut"
    claimed: Claim | None


@dataclass(frozen=True)
class DecisionResult:
    SCHEMA: ClassVar[str] = "DecisionOut"
    review: int
    answered: bool
    decided: bool
    outcome: str | None
    learning_error: str | None


# --- regression sets ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RegressionSet:
    SCHEMA: ClassVar[str] = "SetOut"
    name: str
    kind: str
    built_from: dict[str, Any]
    items: int
    skipped: int
    erased: int
    created_at: datetime
    last_run: dict[str, Any] | None


@dataclass(frozen=True)
class RegressionRun:
    SCHEMA: ClassVar[str] = "RunOut"
    id: int
    set: str
    criteria_version: int
    min_agreement: float | None
    state: str
    started_at: datetime
    finished_at: datetime | None
    items: int
    graded: int
    errors: int
    held_by_spend_cap: int
    checks: dict[str, dict[str, Any]]
    overall: dict[str, Any]
    passed: bool | None  # None while running, or without a min_agreement
    changed_count: int
    changed: list[dict[str, Any]]


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
    VersionRef,
    VersionSummary,
    Version,
    TrialItem,
    CapWarning,
    Spend,
    TrialCount,
    Trial,
    StaleGroup,
    PublishPlan,
    Published,
    QueueRow,
    QueuePage,
    CheckAsked,
    Claim,
    ClaimNext,
    DecisionResult,
    RegressionSet,
    RegressionRun,
)

"""The pipelines' HTTP API under /api/v1/ (django-ninja: typed endpoints and an OpenAPI document)."""

from datetime import datetime
from http.client import responses as HTTP_RESPONSES
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import connection
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from ninja import NinjaAPI, Query, Schema, Status
from ninja.errors import HttpError, ValidationError
from ninja.openapi.schema import OpenAPISchema
from ninja.operation import Operation
from ninja.security import HttpBearer
from pydantic import BaseModel, model_validator

from grading.api import health
from grading.api.audit import router as audit_router
from grading.api.corrections import router as corrections_router
from grading.api.criteria import router as criteria_router
from grading.api.criteria import trial_results_out
from grading.api.erasures import router as erasures_router
from grading.api.errors import AUTH_ERRORS, FieldErrorsOut
from grading.api.expected_replies import ExpectedReplyOut, expected_replies_out
from grading.api.keys import Caller, caller_authenticate, caller_reach
from grading.api.sets import router as sets_router
from grading.api.spend_caps import router as spend_caps_router
from grading.certify.reads import certification_json
from grading.checks.rules import rules_as_text
from grading.conversations.ingest import ConversationWrite, conversation_append, conversation_upsert, feedback_record
from grading.core.errors import ConversationNotFound, LimitExceeded, NotFound
from grading.core.evidence import canonical_message
from grading.core.request_json import InvalidJsonBody, RequestJsonParser
from grading.core.schemas import ArticleIn, ConversationId, ConversationIn, DraftIn, FeedbackIn, MemoryIn, MessagesIn
from grading.core.spreadsheets import csv_lines
from grading.criteria.scoring import is_scored, trial_figures, trial_rows, trial_score
from grading.dashboard.certified import CERTIFIED, certified_figures
from grading.dashboard.compare import comparison, slices_checked
from grading.dashboard.figures import SECTIONS, InvalidScope, dashboard_figures, scope_for
from grading.dashboard.labels import LabelIn, LabelsRefused, labels_submit
from grading.drafts.submit import draft_submit
from grading.models import Article, Conversation, CriteriaTrial, CriteriaVersion, Draft, ItemKind, Org, Review
from grading.models.reach import Reach
from grading.otlp.views import router as otlp_router
from grading.reviews.conversation_reads import ConversationState, conversation_state
from grading.reviews.draft_reads import draft_status
from grading.reviews.memory import InvalidMemory, article_upsert, memory_add
from grading.reviews.reads import current_review, review_confidence_json
from grading.reviews.spend import spend_overview, spend_overview_json, spend_waiting
from grading.reviews.versions import criteria_active


class OrgApiKey(HttpBearer):
    """`Authorization: Bearer <org API key>` or a person's token; `request.auth` becomes the Caller (the ApiKey, or
    the person in one org of theirs), and through it the org."""

    def authenticate(self, request: HttpRequest, token: str) -> Caller | None:
        return caller_authenticate(request, token)


class _Document(OpenAPISchema):
    """The OpenAPI document, each operation declaring the refusals every route can answer besides its own: 401 (no
    live credential) and 403 (a personal token's role or reach does not take it) wherever a credential is asked, and
    400 naming the fields wherever a body or parameters are read."""

    def responses(self, operation: Operation) -> dict[int, dict]:
        declared = super().responses(operation)
        shared: dict[int, type[Schema]] = dict(AUTH_ERRORS) if operation.auth_callbacks else {}
        if operation.models:
            shared[400] = FieldErrorsOut
        for status, model in shared.items():
            if status not in declared:
                schema = self._create_schema_from_model(model, by_alias=operation.by_alias, mode="serialization")[0]
                declared[status] = {
                    "description": HTTP_RESPONSES[status],
                    "content": {self.api.renderer.media_type: {"schema": schema}},
                }
        return declared


class TollgateApi(NinjaAPI):
    def get_openapi_schema(self, *, path_prefix: str | None = None, path_params: dict | None = None) -> _Document:
        if path_prefix is None:
            path_prefix = self.get_root_path(path_params or {})
        return _Document(self, path_prefix)

    def get_openapi_operation_id(self, operation: Operation) -> str:
        """The operation ids clients generate code from, kept as they were before the views left `grading/api.py`:
        ninja derives them from the view's module, which is no part of the API."""
        module = operation.view_func.__module__
        module = {"grading.api.views": "grading.api"}.get(module, module)
        return f"{module}_{operation.view_func.__name__}".replace(".", "_")


api = TollgateApi(
    title="Tollgate API",
    version="1",
    description="Submit drafts and conversations, read verdicts. Every call is scoped to the org of its API key.",
    auth=OrgApiKey(),
    urls_namespace="api",
    parser=RequestJsonParser(),
)
# OTLP/HTTP exporters append /v1/traces to OTEL_EXPORTER_OTLP_ENDPOINT=<host>/api/v1/otlp.
api.add_router("/otlp", otlp_router)
api.add_router("/", audit_router)
api.add_router("/", erasures_router)
api.add_router("/", corrections_router)
api.add_router("/", sets_router)
api.add_router("/", criteria_router)
api.add_router("/", spend_caps_router)


class WhoAmI(Schema):
    org: str
    key_name: str  # the org key's name, or the personal token's
    person: str | None = None  # the username a personal token acts as; null for an org's key


@api.get("/whoami", response=WhoAmI, summary="The org and key (or person and token) this credential belongs to")
def whoami(request: HttpRequest) -> WhoAmI:
    person = request.auth.person
    return WhoAmI(
        org=request.auth.org.slug, key_name=request.auth.name, person=person.get_username() if person else None
    )


class ServiceStatus(Schema):
    ok: bool
    detail: str


class WorkerStatus(ServiceStatus):
    count: int


class HealthReport(Schema):
    ok: bool
    database: ServiceStatus
    redis: ServiceStatus
    workers: WorkerStatus


@api.get("/health", response={200: HealthReport, 503: HealthReport}, summary="Database, Redis and worker liveness")
def get_health(request: HttpRequest) -> Status[HealthReport]:
    database = ServiceStatus(**health.database_status(connection))
    redis = ServiceStatus(**health.redis_status())
    workers = WorkerStatus(**health.worker_status())
    ok = database.ok and redis.ok and workers.ok
    report = HealthReport(ok=ok, database=database, redis=redis, workers=workers)
    return Status(200 if ok else 503, report)


# --- errors: 400 naming the field, 404, 413 naming the limit ------------------------------------------


def _field_errors(request: HttpRequest, problems: list[dict]):
    summary = "; ".join(f"{p['field']}: {p['message']}" for p in problems)
    return api.create_response(request, {"detail": summary, "errors": problems}, status=400)


@api.exception_handler(ValidationError)
def validation_failed(request: HttpRequest, exc: ValidationError):
    return _field_errors(
        request,
        [
            {
                # The payload as a whole (not an object, missing) is the field "body".
                "field": ".".join(str(part) for part in error["loc"] if part not in ("body", "payload")) or "body",
                "message": error["msg"],
            }
            for error in exc.errors
        ],
    )


@api.exception_handler(HttpError)
def http_error(request: HttpRequest, exc: HttpError):
    if exc.status_code == 400:  # django-ninja's one 400 of its own: a body it could not parse
        cause = exc.__cause__
        message = str(cause) if isinstance(cause, InvalidJsonBody) else "is not JSON text in UTF-8"
        return _field_errors(request, [{"field": "body", "message": message}])
    return api.create_response(request, {"detail": str(exc)}, status=exc.status_code)


@api.exception_handler(LimitExceeded)
def limit_exceeded(request: HttpRequest, exc: LimitExceeded):
    return api.create_response(request, {"detail": str(exc), "limit": exc.limit, "value": exc.value}, status=413)


@api.exception_handler(RequestDataTooBig)
def request_too_big(request: HttpRequest, exc: RequestDataTooBig):
    detail = f"the request body is over MAX_REQUEST_BYTES ({settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes)"
    return api.create_response(
        request,
        {"detail": detail, "limit": "MAX_REQUEST_BYTES", "value": settings.DATA_UPLOAD_MAX_MEMORY_SIZE},
        status=413,
    )


@api.exception_handler(NotFound)
def not_found(request: HttpRequest, exc: NotFound):
    detail = f"no conversation or message {exc}" if isinstance(exc, ConversationNotFound) else str(exc)
    return api.create_response(request, {"detail": detail}, status=404)


# --- conversations -----------------------------------------------------------------------------------


class ReviewIdentityOut(Schema):
    fingerprint: str
    criteria_version: int
    criteria_fingerprint: str  # of what the judge read of the criteria: rubric, rules, checks, examples ("" before 23)
    judge: dict
    judged_at: datetime
    stages: int


class CertificateOut(Schema):
    """The certificate a review was routed under: computed when, for which target (agreement 1-alpha, confidence
    1-delta)."""

    id: int
    computed_at: datetime
    agreement: float
    confidence: float


class ReviewOut(Schema):
    route: str
    reason: str
    checks: dict
    identity: ReviewIdentityOut
    state: str
    is_current: bool
    confidences: dict[str, float]  # check key -> the probability the judge gave its answer, 0 to 1
    confidence_source: str  # "logprobs", or "" with no confidences
    certificate: CertificateOut | None  # null: routed by the fixed bands


class ConversationOut(Schema):
    external_id: str
    fingerprint: str
    scorable: bool
    not_scorable_reason: str | None
    active_path: list[str]
    branch_count: int
    metadata: dict[str, str]  # what produced it (release, model, ...): shown and sliced by, never evidence
    review: ReviewOut | None
    waiting: dict | None = None  # no review counts and a spend cap holds its grading: {"reason": "spend_cap", ...}


class CanonicalMessage(Schema):
    id: str
    role: str
    content: str | list[dict[str, Any]] | None
    tool_calls: list[dict[str, Any]] | None
    tool_call_id: str | None
    name: str | None


class ConversationDetailOut(ConversationOut):
    messages: list[CanonicalMessage]
    expected_replies: list[ExpectedReplyOut]  # people's, once blind review lets the org see them


def review_out(review: Review) -> dict:
    return {
        "route": review.route,
        "reason": review.reason,
        "checks": review.checks,
        "identity": {
            "fingerprint": review.fingerprint,
            "criteria_version": review.criteria_version.number,
            "criteria_fingerprint": review.criteria_fingerprint,
            "judge": review.judge,
            "judged_at": review.finished_at,
            "stages": review.stages,
        },
        "state": review.state_now,
        "is_current": review.counts_now,
        **review_confidence_json(review),
    }


def conversation_out(state: ConversationState, *, with_messages: bool = False) -> dict:
    body = _conversation_body(state.conversation, state.not_scorable_reason, state.review)
    if with_messages:
        body["messages"] = [canonical_message(m) for m in state.path]
    return body


def written_out(write: ConversationWrite) -> dict:
    """The answer to a write, from what the write computed: an append reads none of the earlier messages."""
    conversation = write.conversation
    return _conversation_body(conversation, write.not_scorable_reason, current_review(conversation))


def _conversation_body(conversation: Conversation, not_scorable_reason: str | None, review: Review | None) -> dict:
    return {
        "external_id": conversation.external_id,
        "fingerprint": conversation.fingerprint,
        "scorable": not_scorable_reason is None,
        "not_scorable_reason": not_scorable_reason,
        "active_path": conversation.active_path_ids,  # the write keeps it equal to the path's ids
        "branch_count": conversation.branch_count,
        "metadata": conversation.metadata,
        "review": review_out(review) if review else None,
        "waiting": _spend_waiting(conversation) if review is None and not_scorable_reason is None else None,
    }


def _spend_waiting(conversation: Conversation) -> dict | None:
    blocked = spend_waiting(org_id=conversation.org_id, kind=ItemKind.CONVERSATION)
    return blocked.as_json() if blocked else None


@api.post("/conversations", response={200: ConversationOut, 201: ConversationOut}, summary="Upsert a conversation")
def post_conversation(request: HttpRequest, payload: ConversationIn) -> Status[ConversationOut]:
    write = conversation_upsert(org=request.auth.org, payload=payload)
    return Status(201 if write.created else 200, written_out(write))


@api.post("/conversations/{external_id}/messages", response=ConversationOut, summary="Append (or edit) messages by id")
def post_messages(request: HttpRequest, external_id: ConversationId, payload: MessagesIn) -> dict:
    write = conversation_append(org=request.auth.org, external_id=external_id, payload=payload)
    return written_out(write)


@api.get("/conversations/{external_id}", response=ConversationDetailOut, summary="A conversation's evidence and review")
def get_conversation(request: HttpRequest, external_id: ConversationId) -> dict:
    return conversation_detail(org=request.auth.org, external_id=external_id)


def conversation_detail(*, org: Org, external_id: str) -> dict:
    """A conversation's evidence and review as the API answers it (the MCP server answers the same)."""
    conversation = Conversation.objects.filter(org=org, external_id=external_id).first()
    if conversation is None:
        raise ConversationNotFound(external_id)
    return conversation_out(conversation_state(conversation), with_messages=True) | {
        "expected_replies": expected_replies_out(conversation)
    }


class FeedbackOut(Schema):
    conversation: str
    message_id: str
    value: str


@api.post("/feedback", response={201: FeedbackOut}, summary="A user's thumbs up or down on a message")
def post_feedback(request: HttpRequest, payload: FeedbackIn) -> Status[FeedbackOut]:
    feedback_record(org=request.auth.org, payload=payload)
    return Status(
        201, FeedbackOut(conversation=payload.conversation, message_id=payload.message_id, value=payload.value)
    )


# --- drafts ------------------------------------------------------------------------------------------------


class DraftAccepted(Schema):
    id: int
    status_url: str
    route: str


@api.post("/drafts", response={202: DraftAccepted}, summary="Submit a draft to the gate")
def post_draft(request: HttpRequest, payload: DraftIn) -> Status[DraftAccepted]:
    draft = draft_submit(org=request.auth.org, payload=payload)
    status_url = request.build_absolute_uri(reverse("api:get_draft", kwargs={"draft_id": draft.pk}))
    return Status(202, DraftAccepted(id=draft.pk, status_url=status_url, route="pending"))


@api.get("/drafts/{draft_id}", response=dict, url_name="get_draft", summary="A draft's verdict, findings and identity")
def get_draft(request: HttpRequest, draft_id: int) -> dict:
    return draft_detail(org=request.auth.org, draft_id=draft_id)


def draft_detail(*, org: Org, draft_id: int) -> dict:
    draft = Draft.objects.filter(org=org, pk=draft_id).first()
    if draft is None:
        raise NotFound(f"no draft {draft_id}")
    return draft_status(draft)


@api.get("/criteria/draft/writer-rules", response=dict, summary="The active draft rules, for a writer's prompt")
def writer_rules(request: HttpRequest, format: str = "json"):
    """The single source of the writing rules: the checks read the same document. `?format=text` gives
    plain text to paste into a writer prompt."""
    criteria = criteria_active(org=request.auth.org, kind=ItemKind.DRAFT)
    rules = criteria.draft_rules()
    if format == "text":
        return HttpResponse(rules_as_text(rules), content_type="text/plain; charset=utf-8")
    if format != "json":
        raise ValidationError([{"loc": ["query", "format"], "msg": "must be json or text"}])
    return {"criteria_version": criteria.number, "rules": rules.model_dump(mode="json")}


@api.get("/criteria/{kind}", response=dict, summary="What a criteria version asks: the active one, or ?number=")
def get_criteria(request: HttpRequest, kind: str, number: int | None = None) -> dict:
    """A version's checks in the order the judge and people read them (key, name, question, answer kind, guidance
    per answer, whether required, categories or scale and what passes, rules) and whether the judge is still asked
    once a rule has failed a required check. Labels, answers and exports name checks by these keys. `certification`:
    the target the machine decides alone under, and the latest certificate for it (null: none)."""
    return criteria_out(org=request.auth.org, kind=kind, number=number)


def criteria_out(*, org: Org, kind: str, number: int | None) -> dict:
    """What `GET /criteria/{kind}` answers: the active version of `kind`, or version `number`."""
    if kind not in ItemKind.values:
        raise NotFound(f"no criteria of kind {kind!r}: draft or conversation")
    if number is None:
        version = criteria_active(org=org, kind=kind)
    else:
        version = CriteriaVersion.objects.filter(org=org, kind=kind, number=number).first()
        if version is None:
            raise NotFound(f"no {kind} criteria version {number}")
    return {
        "kind": kind,
        "criteria_version": version.number,
        "active": version.is_active,
        "published_at": version.published_at,
        **version.check_set().model_dump(mode="json"),
        "certification": certification_json(version),
    }


# --- org memory ----------------------------------------------------------------------------------------------


class MemoryOut(Schema):
    id: int
    kind: str
    text: str
    proof_terms: list[str]
    active: bool


class ArticleOut(Schema):
    id: int
    slug: str
    title: str


@api.post(
    "/memory", response={201: MemoryOut}, summary="Add a learning, the strategy (replaces the active one) or a fact"
)
def post_memory(request: HttpRequest, payload: MemoryIn) -> Status[MemoryOut]:
    try:
        item = memory_add(org=request.auth.org, kind=payload.kind, text=payload.text, proof_terms=payload.proof_terms)
    except InvalidMemory as exc:
        raise ValidationError([{"loc": ["body", "payload"], "msg": str(exc)}]) from exc
    return Status(201, item)


@api.post("/articles", response=ArticleOut, summary="Add or update a published article (an internal-link target)")
def post_article(request: HttpRequest, payload: ArticleIn) -> Article:
    return article_upsert(org=request.auth.org, slug=payload.slug, title=payload.title, summary=payload.summary)


# --- human labels from elsewhere -----------------------------------------------------------------------------


class LabelsIn(BaseModel):
    labels: list[LabelIn]

    @model_validator(mode="before")
    @classmethod
    def _within_the_limit(cls, data: Any) -> Any:
        # Counted before any label is validated, which would cost seconds for a body of ten times the limit.
        # LimitExceeded is not a ValueError: pydantic lets it through, to the 413 handler.
        labels = data.get("labels") if isinstance(data, dict) else None
        limit = settings.MAX_LABELS_PER_REQUEST
        if isinstance(labels, list) and len(labels) > limit:
            raise LimitExceeded(
                "MAX_LABELS_PER_REQUEST", limit, f"at most {limit} labels per request; this one has {len(labels)}"
            )
        return data


class LabelsOut(Schema):
    created: int
    updated: int
    unchanged: int


@api.post("/labels", response={201: LabelsOut}, summary="Record human labels, each bound to its item's evidence now")
def post_labels(request: HttpRequest, payload: LabelsIn) -> Status[LabelsOut]:
    """All or nothing: a label that cannot be recorded is a 400 naming it (`labels.3.item`) and none is written;
    over MAX_LABELS_PER_REQUEST labels, a 413 naming it. Recording the same labels again changes nothing, so a
    request cut short (its labels are committed a batch at a time) is finished by sending it again."""
    try:
        counts = labels_submit(
            org=request.auth.org, labels=payload.labels, source=f"api:{request.auth.name}", api_key=request.auth
        )
    except LabelsRefused as exc:
        raise ValidationError(
            [
                {"loc": ["body", "payload", "labels", index, why.field], "msg": why.message}
                for index, why in exc.refusals
            ]
        ) from exc
    return Status(201, LabelsOut(**counts))


# --- the dashboards' figures ---------------------------------------------------------------------------------


def _figures(
    request: HttpRequest, sections, since: str | None, until: str | None, application: str | None, slice: str | None
) -> dict:
    try:
        return figures_out(
            org=request.auth.org, sections=sections, since=since, until=until, application=application, slice=slice,
            reach=caller_reach(request.auth),
        )  # fmt: skip
    except InvalidScope as exc:
        raise ValidationError([{"loc": ["query", exc.field], "msg": exc.message}]) from exc


def figures_out(
    *, org: Org, sections: list[str], since: str | None, until: str | None, application: str | None,
    slice: str | None, reach: Reach | None = None,
) -> dict:  # fmt: skip
    """What `GET /dashboard` (and `/dashboard/{section}`) answers, within `reach` (None: the whole org);
    InvalidScope names a bad filter."""
    scope = scope_for(org, since=since, until=until, application=application, reach=reach, slices=[slice or ""])
    if sections == [CERTIFIED]:
        return dashboard_figures(scope, sections=[]) | {CERTIFIED: certified_figures(scope)}
    return dashboard_figures(scope, sections=sections)


@api.get("/dashboard", response=dict, summary="Every figure of the dashboard, with the page's filters")
def get_dashboard(
    request: HttpRequest, since: str | None = Query(None, alias="from"), until: str | None = Query(None, alias="to"),
    application: str | None = None, slice: str | None = None,
) -> dict:  # fmt: skip
    """The numbers the stakeholders' page shows, for the API key's org: `from` and `to` are ISO weeks
    (`2026-W41`, default the last eight), `application` narrows the conversation figures, `slice` (`release=2.4`,
    one of the org's dimensions) to the reviews filed under that value. The quality rate with its
    interval from the audit sample is the section `certified` (`/dashboard/certified`): it reads people's audit
    decisions and the audited reviews besides the counters, so it is asked for apart, as the page loads it apart."""
    return _figures(request, SECTIONS, since, until, application, slice)


@api.get("/dashboard/compare", response=dict, summary="Two slices of a dimension side by side, under one version")
def get_dashboard_compare(
    request: HttpRequest, dimension: str, a: str, b: str, since: str | None = Query(None, alias="from"),
    until: str | None = Query(None, alias="to"), application: str | None = None, kind: str = ItemKind.CONVERSATION,
) -> dict:  # fmt: skip
    """The comparison page's figures (grading/dashboard/compare.py): `dimension` one of the org's, `a` and `b` two
    of its values (`?dimension=release&a=2.3&b=2.4`); per check each side's pass rate with its unknowns and Wilson
    interval, the difference b - a with Newcombe's hybrid score interval and a two-proportion z-test, the volume.
    Registered before `/dashboard/{section}`, which would otherwise take `compare` for a section."""
    try:
        if kind not in ItemKind.values:
            raise InvalidScope("kind", f"must be one of {', '.join(ItemKind.values)}")
        reach = caller_reach(request.auth)
        scope = scope_for(request.auth.org, since=since, until=until, application=application, reach=reach)
        return comparison(scope, slices_checked(scope, dimension=dimension, a=a, b=b), kind=kind)
    except InvalidScope as exc:
        raise ValidationError([{"loc": ["query", exc.field], "msg": exc.message}]) from exc


@api.get("/dashboard/{section}", response=dict, summary="One section of the dashboard's figures")
def get_dashboard_section(
    request: HttpRequest, section: str, since: str | None = Query(None, alias="from"),
    until: str | None = Query(None, alias="to"), application: str | None = None, slice: str | None = None,
) -> dict:  # fmt: skip
    if section not in (*SECTIONS, CERTIFIED):
        raise NotFound(f"no dashboard section {section!r} (there are {', '.join((*SECTIONS, CERTIFIED))})")
    return _figures(request, [section], since, until, application, slice)


# --- criteria trials -----------------------------------------------------------------------------------


@api.get("/criteria/trials/{trial_id}", response=dict, summary="A criteria trial's agreement with people and its spend")
def get_criteria_trial(request: HttpRequest, trial_id: int, format: str = "json"):
    """The trial result page's figures: per check, the trial version's and the active version's agreement with
    people on the same items (the dashboard's agreement shape), the verdicts that changed, the judge calls and
    tokens; a trial compared with the current reviews lists each item's current and trial review as `results`.
    `?format=csv` gives the trial's items, one row each."""
    trial = CriteriaTrial.objects.select_related("criteria_version").filter(org=request.auth.org, pk=trial_id).first()
    if trial is None:
        raise NotFound(f"no trial {trial_id}")
    if format not in ("json", "csv"):
        raise ValidationError([{"loc": ["query", "format"], "msg": "must be json or csv"}])
    if format == "csv":
        rows = csv_lines(trial_rows(trial_score(trial)))
        response = HttpResponse("".join(rows), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="trial-{trial.pk}.csv"'
        return response
    score = trial_figures(trial)
    if is_scored(trial):
        return score.as_json()
    return score.as_json() | {"results": trial_results_out(trial)}


# --- judge spend ---------------------------------------------------------------------------------------------


@api.get("/spend", response=dict, summary="Judge spend against the spend caps, per day and week")
def get_spend(request: HttpRequest) -> dict:
    """The spend page's figures for the API key's org: each cap with what it counts in its period (today in UTC,
    or this ISO week), and this week's judge calls, tokens and cost per criteria version and judge."""
    return spend_overview_json(spend_overview(org_id=request.auth.org_id))

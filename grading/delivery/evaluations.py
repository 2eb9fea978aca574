"""Verdicts out: every review and operator decision as OpenTelemetry `gen_ai.evaluation.result` log records.

One record per check the review's criteria version asks (conversations: a verdict or a category as the label, a
score as the value; drafts: each score check's score, and the overall score), with the attributes the GenAI
conventions name (`gen_ai.evaluation.name`, `.score.value`, `.score.label`, `.explanation`,
`gen_ai.response.id`) and Tollgate's score identity beside them (`tollgate.*`: fingerprint, criteria version,
judge, review id, the certificate it was routed under). A judge's record carries how sure the judge was of that
answer (`tollgate.confidence`, a draft's overall its verdict's, with `tollgate.confidence.source`). A
conversation that arrived by OTLP is linked to the span of its last answer (the record's trace and span ids), so
the producer's tracing backend shows the verdict on the call it judged.

Sent as OTLP/HTTP protobuf by a Celery task after the review or decision commits, never inside grading; a failed
try is recorded (EvaluationExport) and retried with backoff and jitter up to OTLP_EVALUATIONS_MAX_ATTEMPTS.
"""

from __future__ import annotations

import random
import urllib.error
import urllib.request
from datetime import datetime, timedelta
from typing import NamedTuple

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, Q
from django.utils import timezone
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import SEVERITY_NUMBER_INFO, LogRecord

from grading.checks.definitions import AnswerKind, CheckSet
from grading.delivery import enqueue
from grading.models import UNGRADED, Decision, ItemKind, Label, Review
from grading.models.otlp import EvaluationExport, SpanLink

EVENT_NAME = "gen_ai.evaluation.result"
SCOPE = "tollgate.grading"
VERDICT_SCORES = {"pass": 1.0, "fail": 0.0}  # `unknown` has no value: it established nothing
# Non-2xx answers worth another try (OTLP/HTTP: 429, 502, 503, 504); anything else will not change.
RETRYABLE_STATUSES = frozenset({408, 429, 502, 503, 504})


def exports_enabled() -> bool:
    return bool(settings.OTLP_EVALUATIONS_ENDPOINT)


def evaluations_export_on_commit(*, review_id: int, decision_id: int | None = None) -> None:
    """Queue the review's (or, with `decision_id`, the operator decision's) evaluation records for after commit.
    The one hook grading and the queue call; a no-op unless an endpoint is configured."""
    if not exports_enabled():
        return
    event = EvaluationExport.Event.DECISION if decision_id is not None else EvaluationExport.Event.REVIEW
    transaction.on_commit(lambda: enqueue.evaluations_export(review_id=review_id, event=event), robust=True)


def evaluation_records(review: Review, event: str) -> list[LogRecord]:
    """The log records for a review (its machine verdicts) or its decision (the operator's verdicts)."""
    identity = _identity(review)
    trace_id, span_id, response_id = _link(review)
    if response_id:
        identity["gen_ai.response.id"] = response_id
    if event == EvaluationExport.Event.DECISION:
        decision = Decision.objects.filter(review=review).select_related("decided_by").first()
        if decision is None:
            return []
        identity |= {
            "tollgate.source": "operator",
            "tollgate.decided_by": decision.decided_by.get_username() if decision.decided_by else "",
        }
        at = decision.decided_at
        if review.kind == ItemKind.CONVERSATION:
            asked = review.criteria_version.check_set()
            scores = [
                _Score(name, *_label_and_value(asked, name, decision.checks[name]), decision.note)
                for name in _in_check_order(asked, decision.checks)
            ]
        else:
            scores = [_Score("operator_decision", decision.outcome, None, decision.note)]
    else:
        identity["tollgate.source"] = "judge"
        at = review.finished_at
        scores = _machine_scores(review)
    records = []
    for score in scores:
        attributes = dict(identity)
        attributes["gen_ai.evaluation.name"] = score.name
        if score.label:
            attributes["gen_ai.evaluation.score.label"] = score.label
        if score.value is not None:
            attributes["gen_ai.evaluation.score.value"] = float(score.value)
        if score.explanation:
            attributes["gen_ai.evaluation.explanation"] = score.explanation
        if score.confidence is not None:
            attributes["tollgate.confidence"] = float(score.confidence)
            attributes["tollgate.confidence.source"] = review.confidence_source
        record = LogRecord(
            time_unix_nano=_nanoseconds(at),
            observed_time_unix_nano=_nanoseconds(at),
            severity_number=SEVERITY_NUMBER_INFO,
            severity_text="INFO",
            event_name=EVENT_NAME,
            trace_id=bytes.fromhex(trace_id) if trace_id else b"",
            span_id=bytes.fromhex(span_id) if span_id else b"",
        )
        record.attributes.extend(_key_values(attributes))
        records.append(record)
    return records


class _Score(NamedTuple):
    """One record's verdict: the check's key, its label and value, the explanation, and the judge's confidence."""

    name: str
    label: str | None
    value: float | None
    explanation: str
    confidence: float | None = None


def _machine_scores(review: Review) -> list[_Score]:
    if review.route in UNGRADED:
        return []  # nothing was judged: no verdict to report
    asked = review.criteria_version.check_set()
    confidences = review.confidences or {}
    if review.kind == ItemKind.CONVERSATION:
        return [
            _Score(
                name, *_label_and_value(asked, name, check.get("verdict")), check.get("rationale", ""),
                confidences.get(name),
            )
            for name, check in ((name, review.checks[name]) for name in _in_check_order(asked, review.checks))
        ]  # fmt: skip
    sub_scores = review.sub_scores or {}
    scores = [
        _Score(name, None, sub_scores[name], "", confidences.get(name))
        for name in _in_check_order(asked, sub_scores)
        if sub_scores[name] is not None
    ]
    issues = "; ".join(issue.get("issue", "") for issue in review.judge_issues if isinstance(issue, dict))
    findings = "; ".join(f.get("message", "") for f in review.findings if isinstance(f, dict))
    # The overall record carries the route: its confidence is the judge's in its verdict.
    verdict = _Score("overall", review.route, review.score, findings or issues, confidences.get(Label.PASS_FAIL))
    return [*scores, verdict]


def _in_check_order(asked: CheckSet, checks: dict) -> list[str]:
    """The version's order of its checks (JSON columns do not keep one), then any other name."""
    return [name for name in asked.keys if name in checks] + sorted(set(checks) - set(asked.keys))


def _label_and_value(asked: CheckSet, name: str, answer: object) -> tuple[str | None, float | None]:
    """A check's answer as the conventions' label and value: a verdict as its label with 1 or 0 for pass or fail; a
    category as its label; a score as its value (unknown, which establishes nothing, as a label without one)."""
    kind = asked[name].kind if name in asked.keys else AnswerKind.VERDICT
    if kind == AnswerKind.SCORE and isinstance(answer, str) and answer.isdigit():
        return None, float(answer)
    if kind == AnswerKind.VERDICT:
        return answer, VERDICT_SCORES.get(answer)
    return answer, None


def _identity(review: Review) -> dict:
    judge = review.judge or {}
    subject = review.conversation if review.kind == ItemKind.CONVERSATION else review.draft
    return {
        "tollgate.review.id": review.pk,
        "tollgate.item.kind": review.kind,
        "tollgate.item.external_id": subject.external_id if subject else "",
        "tollgate.route": review.route,
        "tollgate.fingerprint": review.fingerprint,
        "tollgate.criteria_version": review.criteria_version.number,
        "tollgate.judge.backend": str(judge.get("backend", "")),
        "tollgate.judge.model": str(judge.get("model", "")),
        "tollgate.judge.prompt_hash": str(judge.get("prompt_hash", "")),
        "tollgate.stages": review.stages,
        **({"tollgate.certificate.id": review.certificate_id} if review.certificate_id is not None else {}),
    }


def _link(review: Review) -> tuple[str, str, str]:
    """(trace id, span id, response id) of the newest message on the judged path that arrived by OTLP."""
    if review.conversation is None:
        return "", "", ""
    path = review.conversation.active_path_ids or []
    links = {
        link.message_external_id: link
        for link in SpanLink.objects.filter(conversation=review.conversation, message_external_id__in=path)
    }
    for message_id in reversed(path):
        if message_id in links:
            link = links[message_id]
            return link.trace_id, link.span_id, link.response_id
    return "", "", ""


def _nanoseconds(at: datetime) -> int:
    return int(at.timestamp() * 1_000_000_000)


def _key_values(attributes: dict) -> list[KeyValue]:
    values = []
    for key, value in attributes.items():
        if isinstance(value, bool):
            any_value = AnyValue(bool_value=value)
        elif isinstance(value, int):
            any_value = AnyValue(int_value=value)
        elif isinstance(value, float):
            any_value = AnyValue(double_value=value)
        else:
            any_value = AnyValue(string_value=str(value))
        values.append(KeyValue(key=key, value=any_value))
    return values


def export_request(records: list[LogRecord]) -> ExportLogsServiceRequest:
    request = ExportLogsServiceRequest()
    resource_logs = request.resource_logs.add()
    resource_logs.resource.attributes.extend(_key_values({"service.name": "tollgate"}))
    scope_logs = resource_logs.scope_logs.add()
    scope_logs.scope.name = SCOPE
    scope_logs.log_records.extend(records)
    return request


def evaluations_send(*, review: Review, event: str, attempt: int) -> EvaluationExport | None:
    """POST the records once and record the try (`final` when no retry should follow); None when the review
    has no verdict to report (not scorable, or the judge failed) or was erased meanwhile."""
    records = evaluation_records(review, event)
    endpoint = settings.OTLP_EVALUATIONS_ENDPOINT
    if not records:
        return None
    body = export_request(records).SerializeToString()
    request = urllib.request.Request(  # noqa: S310 - an http(s) URL checked when settings load
        endpoint,
        data=body,
        method="POST",
        headers={
            **settings.OTLP_EVALUATIONS_HEADERS,
            "Content-Type": "application/x-protobuf",
            "User-Agent": "Tollgate-Evaluations/1",
        },  # fmt: skip
    )
    status, error = None, ""
    try:
        with urllib.request.urlopen(request, timeout=settings.OTLP_EVALUATIONS_TIMEOUT_SECONDS) as response:  # noqa: S310
            status = response.status
    except urllib.error.HTTPError as exc:
        status, error = exc.code, f"HTTP {exc.code}: {exc.read(500).decode('utf-8', 'replace')}"
    except (urllib.error.URLError, OSError) as exc:
        error = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
    delivered = status is not None and 200 <= status < 300
    retryable = not delivered and (status is None or status in RETRYABLE_STATUSES)
    try:
        with transaction.atomic():
            return EvaluationExport.objects.create(
                review=review,
                event=event,
                endpoint=endpoint,
                attempt=attempt,
                records=len(records),
                status_code=status,
                error=error,
                delivered=delivered,
                final=not retryable or attempt >= settings.OTLP_EVALUATIONS_MAX_ATTEMPTS,
            )
    except IntegrityError:  # the item was erased while its records were on the way: no log of it is kept
        return None


def retry_delay(attempt: int) -> float:
    """Exponential backoff with full jitter, capped."""
    base = settings.OTLP_EVALUATIONS_RETRY_BASE_SECONDS
    return random.uniform(0, min(settings.OTLP_EVALUATIONS_RETRY_CAP_SECONDS, base * 2 ** (attempt - 1)))


def evaluation_export_status(org_id: int | None = None, *, hours: int = 24) -> dict:
    """How the `gen_ai.evaluation.result` export fares: tries delivered, given up and still retrying over
    the last `hours`, and the latest failure. Read by the dashboard beside the staleness audit."""
    tries = EvaluationExport.objects.filter(at__gte=timezone.now() - timedelta(hours=hours))
    if org_id is not None:
        tries = tries.filter(review__org_id=org_id)
    counts = tries.aggregate(
        delivered_count=Count("pk", filter=Q(delivered=True)),
        given_up=Count("pk", filter=Q(delivered=False, final=True)),
        failed_tries=Count("pk", filter=Q(delivered=False)),
    )
    last_failure = tries.filter(delivered=False).order_by("-at").first()
    return {
        "enabled": bool(settings.OTLP_EVALUATIONS_ENDPOINT),
        "endpoint": settings.OTLP_EVALUATIONS_ENDPOINT,
        "hours": hours,
        "delivered": counts["delivered_count"],
        "given_up": counts["given_up"],
        "failed_tries": counts["failed_tries"],
        "last_error": (last_failure.error or f"HTTP {last_failure.status_code}") if last_failure else "",
        "last_error_at": last_failure.at if last_failure else None,
    }

"""`POST /api/v1/otlp/v1/traces` and `/v1/logs`: the OTLP/HTTP trace and log endpoints, so a standard exporter
needs only `OTEL_EXPORTER_OTLP_ENDPOINT=https://tollgate.example/api/v1/otlp` and `Authorization=Bearer <org API
key>`. Logs carry the messages of model calls whose spans do not (the instrumentations' default).

The router inherits the API's key authentication. Answers follow the OTLP/HTTP specification: 200 with an
`Export{Trace,Logs}ServiceResponse` (its `partial_success` counts the spans or records that could not become
evidence and says why, or, with none rejected, warns of what waits), 400 for a request that is not valid OTLP
or whose content cannot be read (nothing of it is written), 413 over a limit, 415 for another content type or
encoding; failures carry a `google.rpc.Status`.

A request is bounded so that a worker serves it well inside its timeout: MAX_OTLP_SPANS_PER_REQUEST spans (or
MAX_OTLP_LOG_RECORDS_PER_REQUEST records) and MAX_OTLP_CONVERSATIONS_PER_REQUEST conversations. Beyond either
the answer is 413 naming the limit, never a retryable status: the specification forbids an exporter to retry a
413, so it drops the batch or (configured smaller) sends smaller ones, instead of sending again a request that
can never fit. What the org keeps waiting for its other part is capped too, but a part beyond those caps is
rejected in `partial_success` and the rest of the request kept (grading/otlp/pending.py says why).
"""

from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from ninja import Router
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from grading.core.errors import LimitExceeded
from grading.models import Org
from grading.otlp import wire
from grading.otlp.genai import ContentError, read_spans, spans_in
from grading.otlp.logs import read_logs, records_in
from grading.otlp.pending import logs_receive, spans_receive
from grading.otlp.receiver import IngestResult, InvalidConversation

router = Router(tags=["OpenTelemetry"])
NOTES_SHOWN = 5


def _request_body(name: str) -> dict:
    return {
        "requestBody": {
            "required": True,
            "content": {
                wire.PROTOBUF: {"schema": {"type": "string", "format": "binary"}},
                wire.JSON: {"schema": {"type": "object", "description": f"{name} in OTLP/JSON"}},
            },
        }
    }


@router.post(
    "/v1/traces",
    summary="OTLP/HTTP traces: GenAI spans become conversations",
    openapi_extra=_request_body("ExportTraceServiceRequest"),
    response={200: None, 400: None, 413: None, 415: None},
)
def post_traces(request: HttpRequest) -> HttpResponse:
    def receive(org: Org, export: Any) -> IngestResult:
        spans = sum(1 for _ in spans_in(export))
        _at_most(spans, "spans", "MAX_OTLP_SPANS_PER_REQUEST", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE")
        return spans_receive(org=org, read=read_spans(export))

    return _export(request, wire.TRACES, receive, ExportTraceServiceResponse(), "rejected_spans")


@router.post(
    "/v1/logs",
    summary="OTLP/HTTP logs: GenAI content events join their model calls' spans",
    openapi_extra=_request_body("ExportLogsServiceRequest"),
    response={200: None, 400: None, 413: None, 415: None},
)
def post_logs(request: HttpRequest) -> HttpResponse:
    def receive(org: Org, export: Any) -> IngestResult:
        records = sum(1 for _ in records_in(export))
        _at_most(records, "log records", "MAX_OTLP_LOG_RECORDS_PER_REQUEST", "OTEL_BLRP_MAX_EXPORT_BATCH_SIZE")
        return logs_receive(org=org, read=read_logs(export))

    return _export(request, wire.LOGS, receive, ExportLogsServiceResponse(), "rejected_log_records")


def _export(
    request: HttpRequest,
    signal: wire.Signal,
    receive: Callable[[Org, Any], IngestResult],
    response: ExportTraceServiceResponse | ExportLogsServiceResponse,
    rejected_field: str,
) -> HttpResponse:
    """One export request, either signal: decoded, bounded, received; the OTLP answer."""
    content_type = wire.media_type(request.headers.get("Content-Type", ""))
    answer_as = content_type if content_type in wire.CONTENT_TYPES else wire.JSON
    try:
        if content_type not in wire.CONTENT_TYPES:
            raise wire.WireError(415, f"Content-Type must be {wire.PROTOBUF} or {wire.JSON}, not {content_type!r}")
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        try:
            raw = request.body
        except RequestDataTooBig:
            raise wire.WireError(413, f"the request body is over MAX_REQUEST_BYTES ({limit} bytes)") from None
        body = wire.decompressed(raw, request.headers.get("Content-Encoding", ""), limit=limit)
        result = receive(request.auth.org, wire.export_request(body, content_type, signal))
    except wire.WireError as exc:
        return _failure(exc.status, exc.message, answer_as)
    except (ContentError, InvalidConversation) as exc:
        return _failure(400, str(exc), answer_as)
    except LimitExceeded as exc:
        return _failure(413, f"{exc} ({exc.limit})", answer_as)
    if result.rejected or result.warnings:
        # With nothing rejected the message is a warning, as the specification allows.
        setattr(response.partial_success, rejected_field, len(result.rejected))
        response.partial_success.error_message = _summary(result.rejected, result.warnings)
    return HttpResponse(wire.encode(response, answer_as), content_type=answer_as)


def _at_most(count: int, what: str, setting: str, exporter_setting: str) -> None:
    most = getattr(settings, setting)
    if count > most:
        raise wire.WireError(
            413,
            f"the request holds {count} {what}; {setting} ({most}) is the most one may hold: export smaller "
            f"batches (the SDK's {exporter_setting}, a Collector's send_batch_max_size)",
            limit=setting,
        )


def _summary(rejected: list[str], warnings: Iterable[str]) -> str:
    parts = []
    if rejected:
        shown = "; ".join(rejected[:NOTES_SHOWN]) + ("; ..." if len(rejected) > NOTES_SHOWN else "")
        parts.append(f"{len(rejected)} rejected: {shown}")
    return ". ".join([*parts, *warnings])


def _failure(status: int, message: str, content_type: str) -> HttpResponse:
    code = wire.RESOURCE_EXHAUSTED if status == 413 else wire.INVALID_ARGUMENT
    return HttpResponse(wire.status_body(code, message, content_type), status=status, content_type=content_type)

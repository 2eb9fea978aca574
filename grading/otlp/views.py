"""`POST /api/v1/otlp/v1/traces`: the OTLP/HTTP trace endpoint, so a standard exporter needs only
`OTEL_EXPORTER_OTLP_ENDPOINT=https://tollgate.example/api/v1/otlp` and `Authorization=Bearer <org API key>`.

The router inherits the API's key authentication. Answers follow the OTLP/HTTP specification: 200 with an
`ExportTraceServiceResponse` (its `partial_success` counts the spans that could not become evidence and says
why), 400 for a request that is not valid OTLP or whose content cannot be read (nothing of it is written),
413 over a limit, 415 for another content type or encoding; failures carry a `google.rpc.Status`.

A request is bounded so that a worker serves it well inside its timeout: MAX_OTLP_SPANS_PER_REQUEST spans and
MAX_OTLP_CONVERSATIONS_PER_REQUEST conversations. Beyond either the answer is 413 naming the limit, never a
retryable status: the specification forbids an exporter to retry a 413, so it drops the batch or (configured
smaller) sends smaller ones, instead of sending again a request that can never fit.
"""

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from ninja import Router
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from grading.errors import LimitExceeded
from grading.otlp import wire
from grading.otlp.genai import ContentError, read_spans, spans_in
from grading.otlp.receiver import InvalidConversation, traces_ingest

router = Router(tags=["OpenTelemetry"])

_REQUEST_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            wire.PROTOBUF: {"schema": {"type": "string", "format": "binary"}},
            wire.JSON: {"schema": {"type": "object", "description": "ExportTraceServiceRequest in OTLP/JSON"}},
        },
    }
}


@router.post(
    "/v1/traces",
    summary="OTLP/HTTP traces: GenAI spans become conversations",
    openapi_extra=_REQUEST_BODY,
    response={200: None, 400: None, 413: None, 415: None},
)
def post_traces(request: HttpRequest) -> HttpResponse:
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
        export = wire.trace_request(body, content_type)
        spans, max_spans = sum(1 for _ in spans_in(export)), settings.MAX_OTLP_SPANS_PER_REQUEST
        if spans > max_spans:
            raise wire.WireError(
                413,
                f"the request holds {spans} spans; MAX_OTLP_SPANS_PER_REQUEST ({max_spans}) is the most one may "
                "hold: export smaller batches (the SDK's OTEL_BSP_MAX_EXPORT_BATCH_SIZE, a Collector's "
                "send_batch_max_size)",
                limit="MAX_OTLP_SPANS_PER_REQUEST",
            )
        result = traces_ingest(org=request.auth.org, read=read_spans(export))
    except wire.WireError as exc:
        return _failure(exc.status, exc.message, answer_as)
    except (ContentError, InvalidConversation) as exc:
        return _failure(400, str(exc), answer_as)
    except LimitExceeded as exc:
        return _failure(413, f"{exc} ({exc.limit})", answer_as)
    response = ExportTraceServiceResponse()
    if result.rejected_spans or result.error_message:
        response.partial_success.rejected_spans = result.rejected_spans
        response.partial_success.error_message = result.error_message
    return HttpResponse(wire.encode(response, answer_as), content_type=answer_as)


def _failure(status: int, message: str, content_type: str) -> HttpResponse:
    code = wire.RESOURCE_EXHAUSTED if status == 413 else wire.INVALID_ARGUMENT
    return HttpResponse(wire.status_body(code, message, content_type), status=status, content_type=content_type)

"""OTLP/HTTP on the wire: content types, gzip, the two encodings of an export request, and the answers.

Follows the OTLP/HTTP specification: a body is `application/x-protobuf` (binary protobuf) or `application/json`
(the protobuf JSON mapping, except that trace and span ids are hex strings, not base64), optionally
`Content-Encoding: gzip`; the answer is an `Export{Trace,Logs}ServiceResponse` in the request's encoding, and a failure
is a `google.rpc.Status` in the request's encoding. Unknown fields are ignored, as the specification requires of
receivers (a newer exporter must not be refused for a field this one does not know).
"""

import base64
import binascii
import json
import zlib
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from grading.core.request_json import InvalidJsonBody, request_json

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
CONTENT_TYPES = (PROTOBUF, JSON)
# google.rpc.Code values the specification pairs with these HTTP statuses.
INVALID_ARGUMENT = 3
RESOURCE_EXHAUSTED = 8


class WireError(Exception):
    """A request refused before anything was read from it; `status` is the HTTP status, the message says why."""

    def __init__(self, status: int, message: str, *, limit: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.limit = limit


def media_type(content_type_header: str) -> str:
    return content_type_header.split(";", 1)[0].strip().lower()


def decompressed(body: bytes, content_encoding: str, *, limit: int) -> bytes:
    """The body with its Content-Encoding undone, never more than `limit` bytes of it (a gzip bomb stops here)."""
    encoding = content_encoding.strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding != "gzip":
        raise WireError(415, f"Content-Encoding {content_encoding!r} is not supported; send gzip or none")
    inflater = zlib.decompressobj(wbits=zlib.MAX_WBITS | 16)
    try:
        inflated = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise WireError(400, f"the body is not valid gzip: {exc}") from None
    if len(inflated) > limit:
        raise WireError(
            413,
            f"the decompressed body is over MAX_REQUEST_BYTES ({limit} bytes)",
            limit="MAX_REQUEST_BYTES",
        )
    if not inflater.eof:
        raise WireError(400, "the gzip body is truncated")
    if inflater.unused_data:
        raise WireError(400, "the gzip body has trailing data after its end")
    return inflated


@dataclass(frozen=True)
class Signal:
    """One kind of export request: its message, and where OTLP/JSON nests the items whose ids are hex."""

    request: type[Message]
    resources: tuple[str, str]  # each field as OTLP/JSON spells it, and as the protobuf names it
    scopes: tuple[str, str]
    items: tuple[str, str]
    nested: tuple[str, ...] = ()  # lists inside an item that hold ids too (a span's links)


TRACES = Signal(
    ExportTraceServiceRequest,
    ("resourceSpans", "resource_spans"),
    ("scopeSpans", "scope_spans"),
    ("spans", "spans"),
    nested=("links",),
)
LOGS = Signal(
    ExportLogsServiceRequest,
    ("resourceLogs", "resource_logs"),
    ("scopeLogs", "scope_logs"),
    ("logRecords", "log_records"),
)


def export_request(body: bytes, content_type: str, signal: Signal) -> Any:
    """The body as the signal's export request (ExportTraceServiceRequest, ExportLogsServiceRequest)."""
    name = signal.request.__name__
    if content_type == PROTOBUF:
        try:
            return signal.request.FromString(body)
        except DecodeError as exc:
            raise WireError(400, f"the body is not an {name}: {exc}") from None
    try:
        document = request_json(body, refuse_constants=True)
    except InvalidJsonBody as exc:
        raise WireError(400, f"the body {exc}") from None
    if not isinstance(document, dict):
        raise WireError(400, f"the body must be a JSON object (an {name})")
    _hex_ids_to_base64(document, signal)
    try:
        return json_format.ParseDict(document, signal.request(), ignore_unknown_fields=True)
    except (json_format.ParseError, RecursionError) as exc:
        raise WireError(400, f"the body is not an {name}: {str(exc).rstrip('.')}") from None


# Where OTLP/JSON puts ids (either spelling of each field name is accepted, as in the protobuf JSON mapping).
_ID_FIELDS = {"traceId": 16, "trace_id": 16, "spanId": 8, "span_id": 8, "parentSpanId": 8, "parent_span_id": 8}


def _hex_ids_to_base64(document: dict, signal: Signal) -> None:
    """OTLP/JSON writes ids as hex, where the generic protobuf JSON mapping expects base64: convert in place."""
    for r, resource in enumerate(_items(document, *signal.resources, "")):
        for s, scope in enumerate(_items(resource, *signal.scopes, f"{signal.resources[0]}[{r}]")):
            where = f"{signal.resources[0]}[{r}].{signal.scopes[0]}[{s}]"
            for n, item in enumerate(_items(scope, *signal.items, where)):
                spot = f"{where}.{signal.items[0]}[{n}]"
                _convert_ids(item, spot)
                for nested in signal.nested:
                    for k, inner in enumerate(_items(item, nested, nested, spot)):
                        _convert_ids(inner, f"{spot}.{nested}[{k}]")


def _items(container: Any, name: str, other_name: str, where: str) -> list:
    if not isinstance(container, dict):
        raise WireError(400, f"{where or 'the body'} must be a JSON object")
    value = container.get(name, container.get(other_name, []))
    if value is None:
        return []
    if not isinstance(value, list):
        raise WireError(400, f"{where + '.' if where else ''}{name} must be a JSON array")
    return value


def _convert_ids(container: Any, where: str) -> None:
    if not isinstance(container, dict):
        raise WireError(400, f"{where} must be a JSON object")
    for field, size in _ID_FIELDS.items():
        if field not in container or container[field] in (None, ""):
            continue
        value = container[field]
        if not isinstance(value, str) or len(value) != size * 2:
            raise WireError(400, f"{where}.{field} must be {size * 2} hex digits")
        try:
            container[field] = base64.b64encode(bytes.fromhex(value)).decode()
        except ValueError:
            raise WireError(400, f"{where}.{field} must be {size * 2} hex digits") from None


def encode(message: Message, content_type: str) -> bytes:
    if content_type == PROTOBUF:
        return message.SerializeToString()
    return json_format.MessageToJson(message, indent=None).encode()


def status_body(code: int, message: str, content_type: str) -> bytes:
    """A google.rpc.Status {code, message}. Its two scalar fields are encoded by hand: the schema lives in
    googleapis-common-protos, a whole package for two fields."""
    if content_type != PROTOBUF:
        return json.dumps({"code": code, "message": message}).encode()
    text = message.encode("utf-8", "replace")
    return b"\x08" + _varint(code) + b"\x12" + _varint(len(text)) + text


def _varint(number: int) -> bytes:
    out = bytearray()
    while True:
        byte = number & 0x7F
        number >>= 7
        if number:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def hex_id(raw: bytes) -> str:
    return binascii.hexlify(raw).decode()

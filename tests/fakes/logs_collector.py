"""A loopback OTLP/HTTP logs receiver built from opentelemetry-proto: it decodes what it is sent as a real
collector would, keeps the records, and answers with scripted statuses (200 once the script runs out)."""

from __future__ import annotations

import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest, ExportLogsServiceResponse


def attribute_dict(key_values) -> dict[str, Any]:
    values = {}
    for kv in key_values:
        kind = kv.value.WhichOneof("value")
        values[kv.key] = getattr(kv.value, kind) if kind else None
    return values


class LogsCollector:
    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, str], ExportLogsServiceRequest]] = []
        self.statuses: deque[int] = deque()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status = collector.statuses.popleft() if collector.statuses else 200
                headers = {key.lower(): value for key, value in self.headers.items()}
                if status == 200:
                    collector.requests.append((headers, ExportLogsServiceRequest.FromString(body)))
                answer = ExportLogsServiceResponse().SerializeToString() if status == 200 else b"unavailable"
                self.send_response(status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1/logs"

    def __enter__(self) -> LogsCollector:
        self.thread.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def records(self) -> list[tuple[dict, dict, Any]]:
        """(resource attributes, record attributes, record) for every record received, in order."""
        out = []
        for _, request in self.requests:
            for resource_logs in request.resource_logs:
                resource = attribute_dict(resource_logs.resource.attributes)
                for scope_logs in resource_logs.scope_logs:
                    for record in scope_logs.log_records:
                        out.append((resource, attribute_dict(record.attributes), record))
        return out

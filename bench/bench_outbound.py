"""Webhook tries through the guarded outbound client against the client it replaced (urllib, 10 s per read).

1. A receiver that dribbles one header line every half second for twice the deadline: how long one try holds
   a worker. The old client's timeout was per read, so only the receiver decided when the try ended (in
   production, the task time limit: 15 minutes). The guarded client ends it at WEBHOOK_TIMEOUT_SECONDS.
2. A receiver that answers at once, 300 times: what the guard (resolving and checking, the pinned connection,
   the deadline's watchdog thread) costs per request, in wall time and in this process's CPU time.

Receivers run in child processes, so the CPU time measured is the client's alone.

Run: `make bench`, or `.venv/bin/python -c "import bench.bench_outbound as b; b.main()"` (with Django set up).
"""

from __future__ import annotations

import multiprocessing
import socket
import time
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from django.conf import settings
from django.test import override_settings

from grading.core.outbound import OutboundError, outbound_request

DRIBBLE_INTERVAL = 0.5
FAST_REQUESTS = 300
BODY = b'{"event": "machine_verdict"}'


def _dribble_forever(listener: socket.socket, lines: int) -> None:
    while True:
        connection, _ = listener.accept()
        with connection:
            connection.recv(65536)
            try:
                connection.sendall(b"HTTP/1.1 200 OK\r\n")
                for line in range(lines):
                    time.sleep(DRIBBLE_INTERVAL)
                    connection.sendall(f"X-Dribble-{line}: still here\r\n".encode())
                connection.sendall(b"Content-Length: 0\r\n\r\n")
            except OSError:
                pass


def _answer_at_once(listener: socket.socket) -> None:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(listener.getsockname(), Handler, bind_and_activate=False)
    server.socket.close()
    server.socket = listener
    server.serve_forever()


def _receiver(target: Callable, *args) -> tuple[multiprocessing.Process, str]:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    process = multiprocessing.get_context("fork").Process(target=target, args=(listener, *args), daemon=True)
    process.start()
    listener.close()  # the child holds it
    return process, f"http://127.0.0.1:{port}/hooks/tollgate"


def old_client(url: str) -> str:
    """What grading/drafts/webhooks.py did before: urllib with a 10 s timeout, per socket operation."""
    headers = {"Content-Type": "application/json"}
    request = urllib.request.Request(url, data=BODY, method="POST", headers=headers)  # noqa: S310 - loopback
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - a loopback bench receiver
            return f"HTTP {response.status}"
    except OSError as exc:
        return f"{type(exc).__name__}"


def new_client(url: str) -> str:
    try:
        response = outbound_request(
            method="POST",
            url=url,
            headers={"Content-Type": "application/json"},
            body=BODY,
            deadline_seconds=settings.WEBHOOK_TIMEOUT_SECONDS,
        )
    except OutboundError as exc:
        return f"{type(exc).__name__}"
    return f"HTTP {response.status}"


def _timed(send: Callable[[str], str], url: str, times: int = 1) -> tuple[float, float, str]:
    wall, cpu = time.perf_counter(), time.process_time()
    outcome = ""
    for _ in range(times):
        outcome = send(url)
    return time.perf_counter() - wall, time.process_time() - cpu, outcome


def main() -> None:
    deadline = settings.WEBHOOK_TIMEOUT_SECONDS
    lines = int(2 * deadline / DRIBBLE_INTERVAL)
    with override_settings(OUTBOUND_ALLOWED_NETWORKS=["127.0.0.1/32"]):
        slow, slow_url = _receiver(_dribble_forever, lines)
        fast, fast_url = _receiver(_answer_at_once)
        try:
            print(f"a receiver dribbling a header line every {DRIBBLE_INTERVAL:g} s for {lines * DRIBBLE_INTERVAL:g} s")
            old_wall, old_cpu, old_outcome = _timed(old_client, slow_url)
            new_wall, new_cpu, new_outcome = _timed(new_client, slow_url)
            print(
                f"  old client (10 s per read):   {old_wall:6.2f} s wall  {old_cpu * 1e3:6.1f} ms CPU  -> {old_outcome}"
            )
            print(
                f"  guarded ({deadline:g} s in all):     {new_wall:6.2f} s wall  {new_cpu * 1e3:6.1f} ms CPU"
                f"  -> {new_outcome}"
            )
            print(f"  guarded/old wall: {new_wall / old_wall:.2f}x (the old try lasts as long as the receiver likes)")

            _timed(old_client, fast_url, 20)  # warm both: imports, the CA bundle is not loaded for http
            _timed(new_client, fast_url, 20)
            print(f"a receiver answering at once, {FAST_REQUESTS} requests")
            old_wall, old_cpu, _ = _timed(old_client, fast_url, FAST_REQUESTS)
            new_wall, new_cpu, _ = _timed(new_client, fast_url, FAST_REQUESTS)
            per = 1e3 / FAST_REQUESTS
            print(f"  old client:  {old_wall * per:5.2f} ms wall  {old_cpu * per:5.2f} ms CPU per request")
            print(f"  guarded:     {new_wall * per:5.2f} ms wall  {new_cpu * per:5.2f} ms CPU per request")
            print(f"  ratio guarded/old: wall {new_wall / old_wall:.2f}x, CPU {new_cpu / old_cpu:.2f}x")
        finally:
            slow.kill()
            fast.kill()

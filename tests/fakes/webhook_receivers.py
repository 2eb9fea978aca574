"""A pipeline's webhook endpoint on loopback, the fake that webhook and outbound-client tests deliver to: one that
answers with scripted statuses, and one that dribbles its headers to prove that a whole try has a deadline."""

import contextlib
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Receiver:
    """A pipeline's webhook endpoint on loopback: answers with the scripted statuses (a status, or a status
    and headers), records every request of any method."""

    def __init__(self, statuses: list, host: str = "127.0.0.1") -> None:
        self.answers = [(status, {}) if isinstance(status, int) else status for status in statuses]
        self.received: list[tuple[dict, bytes]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def answer(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.received.append(({k.lower(): v for k, v in self.headers.items()}, body))
                status, headers = receiver.answers.pop(0) if receiver.answers else (200, {})
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_POST = do_GET = answer

            def log_message(self, *args) -> None:
                pass

        class Server(ThreadingHTTPServer):
            address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

        self.server = Server((host, 0), Handler)
        # A short poll interval keeps close() quick: shutdown() waits for the loop's next poll (0.5 s by default).
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
        self.port = self.server.server_address[1]
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{self.port}/hooks/tollgate"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class DribblingReceiver:
    """Answers a status line, then one header line every `interval` seconds, `lines` times: each read gets a
    byte long before any per-read timeout, so only a deadline for the whole try ends it early."""

    def __init__(self, *, interval: float, lines: int) -> None:
        self.interval, self.lines = interval, lines
        self.accepted = self.open = self.cut = self.finished = 0
        self._lock = threading.Lock()
        self._connections: list[socket.socket] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/hooks/slow"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._dribble, args=(connection,), daemon=True).start()

    def _count(self, **changes: int) -> None:
        with self._lock:
            for name, change in changes.items():
                setattr(self, name, getattr(self, name) + change)

    def _dribble(self, connection: socket.socket) -> None:
        self._count(accepted=1, open=1)
        self._connections.append(connection)
        with connection:
            connection.recv(65536)  # the request: its content does not matter here
            try:
                connection.sendall(b"HTTP/1.1 200 OK\r\n")
                for line in range(self.lines):
                    time.sleep(self.interval)
                    connection.sendall(f"X-Dribble-{line}: still here\r\n".encode())
                connection.sendall(b"Content-Length: 0\r\n\r\n")
                self._count(finished=1, open=-1)
            except OSError:
                self._count(cut=1, open=-1)

    def close(self) -> None:
        """Stop listening and end every try still held open."""
        self.listener.close()
        for connection in self._connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

"""A real SMTP server on loopback (aiosmtpd) that keeps every message it is sent, for the escalation mails' tests;
and one that accepts connections and never answers, for a slow server."""

import email
import socket
import threading
from email.message import Message

from aiosmtpd.controller import Controller

from tests.builders.processes import free_port


class SmtpServer:
    def __init__(self) -> None:
        self.messages: list[Message] = []
        server = self

        class Handler:
            async def handle_DATA(self, smtp, session, envelope) -> str:  # noqa: N802 - aiosmtpd's hook name
                server.messages.append(email.message_from_bytes(envelope.content))
                return "250 OK"

        self.port = free_port()  # aiosmtpd checks its server by connecting to the port it was given
        self._controller = Controller(Handler(), hostname="127.0.0.1", port=self.port)
        self._controller.start()

    def close(self) -> None:
        self._controller.stop()


class SilentSmtpServer:
    """Accepts connections and never says a word: a client without a timeout would wait forever."""

    def __init__(self) -> None:
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(16)
        self.port = self._socket.getsockname()[1]
        self._held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        try:
            while True:
                connection, _ = self._socket.accept()
                self._held.append(connection)
        except OSError:
            pass

    def connections(self) -> int:
        """How many clients have connected so far."""
        return len(self._held)

    def close(self) -> None:
        self._socket.close()
        for connection in self._held:
            connection.close()

"""A scriptable OpenAI-compatible server on loopback, for tests that drive the real judge client.

The judge is never faked by patching internals: the production client talks HTTP to this
server exactly as it would to a hosted model. Each ``POST /v1/chat/completions`` consumes the next scripted
:class:`Reply`; when the queue is empty the default reply answers (initially a 500 "no scripted reply", so a
test that forgets to script a call fails loudly instead of hanging).

Usage::

    from openai import OpenAI

    from tests.fakes.openai_server import FakeLLM, error_reply, json_reply

    with FakeLLM() as llm:
        llm.script(
            error_reply(429, retry_after=0.1),
            json_reply({"overall": 7}, top_logprobs={"7": 0.6, "8": 0.3, "6": 0.1}, logprob_token="7"),
        )
        sdk = OpenAI(base_url=llm.base_url, api_key="test-key", max_retries=0)
        ...
        assert llm.chat_requests()[-1].body["temperature"] == 0

Also served: ``POST /v1/embeddings`` (deterministic unit vectors seeded by sha256 of each input) and
``GET /v1/models`` (one model).

Tokenization, used for logprobs and usage counts, is deliberately simple and documented so tests can
predict it: :func:`tokenize` splits text into runs of 1-3 digits (so "10" is one token, like the
OpenAI and Llama 3 tokenizers), runs of letters/underscores, runs of whitespace, and single other characters.
The tokens concatenate back to the original text.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import math
import random
import re
import struct
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

FAKE_MODEL_ID = "tollgate-fake-judge"
DEFAULT_EMBEDDING_DIMENSIONS = 384

_TOKEN_RE = re.compile(r"\d{1,3}|[^\W\d]+|\s+|.", re.DOTALL)
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
}


def tokenize(text: str) -> list[str]:
    """Split ``text`` into the fake server's tokens (see the module docstring); ``"".join`` restores it."""
    return _TOKEN_RE.findall(text)


@dataclass(frozen=True)
class RecordedRequest:
    """One HTTP request as the server received it."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any  # parsed JSON, or None when the body was empty or not JSON
    raw: bytes


@dataclass(frozen=True)
class Reply:
    """How the server answers one chat-completions request. Build it with the ``*_reply`` functions."""

    status: int = 200
    # Message content of a chat.completion; ignored when ``raw_body`` is set.
    content: str | None = None
    # Sent verbatim instead of a chat.completion (errors, broken bodies).
    raw_body: bytes | None = None
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()
    # token -> probability, attached to the target token when the request asks for logprobs.
    top_logprobs: Mapping[str, float] | None = None
    logprob_token: str | None = None
    logprob_field: str | None = None
    # Per check key: token -> probability, attached to the first token of that check's {"verdict": ...} value.
    verdict_logprobs: Mapping[str, Mapping[str, float]] | None = None
    usage: Mapping[str, int] | None = None
    # Seconds to wait before answering; interrupted by FakeLLM.stop().
    latency: float = 0.0
    # OpenAI tool calls [{"id", "type": "function", "function": {"name", "arguments"}}]; the content is then null.
    tool_calls: tuple[Mapping[str, Any], ...] | None = None
    # The message's `refusal` (structured-output models refuse there, with null content).
    refusal: str | None = None
    # Why generation stopped; None means "stop" ("tool_calls" with tool calls). "length": cut off by the token limit.
    finish_reason: str | None = None


def json_reply(
    obj: Mapping[str, Any],
    *,
    top_logprobs: Mapping[str, float] | None = None,
    logprob_token: str | None = None,
    logprob_field: str | None = None,
    verdict_logprobs: Mapping[str, Mapping[str, float]] | None = None,
    usage: Mapping[str, int] | None = None,
    latency: float = 0.0,
) -> Reply:
    """A normal chat.completion whose message content is ``json.dumps(obj)``.

    ``top_logprobs`` (token -> probability) is attached to one token of the content: the first numeric token
    after the key ``"<logprob_field>":`` when ``logprob_field`` is given, else the first token equal to
    ``logprob_token``. Prefer ``logprob_field`` when other fields could hold the same digit.
    ``verdict_logprobs`` (check key -> {token: probability}) attaches alternatives to the first token of each
    check's answer, ``"<key>": {"verdict": "<here>``, as a judge's answers to several checks carry them.
    """
    return text_reply(
        json.dumps(obj),
        top_logprobs=top_logprobs,
        logprob_token=logprob_token,
        logprob_field=logprob_field,
        verdict_logprobs=verdict_logprobs,
        usage=usage,
        latency=latency,
    )


def text_reply(
    text: str,
    *,
    top_logprobs: Mapping[str, float] | None = None,
    logprob_token: str | None = None,
    logprob_field: str | None = None,
    verdict_logprobs: Mapping[str, Mapping[str, float]] | None = None,
    usage: Mapping[str, int] | None = None,
    latency: float = 0.0,
) -> Reply:
    """A chat.completion whose message content is ``text`` verbatim (prose, injected output, ...)."""
    if top_logprobs is not None and logprob_token is None and logprob_field is None:
        raise ValueError("top_logprobs needs logprob_token or logprob_field to say which token they belong to")
    for alternatives in [top_logprobs or {}, *(verdict_logprobs or {}).values()]:
        if any(not 0.0 <= p <= 1.0 for p in alternatives.values()):
            raise ValueError("top_logprobs are probabilities in [0, 1]")
    reply = Reply(
        content=text,
        top_logprobs=dict(top_logprobs) if top_logprobs is not None else None,
        logprob_token=logprob_token,
        logprob_field=logprob_field,
        verdict_logprobs={key: dict(alts) for key, alts in verdict_logprobs.items()} if verdict_logprobs else None,
        usage=dict(usage) if usage is not None else None,
        latency=latency,
    )
    _targets(reply, tokenize(text))  # fail in the test that scripts it, not inside the server thread
    return reply


def tool_call_reply(*calls: tuple[str, str, str]) -> Reply:
    """A chat.completion that asks for tools: each call is ``(id, function name, arguments as JSON text)``."""
    return Reply(
        tool_calls=tuple(
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
            for call_id, name, arguments in calls
        )
    )


def refusal_reply(text: str = "I can't help with that.") -> Reply:
    """A 200 chat.completion in which the model refuses: `refusal` set, content null."""
    return Reply(refusal=text)


def cut_off_reply(reply: Reply) -> Reply:
    """``reply`` as a server sends it when generation hit the token limit: ``finish_reason`` "length"."""
    return dataclasses.replace(reply, finish_reason="length")


def malformed_reply(text: str = '{"score": 7,') -> Reply:
    """A 200 chat.completion whose content is not valid JSON (truncated by default)."""
    return text_reply(text)


def error_reply(
    status: int,
    *,
    retry_after: float | None = None,
    message: str | None = None,
    code: str | None = None,
) -> Reply:
    """An OpenAI-style error: ``{"error": {"message", "type", "code"}}`` with ``status``.

    ``retry_after`` (seconds) becomes a ``Retry-After`` header.
    """
    error_type = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    body = {
        "error": {
            "message": message or f"Fake server error (HTTP {status}).",
            "type": error_type,
            "param": None,
            "code": code,
        }
    }
    headers: tuple[tuple[str, str], ...] = ()
    if retry_after is not None:
        seconds = str(int(retry_after)) if float(retry_after).is_integer() else str(retry_after)
        headers = (("Retry-After", seconds),)
    return Reply(status=status, raw_body=json.dumps(body).encode(), headers=headers)


def hang_reply(seconds: float, *, then: Reply | None = None) -> Reply:
    """Wait ``seconds`` before answering with ``then`` (default: ``{}`` as JSON), to drive client timeouts.

    The wait happens on the request's own thread and is cut short by ``FakeLLM.stop()``.
    """
    return dataclasses.replace(then or json_reply({}), latency=seconds)


def broken_body_reply(
    body: bytes = b"<html><body>502 Bad Gateway</body></html>", *, content_type: str = "application/json"
) -> Reply:
    """A 200 whose HTTP body is not JSON at all (by default while claiming to be JSON, like a bad proxy)."""
    return Reply(raw_body=body, content_type=content_type)


_NO_SCRIPTED_REPLY = error_reply(500, message="FakeLLM: no scripted reply for this request", code="no_scripted_reply")


class FakeLLM:
    """An OpenAI-compatible HTTP server on 127.0.0.1 with a FIFO of scripted chat-completions replies."""

    supports_json_schema: bool = True

    def __init__(self, *, keep_alive: bool = False, record: bool = True) -> None:
        """``keep_alive`` serves HTTP/1.1 persistent connections, as hosted APIs do (benchmarks of a client that
        reuses its connections need it); the default, HTTP/1.0, closes each connection so ``stop()`` never waits
        on an idle socket. ``record=False`` keeps no requests, for long benchmark runs."""
        self.requests: list[RecordedRequest] = []
        self.supports_json_schema = True
        # False: like a server that ignores the request's `logprobs` (some OpenAI-compatible ones do), none come back.
        self.returns_logprobs = True
        # Like llama.cpp: when set, GET /props reports it as the context of a slot, and a chat request whose
        # prompt has more tokens (by `tokenize`) is refused with llama.cpp's exceed_context_size_error.
        self.context_tokens: int | None = None
        self.keep_alive = keep_alive
        self.record = record
        self._lock = threading.Lock()
        self._queue: deque[Reply] = deque()
        self._embeddings_queue: deque[Reply] = deque()
        self._default: Reply | Callable[[dict[str, Any]], Reply] = _NO_SCRIPTED_REPLY
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> FakeLLM:
        """Bind an ephemeral loopback port and serve on a daemon thread."""
        if self._server is not None:
            raise RuntimeError("FakeLLM already started")
        self._stopping.clear()
        self._server = _Server(("127.0.0.1", 0), _KeepAliveHandler if self.keep_alive else _Handler, fake=self)
        # A short poll interval keeps stop() (and so every test's teardown) quick.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, name="FakeLLM", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; requests still waiting out a latency are released and dropped."""
        if self._server is None:
            return
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> FakeLLM:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """What ``openai.OpenAI(base_url=...)`` takes: ``http://127.0.0.1:<port>/v1``."""
        if self._server is None:
            raise RuntimeError("FakeLLM is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    # -- scripting ---------------------------------------------------------------------------------

    def script(self, *replies: Reply) -> None:
        """Queue replies; each chat-completions request consumes the next one."""
        with self._lock:
            self._queue.extend(replies)

    def script_embeddings(self, *replies: Reply) -> None:
        """Queue replies for ``POST /v1/embeddings``; each request consumes one, then they answer normally.

        A reply built by ``error_reply``/``broken_body_reply`` is sent as is; any other reply (e.g.
        ``hang_reply(1.0)``) only contributes its latency before the deterministic embeddings.
        """
        with self._lock:
            self._embeddings_queue.extend(replies)

    def set_default(self, reply: Reply | Callable[[dict[str, Any]], Reply]) -> None:
        """The reply used when the queue is empty; a callable gets the request body and returns the reply (one
        server for every kind of judge call, for the benchmarks and the load test)."""
        with self._lock:
            self._default = reply

    def reset(self) -> None:
        """Forget the queue, the default, the recorded requests, ``supports_json_schema`` and ``returns_logprobs``."""
        with self._lock:
            self._queue.clear()
            self._embeddings_queue.clear()
            self._default = _NO_SCRIPTED_REPLY
            self.requests.clear()
            self.supports_json_schema = True
            self.returns_logprobs = True
            self.context_tokens = None

    def chat_requests(self) -> list[RecordedRequest]:
        """Recorded ``POST /v1/chat/completions`` requests, in order."""
        with self._lock:
            return [r for r in self.requests if r.method == "POST" and r.path == "/v1/chat/completions"]

    # -- used by the handler -----------------------------------------------------------------------

    def _record(self, request: RecordedRequest) -> None:
        if not self.record:
            return
        with self._lock:
            self.requests.append(request)

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
            default = self._default
        return default(body) if callable(default) else default

    def _next_embeddings_reply(self) -> Reply | None:
        with self._lock:
            return self._embeddings_queue.popleft() if self._embeddings_queue else None

    def _wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; False when stop() cut the wait short."""
        return not self._stopping.wait(seconds) if seconds > 0 else True


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # socketserver's default listen backlog of 5 refuses connections when dozens of workers call at once.
    request_queue_size = 256

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], *, fake: FakeLLM) -> None:
        self.fake = fake
        super().__init__(address, handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that timed out and hung up is expected here, not a test failure worth a traceback.
        pass


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    # HTTP/1.0: one request per connection, so stop() never waits on an idle keep-alive socket.
    protocol_version = "HTTP/1.0"
    # The headers and the body go out in two writes; with Nagle's algorithm the body waited for the client's
    # delayed ACK of the headers, and a reply arrived some 40 ms after its latency on a keep-alive connection.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._record()
        if self._route == "/v1/models":
            self._send_json(200, _models_body())
        elif self._route == "/props" and self.server.fake.context_tokens:
            self._send_json(200, {"default_generation_settings": {"n_ctx": self.server.fake.context_tokens}})
        else:
            self._send_reply(error_reply(404, message=f"Unknown path {self._route}"))

    def do_POST(self) -> None:
        body = self._record()
        if self._route == "/v1/chat/completions":
            self._chat_completions(body)
        elif self._route == "/v1/embeddings":
            self._embeddings(body)
        else:
            self._send_reply(error_reply(404, message=f"Unknown path {self._route}"))

    @property
    def _route(self) -> str:
        return self.path.split("?", 1)[0]

    def _record(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers = {key.lower(): value for key, value in self.headers.items()}
        self.server.fake._record(RecordedRequest(self.command, self._route, headers, body, raw))
        return body

    def _chat_completions(self, body: Any) -> None:
        fake = self.server.fake
        if not isinstance(body, dict):
            self._send_reply(error_reply(400, message="Request body must be a JSON object"))
            return
        response_format = body.get("response_format") or {}
        if not fake.supports_json_schema and response_format.get("type") == "json_schema":
            # Does not consume a scripted reply: the scripted reply is for the client's fallback request.
            self._send_reply(
                error_reply(
                    400,
                    message="response_format type 'json_schema' is not supported by this server",
                    code="unsupported_response_format",
                )
            )
            return
        # Counted only when there is a context to check: tokenizing a long prompt is most of this server's CPU.
        if fake.context_tokens:
            prompt_tokens = sum(len(tokenize(_message_text(m))) for m in body.get("messages") or [])
            if prompt_tokens > fake.context_tokens:
                # Does not consume a scripted reply: the server refuses before any model runs.
                error = {
                    "code": 400,
                    "message": f"request ({prompt_tokens} tokens) exceeds the available context size "
                    f"({fake.context_tokens} tokens), try increasing it",
                    "type": "exceed_context_size_error",
                    "n_prompt_tokens": prompt_tokens,
                    "n_ctx": fake.context_tokens,
                }
                self._send_json(400, {"error": error})
                return
        reply = fake._next_reply(body)
        if not fake._wait(reply.latency):
            return  # stopping: the client is gone or about to be
        if reply.raw_body is not None:
            self._send_reply(reply)
        else:
            completion = _chat_completion_body(reply, body, send_logprobs=fake.returns_logprobs)
            self._send_json(reply.status, completion, reply.headers)

    def _embeddings(self, body: Any) -> None:
        scripted = self.server.fake._next_embeddings_reply()
        if scripted is not None:
            if not self.server.fake._wait(scripted.latency):
                return
            if scripted.raw_body is not None:
                self._send_reply(scripted)
                return
        if not isinstance(body, dict):
            self._send_reply(error_reply(400, message="Request body must be a JSON object"))
            return
        inputs = body.get("input")
        if isinstance(inputs, str):
            inputs = [inputs]
        if not isinstance(inputs, list) or not inputs or not all(isinstance(t, str) for t in inputs):
            self._send_reply(error_reply(400, message="'input' must be a string or a non-empty list of strings"))
            return
        dimensions = body.get("dimensions") or DEFAULT_EMBEDDING_DIMENSIONS
        if not isinstance(dimensions, int) or dimensions < 1:
            self._send_reply(error_reply(400, message="'dimensions' must be a positive integer"))
            return
        as_base64 = body.get("encoding_format") == "base64"
        data = []
        for index, text in enumerate(inputs):
            vector = deterministic_embedding(text, dimensions)
            encoded: list[float] | str = (
                base64.b64encode(struct.pack(f"<{dimensions}f", *vector)).decode() if as_base64 else vector
            )
            data.append({"object": "embedding", "index": index, "embedding": encoded})
        prompt_tokens = sum(len(tokenize(t)) for t in inputs)
        self._send_json(
            200,
            {
                "object": "list",
                "data": data,
                "model": body.get("model", FAKE_MODEL_ID),
                "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
            },
        )

    def _send_reply(self, reply: Reply) -> None:
        self._send(reply.status, reply.raw_body or b"", reply.content_type, reply.headers)

    def _send_json(self, status: int, payload: Any, headers: tuple[tuple[str, str], ...] = ()) -> None:
        self._send(status, json.dumps(payload).encode(), "application/json", headers)

    def _send(self, status: int, payload: bytes, content_type: str, headers: tuple[tuple[str, str], ...]) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            for name, value in headers:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client timed out and left


class _KeepAliveHandler(_Handler):
    protocol_version = "HTTP/1.1"


def deterministic_embedding(text: str, dimensions: int = DEFAULT_EMBEDDING_DIMENSIONS) -> list[float]:
    """A unit vector seeded by sha256(text): the same text always embeds the same way."""
    rng = random.Random(int.from_bytes(hashlib.sha256(text.encode()).digest(), "big"))
    vector = [rng.gauss(0.0, 1.0) for _ in range(dimensions)]
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


def _models_body() -> dict[str, Any]:
    return {
        "object": "list",
        "data": [{"id": FAKE_MODEL_ID, "object": "model", "created": 0, "owned_by": "tollgate-tests"}],
    }


def _chat_completion_body(reply: Reply, request: Mapping[str, Any], *, send_logprobs: bool = True) -> dict[str, Any]:
    content = reply.content or ""
    tokens = tokenize(content)
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    if reply.refusal is not None:
        message = {"role": "assistant", "content": None, "refusal": reply.refusal}
    if reply.tool_calls is not None:
        message = {"role": "assistant", "content": None, "refusal": None, "tool_calls": list(reply.tool_calls)}
    logprobs = None
    if request.get("logprobs") and send_logprobs:
        logprobs = {
            "content": _token_logprobs(reply, tokens, int(request.get("top_logprobs") or 0)),
            "refusal": None,
        }
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", FAKE_MODEL_ID),
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": logprobs,
                "finish_reason": reply.finish_reason or ("tool_calls" if reply.tool_calls is not None else "stop"),
            }
        ],
        "usage": dict(reply.usage) if reply.usage is not None else _default_usage(request, tokens),
    }


def _default_usage(request: Mapping[str, Any], completion_tokens: list[str]) -> dict[str, int]:
    prompt_tokens = sum(len(tokenize(_message_text(m))) for m in request.get("messages") or [])
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": len(completion_tokens),
        "total_tokens": prompt_tokens + len(completion_tokens),
    }


def _message_text(message: Any) -> str:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def _token_logprobs(reply: Reply, tokens: list[str], top_n: int) -> list[dict[str, Any]]:
    """Every token is certain (logprob 0) except the target tokens, which carry the scripted alternatives."""
    targets = _targets(reply, tokens)
    entries = []
    for index, token in enumerate(tokens):
        if index in targets:
            scripted = targets[index]
            alternatives = sorted(
                ((t, p) for t, p in scripted.items() if p > 0), key=lambda item: item[1], reverse=True
            )
            # The emitted token's own probability; if the mapping omits it, the mass the mapping left over.
            chosen = scripted.get(token) or 1.0 - sum(scripted.values())
            logprob = math.log(max(chosen, 1e-9))
            top = [_logprob_entry(t, math.log(p)) for t, p in alternatives[:top_n]]
        else:
            logprob = 0.0
            top = [_logprob_entry(token, 0.0)] if top_n else []
        entries.append({**_logprob_entry(token, logprob), "top_logprobs": top})
    return entries


def _logprob_entry(token: str, logprob: float) -> dict[str, Any]:
    return {"token": token, "logprob": logprob, "bytes": list(token.encode())}


def _targets(reply: Reply, tokens: list[str]) -> dict[int, Mapping[str, float]]:
    """Token index -> the alternatives scripted for it."""
    targets: dict[int, Mapping[str, float]] = {}
    if reply.top_logprobs is not None:
        index = _target_index(reply, tokens)
        if index is not None:
            targets[index] = reply.top_logprobs
    text = "".join(tokens)
    for key, alternatives in (reply.verdict_logprobs or {}).items():
        match = re.search(rf'"{re.escape(key)}"\s*:\s*\{{.*?"verdict"\s*:\s*"', text, re.DOTALL)
        if match is None:
            raise ValueError(f"verdict_logprobs: the reply content has no verdict for {key!r}")
        offset = 0
        for index, token in enumerate(tokens):
            if offset >= match.end():
                targets[index] = alternatives
                break
            offset += len(token)
    return targets


def _target_index(reply: Reply, tokens: list[str]) -> int | None:
    if reply.logprob_field is not None:
        match = re.search(rf'"{re.escape(reply.logprob_field)}"\s*:\s*(?=\d)', "".join(tokens))
        if match is None:
            raise ValueError(f"logprob_field {reply.logprob_field!r} has no numeric value in the reply content")
        offset = 0
        for index, token in enumerate(tokens):
            if offset >= match.end():
                return index
            offset += len(token)
        return None
    for index, token in enumerate(tokens):
        if token == reply.logprob_token:
            return index
    raise ValueError(f"logprob_token {reply.logprob_token!r} does not occur in the reply content")

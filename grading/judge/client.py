"""The HTTP client every judge backend uses: one OpenAI-compatible chat-completions call, validated.

Production code with no Django import, so plain pytest can drive it against the loopback fake server.

What the caller gets from :meth:`ChatJudgeClient.complete` is either a :class:`Completion` holding a pydantic
instance of the requested schema, or one of three errors that say what to do next:

- :class:`JudgeUnavailable`: transient trouble that outlasted our retries; try again on a later pass.
- :class:`JudgeMalformed`: the model twice answered something that is not the schema; never invent a score.
- :class:`JudgeRejected`: the server refuses the request itself (auth, bad request); retrying will not help.
  Its subclass :class:`JudgeContextExceeded` says the prompt is longer than the judge's context, with the
  server's own figures where it gives them: the caller can split the evidence into smaller stages.

One client serves a whole process (its SDK client holds the connection pool, so judge calls reuse warm
keep-alive connections, and building one loads the CA bundle: tens of milliseconds); it is safe to share
between threads.

Judge isolation: no request carries ``tools``, ``functions``, ``tool_choice``, ``function_call``.
"""

from __future__ import annotations

import email.utils
import functools
import json
import random
import re
import ssl
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import chain
from operator import attrgetter
from typing import Any, Generic, Literal, NamedTuple, NotRequired, TypeVar

import httpx2
import openai
import pydantic_core
from pydantic import BaseModel, TypeAdapter, ValidationError
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12

T = TypeVar("T", bound=BaseModel)
ResponseMode = Literal["json_schema", "json_object"]

# Status codes worth another try: request timeout, rate limit, and any server-side failure.
_TRANSIENT_STATUSES = frozenset({408, 429})
# A 429 with this code is a billing limit, not a rate limit: waiting does not help.
_QUOTA_CODES = frozenset({"insufficient_quota"})


class JudgeError(Exception):
    """Base class for everything the judge client raises."""


class JudgeUnavailable(JudgeError):
    """Timeouts, connection errors, 429 or 5xx (or unreadable bodies) outlasted the retries."""


class JudgeMalformed(JudgeError):
    """The reply was not valid JSON or did not match the schema, twice."""


class JudgeRejected(JudgeError):
    """A non-transient refusal (401, 403, a 400 other than the json_schema fallback, ...)."""


class JudgeContextExceeded(JudgeRejected):
    """The prompt does not fit the judge's context window. Sending it again cannot help; smaller stages can.

    ``prompt_tokens`` and ``context_tokens`` are the server's own figures when its error states them
    (llama.cpp, vLLM and OpenAI do), else None.
    """

    def __init__(self, message: str, *, prompt_tokens: int | None, context_tokens: int | None) -> None:
        super().__init__(message)
        self.prompt_tokens = prompt_tokens
        self.context_tokens = context_tokens


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    # Prompt tokens the server read from its prompt cache (OpenAI, llama.cpp, vLLM report them); 0 when not said.
    cached_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.total_tokens + other.total_tokens,
            self.cached_tokens + other.cached_tokens,
        )

    def as_json(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cached_tokens": self.cached_tokens,
            "total_tokens": self.total_tokens,
        }


ZERO_USAGE = Usage(0, 0, 0)


class TokenLogprob(NamedTuple):
    """One generated token; ``logprob`` and ``top_logprobs`` values are natural logs, as sent by the API. A named
    tuple: a reply holds one per token, and a frozen dataclass's construction cost twice as much CPU."""

    token: str
    logprob: float
    top_logprobs: dict[str, float]


class TokenLogprobs(Sequence[TokenLogprob]):
    """A reply's tokens: their texts read once (`texts`, what a reader searches), each token whole, with its
    alternatives, only when it is asked for by its index. A reply holds hundreds of tokens and its readers look at a
    handful: made whole, a named tuple and a dict a token, they cost half as much CPU as parsing the reply."""

    __slots__ = ("_entries", "_whole", "texts")

    def __init__(self, tokens: Sequence[TokenLogprob]) -> None:
        self._entries: Sequence[Any] = tokens
        self._whole: Callable[[Any], TokenLogprob] | None = None
        self.texts = [token.token for token in tokens]

    @classmethod
    def wire(cls, entries: list[_WireToken]) -> TokenLogprobs:
        """The tokens as `_WIRE_REPLY` read them, each made whole when asked for."""
        tokens = cls.__new__(cls)
        tokens._entries, tokens._whole = entries, _wire_token
        tokens.texts = [entry["token"] for entry in entries]
        return tokens

    def __len__(self) -> int:
        return len(self._entries)

    def __getitem__(self, index: int) -> TokenLogprob:  # type: ignore[override]  # no slices: no reader takes one
        entry = self._entries[index]
        return entry if self._whole is None else self._whole(entry)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    def __repr__(self) -> str:
        return f"TokenLogprobs({list(self)!r})"


def _wire_token(entry: _WireToken) -> TokenLogprob:
    alternatives = entry.get("top_logprobs") or ()
    return TokenLogprob(entry["token"], entry["logprob"], {alt["token"]: alt["logprob"] for alt in alternatives})


@dataclass(frozen=True)
class Completion(Generic[T]):
    parsed: T
    raw_text: str
    # Tokens billed for this call: summed over every reply that came back, a malformed first reply included.
    usage: Usage
    # None unless the client asked for logprobs and the server returned them.
    token_logprobs: TokenLogprobs | None
    # Chat-completions requests sent for this call, counting retries, the fallback and the malformed retry.
    attempts: int
    mode: ResponseMode
    # The model the server says answered (``model`` of the reply), which may differ from the one requested.
    served_model: str | None = None


@dataclass(frozen=True)
class ServerProfile:
    """What the judge's server says about itself, asked once per client: the model it serves (when it serves
    exactly one, like llama.cpp and vLLM) and the context window of one request, in tokens."""

    model: str | None
    context_tokens: int | None
    source: str  # where context_tokens came from: "llama.cpp /props", "ollama /api/show", ... or "" when unknown


@dataclass(frozen=True)
class _Reply:
    """What the client reads of a chat completion: its first choice, the usage and the model that answered."""

    content: str | None
    refusal: str | None
    finish_reason: str | None
    usage: Usage
    token_logprobs: TokenLogprobs | None
    model: str | None


class BrokenBody(Exception):
    """A 2xx whose body is not what the endpoint answers (proxy error pages, truncated bodies): transient."""


class _Malformed(Exception):
    """The model's output does not parse or validate; the message names what was wrong."""


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter, honouring Retry-After, for transient errors only.

    Shared with :class:`grading.judge.embeddings.EmbeddingsClient`, so both clients retry the same errors the same way.
    """

    max_retries: int
    backoff_base: float
    backoff_cap: float
    sleep: Callable[[float], None]

    def backoff_or_raise(self, exc: Exception, retries_done: int, attempts: int) -> int:
        """Sleep before the next try and return the new retry count, or raise the judge error for ``exc``."""
        if not _is_transient(exc):
            raise JudgeRejected(f"judge rejected the request: {_describe(exc)}") from exc
        if retries_done >= self.max_retries:
            raise JudgeUnavailable(f"judge unavailable after {attempts} attempt(s): {_describe(exc)}") from exc
        self.sleep(self._delay(exc, retries_done))
        return retries_done + 1

    def _delay(self, exc: Exception, retries_done: int) -> float:
        retry_after = _retry_after_seconds(exc)
        if retry_after is not None:
            return min(retry_after, self.backoff_cap)
        # Full jitter: spreads out clients that failed together instead of having them retry in lockstep.
        return random.uniform(0.0, min(self.backoff_cap, self.backoff_base * 2**retries_done))


class ChatJudgeClient:
    """Structured chat completions against any OpenAI-compatible server, with our own retry policy."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str,
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff_base: float = 0.5,
        backoff_cap: float = 8.0,
        want_logprobs: bool = False,
        top_logprobs: int = 5,
        max_output_tokens: int = 1024,
        response_mode: ResponseMode = "json_schema",
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.model = model
        self.base_url = base_url
        self.timeout = timeout
        self.want_logprobs = want_logprobs
        self.top_logprobs = top_logprobs
        # Bounds the verdict: a judge that rambles is cut off, and a cut-off reply is never read as a score.
        self.max_output_tokens = max_output_tokens
        # The SDK's own retries are off so that exactly one policy (ours) decides what is worth retrying. Its HTTP
        # client, of the SDK's own kind and defaults (connection limits, redirects), is kept: the chat completions
        # go straight through it (`_post`).
        self._http = openai.DefaultHttpxClient(timeout=timeout, verify=_trusted_authorities())
        self._sdk = openai.OpenAI(
            base_url=base_url, api_key=api_key, timeout=timeout, max_retries=0, http_client=self._http
        )
        self._completions_url = self._sdk.base_url.join("chat/completions")
        self._headers = _sdk_headers(self._sdk, timeout)
        self._retry = RetryPolicy(max_retries, backoff_base, backoff_cap, sleep)
        # Switched once, for the client's lifetime, when the server turns json_schema down.
        self._mode: ResponseMode = response_mode
        self._profile: ServerProfile | None = None

    @property
    def mode(self) -> ResponseMode:
        """``json_object`` once the server has said it does not support ``json_schema``."""
        return self._mode

    def complete(self, *, system: str, user: str, schema: type[T]) -> Completion[T]:
        """Ask for one reply matching ``schema``.

        1. Send the request, retrying transient failures (and switching to json_object mode once if the server
           does not support json_schema).
        2. Parse and validate the content. If it is malformed, send one fresh request and parse that; a reply
           cut off by its token limit is malformed, and the fresh request may use twice the limit.
        3. Raise :class:`JudgeMalformed` naming the problem if the second reply is malformed too.
        """
        attempts = 0
        usage = ZERO_USAGE
        problem = ""
        max_tokens = self.max_output_tokens
        for _ in range(2):
            reply, sent, mode = self._send(system=system, user=user, schema=schema, max_tokens=max_tokens)
            attempts += sent
            usage += reply.usage
            try:
                parsed, raw_text = _parse_output(reply, schema)
            except _Malformed as exc:
                problem = str(exc)
                if reply.finish_reason == "length":
                    max_tokens *= 2
                continue
            return Completion(
                parsed=parsed,
                raw_text=raw_text,
                usage=usage,
                token_logprobs=reply.token_logprobs if self.want_logprobs else None,
                attempts=attempts,
                mode=mode,
                served_model=reply.model or None,
            )
        raise JudgeMalformed(f"judge output malformed twice; last reply: {problem}")

    def _send(
        self, *, system: str, user: str, schema: type[BaseModel], max_tokens: int
    ) -> tuple[_Reply, int, ResponseMode]:
        """One logical request: the reply, how many HTTP requests it took, and the mode that answered."""
        attempts = 0
        retries = 0
        while True:
            mode = self._mode
            attempts += 1
            try:
                reply = self._post(system=system, user=user, schema=schema, mode=mode, max_tokens=max_tokens)
                return reply, attempts, mode
            except (openai.OpenAIError, BrokenBody) as exc:
                if mode == "json_schema" and _json_schema_unsupported(exc):
                    # Not a retry: the same request in the mode this server does support.
                    self._mode = "json_object"
                    continue
                if (exceeded := _context_exceeded(exc)) is not None:
                    raise exceeded from exc
                retries = self._retry.backoff_or_raise(exc, retries, attempts)

    def _post(self, *, system: str, user: str, schema: type[BaseModel], mode: ResponseMode, max_tokens: int) -> _Reply:
        # Deliberately no tools/functions parameters: the judge cannot act, only answer.
        # What the SDK's post sends (its headers, its JSON encoding), built here: its request building per call (the
        # options copied and merged, the headers composed and validated) cost as much CPU as the HTTP exchange.
        # Failures are raised as the SDK raises them, so the retry policy reads them alike.
        content = _request_body(
            model=self.model,
            messages=_messages(system=system, user=user, schema=schema, mode=mode),
            max_tokens=max_tokens,
            schema=schema,
            mode=mode,
            top_logprobs=self.top_logprobs if self.want_logprobs else None,
        )
        request = self._http.build_request("POST", self._completions_url, content=content, headers=self._headers)
        try:
            response = self._http.send(request)
        except httpx2.TimeoutException as exc:
            raise openai.APITimeoutError(request=request) from exc
        except (httpx2.RequestError, ssl.SSLError) as exc:
            raise openai.APIConnectionError(request=request) from exc
        if response.is_error:
            raise self._sdk._make_status_error_from_response(response)
        return _chat_completion(response.content)

    def server_profile(self) -> ServerProfile:
        """Ask the server, once for this client, which model it serves and how many tokens one request may hold.

        1. ``GET /v1/models``: a server that lists exactly one model serves that one whatever the request names
           (llama.cpp, vLLM); llama.cpp also gives the context there (``meta.n_ctx``).
        2. llama.cpp's ``GET /props``: ``default_generation_settings.n_ctx``, the context of one slot.
        3. Ollama's ``POST /api/show``: ``num_ctx`` from the model's parameters, else its ``*.context_length``.

        Nothing here is required: a hosted API answers none of it, and the caller falls back to a setting.
        Short timeouts, no retries: a judge that is down shows up on the first real call.
        """
        if self._profile is None:
            self._profile = self._discover()
        return self._profile

    def _discover(self) -> ServerProfile:
        root = re.sub(r"/v1/?$", "", self.base_url.rstrip("/"))
        model, context, source = None, None, ""
        listed = self._probe("get", "/models")
        models = listed.get("data") if isinstance(listed, dict) else None
        if isinstance(models, list) and len(models) == 1 and isinstance(models[0], dict):
            model = models[0].get("id") if isinstance(models[0].get("id"), str) else None
            meta = models[0].get("meta")
            if isinstance(meta, dict) and _positive_int(meta.get("n_ctx")):
                context, source = int(meta["n_ctx"]), "llama.cpp /v1/models"
        props = self._probe("get", f"{root}/props") if context is None else None
        if isinstance(props, dict):
            settings = props.get("default_generation_settings")
            if isinstance(settings, dict) and _positive_int(settings.get("n_ctx")):
                context, source = int(settings["n_ctx"]), "llama.cpp /props"
        if context is None and (shown := self._probe("post", f"{root}/api/show", {"model": self.model})):
            context = _ollama_context(shown)
            source = "ollama /api/show" if context else ""
        return ServerProfile(model=model, context_tokens=context, source=source)

    def _probe(self, method: str, path: str, body: dict | None = None) -> Any:
        try:
            if method == "get":
                return self._sdk.get(path, cast_to=object, options={"timeout": min(self.timeout, 5.0)})
            return self._sdk.post(path, body=body, cast_to=object, options={"timeout": min(self.timeout, 5.0)})
        except (openai.OpenAIError, json.JSONDecodeError):
            return None


@functools.cache
def _trusted_authorities() -> ssl.SSLContext:
    """The certificate authorities a judge's server is checked against, as the HTTP client would load them itself
    (its bundle, or SSL_CERT_FILE / SSL_CERT_DIR), loaded once a process: a client loading them for itself spends
    about 30 ms of CPU, and a worker builds its judges again whenever their configuration changes."""
    return httpx2.create_ssl_context()


def _sdk_headers(sdk: openai.OpenAI, timeout: float) -> dict[str, str]:
    """The headers the SDK sends with a request of ours: its defaults (the client's platform, none it omits), its
    authorisation, no retry of its own taken and the read timeout."""
    headers = {**sdk.auth_headers, **sdk.default_headers}
    return {name: value for name, value in headers.items() if isinstance(value, str)} | {
        "x-stainless-retry-count": "0",
        "x-stainless-read-timeout": str(float(timeout)),
    }


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _ollama_context(shown: object) -> int | None:
    """An Ollama model's context: its ``num_ctx`` parameter when set (what it really allocates), else the
    model's trained length."""
    if not isinstance(shown, dict):
        return None
    parameters = shown.get("parameters")
    if isinstance(parameters, str) and (match := re.search(r"^num_ctx\s+(\d+)", parameters, re.MULTILINE)):
        return int(match.group(1))
    info = shown.get("model_info")
    if isinstance(info, dict):
        lengths = [v for k, v in info.items() if k.endswith(".context_length") and _positive_int(v)]
        if lengths:
            return int(lengths[0])
    return None


# -- request and reply helpers ----------------------------------------------------------------------------


def _request_body(
    *,
    model: str,
    messages: list[dict[str, str]],
    max_tokens: int,
    schema: type[BaseModel],
    mode: ResponseMode,
    top_logprobs: int | None,
) -> bytes:
    """The chat completion's body: the model, the messages, temperature 0, `max_tokens`, the response format, and the
    log-probabilities when `top_logprobs` is given. Byte for byte `_encoded` of that object; the part after
    `max_tokens`, the same for every request of a schema (its JSON Schema most of it), is encoded once
    (`_request_tail`)."""
    return b"".join(
        (
            b'{"model":',
            _encoded(model),
            b',"messages":',
            _encoded(messages),
            b',"temperature":0,"max_tokens":',
            _encoded(max_tokens),
            _request_tail(schema, mode, top_logprobs),
        )
    )


@functools.lru_cache(maxsize=64)
def _request_tail(schema: type[BaseModel], mode: ResponseMode, top_logprobs: int | None) -> bytes:
    """The body's fields after `max_tokens`, with the comma before them and the body's closing brace."""
    tail: dict[str, Any] = {"response_format": _response_format(schema, mode)}
    if top_logprobs is not None:
        tail |= {"logprobs": True, "top_logprobs": top_logprobs}
    return b"," + _encoded(tail).removeprefix(b"{")


def _encoded(value: object) -> bytes:
    """JSON as the SDK sends it: compact, UTF-8."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def _messages(*, system: str, user: str, schema: type[BaseModel], mode: ResponseMode) -> list[dict[str, str]]:
    if mode == "json_object":
        # json_object only promises *some* JSON object, so the schema has to travel in the prompt.
        system = (
            f"{system}\n\nReply with a single JSON object, and nothing else, that matches this JSON Schema:\n"
            f"{json.dumps(_response_format(schema, 'json_schema')['json_schema']['schema'])}"
        )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


@functools.lru_cache(maxsize=64)
def _response_format(schema: type[BaseModel], mode: ResponseMode) -> dict[str, Any]:
    """The request's response_format, built once per schema and mode (pydantic builds a JSON Schema slowly).
    Callers must not change it."""
    if mode == "json_object":
        return {"type": "json_object"}
    json_schema = schema.model_json_schema()
    return {
        "type": "json_schema",
        "json_schema": {
            "name": re.sub(r"[^A-Za-z0-9_-]", "_", schema.__name__)[:64],
            "schema": json_schema,
            # Strict mode rejects schemas with optional or open properties: ask for it only where it applies.
            "strict": _strict_compatible(json_schema),
        },
    }


def _strict_compatible(node: Any) -> bool:
    """True when every object in the schema is closed and requires all of its properties."""
    if isinstance(node, list):
        return all(_strict_compatible(item) for item in node)
    if not isinstance(node, dict):
        return True
    if "properties" in node and (
        node.get("additionalProperties") is not False or set(node.get("required", ())) != set(node["properties"])
    ):
        return False
    return all(_strict_compatible(value) for value in node.values())


# "request (5030 tokens) exceeds the available context size (4096 tokens)" (llama.cpp), "maximum context length is
# 4096 tokens. However, you requested 5000 tokens" (vLLM, OpenAI): the request's size, then the limit, or the reverse.
_CONTEXT_ERROR = re.compile(r"context[ _](length|size|window)|maximum context|too many tokens|exceeds? the", re.I)
_REQUEST_TOKENS = re.compile(r"(?:request(?:ed)?|resulted in|prompt(?: is| has)?)\D{0,12}?(\d[\d,]*) tokens", re.I)
_LIMIT_TOKENS = re.compile(
    r"(?:context (?:length|size|window)(?: is| of)?|maximum context length is)\D{0,20}?(\d[\d,]*)", re.I
)


def _context_exceeded(exc: Exception) -> JudgeContextExceeded | None:
    """A 400 (or 413) saying the prompt is longer than the model's context, with its figures, or None."""
    if not isinstance(exc, openai.APIStatusError) or exc.status_code not in (400, 413):
        return None
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error", body) if isinstance(body.get("error", body), dict) else body
    kind = f"{error.get('type', '')} {error.get('code', '')}"
    text = f"{exc.message} {error.get('message', '')}"
    if "context" not in kind.lower() and not _CONTEXT_ERROR.search(text):
        return None
    prompt = error.get("n_prompt_tokens") if _positive_int(error.get("n_prompt_tokens")) else None
    context = error.get("n_ctx") if _positive_int(error.get("n_ctx")) else None
    if prompt is None and (match := _REQUEST_TOKENS.search(text)):
        prompt = int(match.group(1).replace(",", ""))
    if context is None and (match := _LIMIT_TOKENS.search(text)):
        context = int(match.group(1).replace(",", ""))
    return JudgeContextExceeded(
        f"the prompt does not fit the judge's context: {_describe(exc)}", prompt_tokens=prompt, context_tokens=context
    )


def _json_schema_unsupported(exc: Exception) -> bool:
    """A 400 that complains about response_format: the server lacks json_schema, json_object may work."""
    if not isinstance(exc, openai.BadRequestError):
        return False
    text = f"{exc.message} {exc.body}".lower()
    return "response_format" in text or "json_schema" in text


def _is_transient(exc: Exception) -> bool:
    if isinstance(exc, openai.APIConnectionError | BrokenBody | openai.APIResponseValidationError):
        return True  # includes APITimeoutError
    if isinstance(exc, openai.APIStatusError):
        if exc.status_code == 429 and exc.code in _QUOTA_CODES:
            return False
        return exc.status_code in _TRANSIENT_STATUSES or exc.status_code >= 500
    return False


def _retry_after_seconds(exc: Exception) -> float | None:
    """Seconds the server asked us to wait (``retry-after-ms`` or ``Retry-After`` seconds or HTTP date)."""
    if not isinstance(exc, openai.APIStatusError):
        return None
    headers = exc.response.headers
    try:
        if (millis := headers.get("retry-after-ms")) is not None:
            return max(float(millis) / 1000, 0.0)
        if (value := headers.get("retry-after")) is None:
            return None
        try:
            return max(float(value), 0.0)
        except ValueError:
            moment = email.utils.parsedate_to_datetime(value)
            return max((moment - datetime.now(UTC)).total_seconds(), 0.0)
    except (TypeError, ValueError):
        return None


def _describe(exc: Exception) -> str:
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}: {exc.message}"
    return f"{type(exc).__name__}: {exc}"


def _chat_completion(raw: bytes) -> _Reply:
    """The reply read from its body: only what the client uses, straight from the bytes by pydantic-core against the
    shape a chat completion has (`_WireReply`), so that what it leaves out (the reply's id, each token's and each
    alternative's bytes) is never built as Python objects. Not validated whole as the SDK's ChatCompletion: with
    log-probabilities a reply holds two objects and a list per token, and building those cost several times the
    parse. A body not of that shape is read as `_chat_completion_lenient` reads it, which is what this reads too
    when the shape holds (a test holds them equal)."""
    try:
        data = _WIRE_REPLY.validate_json(raw, strict=True)
    except ValidationError:
        return _chat_completion_lenient(raw)
    if not data["choices"]:
        raise BrokenBody("reply body is not a chat completion")
    choice = data["choices"][0]
    message = choice.get("message") or {}
    entries = (choice.get("logprobs") or {}).get("content")
    return _Reply(
        content=message.get("content"),
        refusal=message.get("refusal"),
        finish_reason=choice.get("finish_reason"),
        usage=_usage_of(_object(data.get("usage"))),
        token_logprobs=TokenLogprobs.wire(entries) if entries else None,
        model=data.get("model"),
    )


# A chat completion's fields that the client reads, as the API sends them. Keys not named here are skipped unread.
class _WireAlternative(TypedDict):
    token: str
    logprob: float


class _WireToken(TypedDict):
    token: str
    logprob: float
    top_logprobs: NotRequired[list[_WireAlternative] | None]


class _WireLogprobs(TypedDict):
    content: NotRequired[list[_WireToken] | None]


class _WireMessage(TypedDict):
    content: NotRequired[str | None]
    refusal: NotRequired[str | None]


class _WireChoice(TypedDict):
    message: NotRequired[_WireMessage]
    finish_reason: NotRequired[str | None]
    logprobs: NotRequired[_WireLogprobs | None]


class _WireReply(TypedDict):
    choices: list[_WireChoice]
    model: NotRequired[str | None]
    usage: NotRequired[Any]


_WIRE_REPLY = TypeAdapter(_WireReply)


def _chat_completion_lenient(raw: bytes) -> _Reply:
    """A reply not of `_WireReply`'s shape, read leniently, as the SDK reads a reply: a field of the wrong type
    counts as absent. A body that is not JSON, or whose first choice is not an object, is a BrokenBody (transient);
    log-probabilities that do not read whole are none at all, since a token missing would shift every position
    after it."""
    try:
        data = pydantic_core.from_json(raw)
    except ValueError as exc:
        raise BrokenBody(f"reply body is not JSON ({exc})") from exc
    choices = data.get("choices") if isinstance(data, dict) else None
    choice = choices[0] if isinstance(choices, list) and choices else None
    if not isinstance(choice, dict):
        raise BrokenBody("reply body is not a chat completion")
    message = _object(choice.get("message"))
    return _Reply(
        content=_text(message.get("content")),
        refusal=_text(message.get("refusal")),
        finish_reason=_text(choice.get("finish_reason")),
        usage=_usage_of(_object(data.get("usage"))),
        token_logprobs=_token_logprobs(_object(choice.get("logprobs")).get("content")),
        model=_text(data.get("model")),
    )


def _object(value: object) -> dict:
    return value if isinstance(value, dict) else {}


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _usage_of(usage: dict) -> Usage:
    # Some OpenAI-compatible servers omit usage; zero is honest about what we were told.
    return Usage(
        prompt_tokens=_count(usage.get("prompt_tokens")),
        completion_tokens=_count(usage.get("completion_tokens")),
        total_tokens=_count(usage.get("total_tokens")),
        cached_tokens=_count(_object(usage.get("prompt_tokens_details")).get("cached_tokens")),
    )


# JSON mode without a schema: llama.cpp (and some others) wrap the object in a Markdown code fence.
_FENCED = re.compile(r"\A\s*```[A-Za-z0-9_-]*[ \t]*\r?\n(.*?)\r?\n?```\s*\Z", re.DOTALL)


def _parse_output(reply: _Reply, schema: type[T]) -> tuple[T, str]:
    if reply.refusal:
        raise _Malformed(f"model refused: {reply.refusal}")
    if reply.finish_reason == "length":
        # Whatever was written before the cut is not the judge's whole answer, even if it happens to parse.
        raise _Malformed("cut off by its token limit (finish_reason=length)")
    text = reply.content or ""
    if not text.strip():
        raise _Malformed(f"empty content (finish_reason={reply.finish_reason})")
    if fenced := _FENCED.match(text):
        text = fenced.group(1)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _Malformed(f"invalid JSON: {exc.msg} at char {exc.pos} (finish_reason={reply.finish_reason})") from None
    try:
        return schema.model_validate(data), text
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or '<root>'}: {error['msg']}" for error in exc.errors()
        )
        raise _Malformed(f"does not match {schema.__name__}: {problems}") from None


def _token_logprobs(entries: object) -> TokenLogprobs | None:
    if not isinstance(entries, list) or not entries:
        return None
    try:
        tokens = [
            TokenLogprob(
                entry["token"],
                float(entry["logprob"]),
                {alt["token"]: float(alt["logprob"]) for alt in entry.get("top_logprobs") or ()},
            )
            for entry in entries
        ]
        # Every token and alternative a string, or TypeError: asked of str.join, not of each one in Python.
        "".join(map(_TOKEN, tokens))
        "".join(chain.from_iterable(map(_ALTERNATIVES, tokens)))
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    return TokenLogprobs(tokens)


_TOKEN, _ALTERNATIVES = attrgetter("token"), attrgetter("top_logprobs")

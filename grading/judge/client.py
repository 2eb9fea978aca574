"""The HTTP client every judge backend uses: one OpenAI-compatible chat-completions call, validated.

Production code with no Django import, so plain pytest can drive it against the loopback fake server.

What the caller gets from :meth:`ChatJudgeClient.complete` is either a :class:`Completion` holding a pydantic
instance of the requested schema, or one of three errors that say what to do next:

- :class:`JudgeUnavailable`: transient trouble that outlasted our retries; try again on a later pass.
- :class:`JudgeMalformed`: the model twice answered something that is not the schema; never invent a score.
- :class:`JudgeRejected`: the server refuses the request itself (auth, bad request); retrying will not help.

Judge isolation (DESIGN 4.8): no request carries ``tools``, ``functions``, ``tool_choice``, ``function_call``.
"""

from __future__ import annotations

import email.utils
import json
import math
import random
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, Literal, TypeVar

import openai
from openai.types import CreateEmbeddingResponse
from openai.types.chat import ChatCompletion
from pydantic import BaseModel, ValidationError

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


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.total_tokens + other.total_tokens,
        )

    def as_json(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
        }


ZERO_USAGE = Usage(0, 0, 0)


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token; ``logprob`` and ``top_logprobs`` values are natural logs, as sent by the API."""

    token: str
    logprob: float
    top_logprobs: dict[str, float]


@dataclass(frozen=True)
class Completion(Generic[T]):
    parsed: T
    raw_text: str
    # Tokens billed for this call: summed over every reply that came back, a malformed first reply included.
    usage: Usage
    # None unless the client asked for logprobs and the server returned them.
    token_logprobs: list[TokenLogprob] | None
    # Chat-completions requests sent for this call, counting retries, the fallback and the malformed retry.
    attempts: int
    mode: ResponseMode


class _BrokenBody(Exception):
    """A 2xx whose body is not a chat completion (proxy error pages, truncated bodies)."""


class _Malformed(Exception):
    """The model's output does not parse or validate; the message names what was wrong."""


@dataclass(frozen=True)
class _RetryPolicy:
    """Exponential backoff with full jitter, honouring Retry-After, for transient errors only."""

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
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.model = model
        self.timeout = timeout
        self.want_logprobs = want_logprobs
        self.top_logprobs = top_logprobs
        # The SDK's own retries are off so that exactly one policy (ours) decides what is worth retrying.
        self._sdk = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=0)
        self._retry = _RetryPolicy(max_retries, backoff_base, backoff_cap, sleep)
        # Switched once, for the client's lifetime, when the server turns json_schema down.
        self._mode: ResponseMode = "json_schema"

    @property
    def mode(self) -> ResponseMode:
        """``json_object`` once the server has said it does not support ``json_schema``."""
        return self._mode

    def complete(self, *, system: str, user: str, schema: type[T]) -> Completion[T]:
        """Ask for one reply matching ``schema``.

        1. Send the request, retrying transient failures (and switching to json_object mode once if the server
           does not support json_schema).
        2. Parse and validate the content. If it is malformed, send one fresh request and parse that.
        3. Raise :class:`JudgeMalformed` naming the problem if the second reply is malformed too.
        """
        attempts = 0
        usage = ZERO_USAGE
        problem = ""
        for _ in range(2):
            reply, sent, mode = self._send(system=system, user=user, schema=schema)
            attempts += sent
            usage += _usage_of(reply)
            try:
                parsed, raw_text = _parse_output(reply, schema)
            except _Malformed as exc:
                problem = str(exc)
                continue
            return Completion(
                parsed=parsed,
                raw_text=raw_text,
                usage=usage,
                token_logprobs=_token_logprobs(reply) if self.want_logprobs else None,
                attempts=attempts,
                mode=mode,
            )
        raise JudgeMalformed(f"judge output malformed twice; last reply: {problem}")

    def _send(self, *, system: str, user: str, schema: type[BaseModel]) -> tuple[ChatCompletion, int, ResponseMode]:
        """One logical request: the reply, how many HTTP requests it took, and the mode that answered."""
        attempts = 0
        retries = 0
        while True:
            mode = self._mode
            attempts += 1
            try:
                return self._post(system=system, user=user, schema=schema, mode=mode), attempts, mode
            except (openai.OpenAIError, _BrokenBody) as exc:
                if mode == "json_schema" and _json_schema_unsupported(exc):
                    # Not a retry: the same request in the mode this server does support.
                    self._mode = "json_object"
                    continue
                retries = self._retry.backoff_or_raise(exc, retries, attempts)

    def _post(self, *, system: str, user: str, schema: type[BaseModel], mode: ResponseMode) -> ChatCompletion:
        # Deliberately no tools/functions parameters: the judge cannot act, only answer (DESIGN 4.8).
        extra: dict[str, Any] = {}
        if self.want_logprobs:
            extra = {"logprobs": True, "top_logprobs": self.top_logprobs}
        try:
            reply = self._sdk.chat.completions.create(
                model=self.model,
                messages=_messages(system=system, user=user, schema=schema, mode=mode),
                temperature=0,
                response_format=_response_format(schema, mode),  # type: ignore[arg-type]
                timeout=self.timeout,
                **extra,
            )
        except json.JSONDecodeError as exc:
            # The SDK trusts a JSON content-type and lets the decode error escape.
            raise _BrokenBody(f"reply body is not JSON ({exc.msg})") from exc
        # With a non-JSON content type the SDK hands back the raw text instead of a ChatCompletion.
        if not isinstance(reply, ChatCompletion) or not reply.choices:
            raise _BrokenBody("reply body is not a chat completion")
        return reply


class EmbeddingsClient:
    """Embeddings from any OpenAI-compatible ``/embeddings``, with the same timeout and retry policy."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str,
        timeout: float = 30.0,
        max_retries: int = 3,
        backoff_base: float = 0.5,
        backoff_cap: float = 8.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.model = model
        self.timeout = timeout
        self._sdk = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=0)
        self._retry = _RetryPolicy(max_retries, backoff_base, backoff_cap, sleep)

    def embed(self, texts: list[str], *, dimensions: int = 384) -> list[list[float]]:
        """One vector of ``dimensions`` floats per text, in input order."""
        if not texts:
            return []
        attempts = 0
        retries = 0
        while True:
            attempts += 1
            try:
                response = self._post(texts, dimensions)
                break
            except (openai.OpenAIError, _BrokenBody) as exc:
                retries = self._retry.backoff_or_raise(exc, retries, attempts)
        vectors = [item.embedding for item in sorted(response.data, key=lambda item: item.index)]
        if len(vectors) != len(texts) or any(len(v) != dimensions for v in vectors):
            raise JudgeMalformed(
                f"expected {len(texts)} embeddings of {dimensions} dimensions, "
                f"got {len(vectors)} of {sorted({len(v) for v in vectors})}"
            )
        return vectors

    def _post(self, texts: list[str], dimensions: int) -> CreateEmbeddingResponse:
        try:
            response = self._sdk.embeddings.create(
                model=self.model,
                input=texts,
                dimensions=dimensions,
                # Floats on the wire: no dependence on how the SDK decodes base64.
                encoding_format="float",
                timeout=self.timeout,
            )
        except json.JSONDecodeError as exc:
            raise _BrokenBody(f"reply body is not JSON ({exc.msg})") from exc
        if not isinstance(response, CreateEmbeddingResponse) or not response.data:
            raise _BrokenBody("reply body is not an embeddings list")
        return response


# -- score distributions ----------------------------------------------------------------------------------


def find_field_token(token_logprobs: Sequence[TokenLogprob] | None, field: str) -> int | None:
    """Index of the token holding the first digit of the value of JSON key ``field``, or None.

    Works on the joined text, so it does not care how the tokenizer split ``"overall": 7`` (``":`` may be
    one token, the digit may carry a leading space).
    """
    if not token_logprobs:
        return None
    text = "".join(t.token for t in token_logprobs)
    match = re.search(rf'"{re.escape(field)}"\s*:\s*(\d)', text)
    if match is None:
        return None
    return _token_at(token_logprobs, match.start(1))


def weighted_score(
    token_logprobs: Sequence[TokenLogprob] | None,
    *,
    field: str | None = None,
    token_index: int | None = None,
    candidates: Iterable[int] = range(1, 11),
) -> tuple[float, float] | None:
    """Probability-weighted mean score and its spread (standard deviation), or None when unknowable.

    The score token is ``token_index`` or, given ``field``, found by :func:`find_field_token`. Its top
    alternatives that are candidate scores (``"7"``, ``" 7"``) are renormalised to sum to 1.

    None when there are no logprobs, the field is missing, no alternative is a candidate, or the number
    is spread over several tokens (a tokenizer that writes "10" as "1" "0": the first digit's alternatives
    then mix 1 with 10-19 and cannot be read as a distribution over scores).
    """
    if (field is None) == (token_index is None):
        raise ValueError("give exactly one of field or token_index")
    if not token_logprobs:
        return None
    index = find_field_token(token_logprobs, field) if field is not None else token_index
    if index is None or not 0 <= index < len(token_logprobs):
        return None
    if _number_continues(token_logprobs, index):
        return None
    distribution = _candidate_distribution(token_logprobs[index], {str(c): c for c in candidates})
    if not distribution:
        return None
    mean = sum(p * score for score, p in distribution.items())
    variance = sum(p * (score - mean) ** 2 for score, p in distribution.items())
    return mean, math.sqrt(variance)


def _candidate_distribution(entry: TokenLogprob, candidates: dict[str, int]) -> dict[int, float]:
    """Score -> probability over the candidates present, renormalised; empty when none is present."""
    alternatives = dict(entry.top_logprobs)
    # The emitted token is part of the distribution even if the server left it out of top_logprobs.
    alternatives.setdefault(entry.token, entry.logprob)
    mass: dict[int, float] = {}
    for token, logprob in alternatives.items():
        score = candidates.get(token.strip())
        if score is not None:
            mass[score] = mass.get(score, 0.0) + math.exp(logprob)
    total = sum(mass.values())
    return {score: p / total for score, p in mass.items()} if total > 0 else {}


def _number_continues(token_logprobs: Sequence[TokenLogprob], index: int) -> bool:
    """True when the next token carries more digits of the same number."""
    following = token_logprobs[index + 1].token if index + 1 < len(token_logprobs) else ""
    return token_logprobs[index].token[-1:].isdigit() and following[:1].isdigit()


def _token_at(token_logprobs: Sequence[TokenLogprob], char_offset: int) -> int | None:
    end = 0
    for index, entry in enumerate(token_logprobs):
        end += len(entry.token)
        if char_offset < end:
            return index
    return None


# -- request and reply helpers ----------------------------------------------------------------------------


def _messages(*, system: str, user: str, schema: type[BaseModel], mode: ResponseMode) -> list[dict[str, str]]:
    if mode == "json_object":
        # json_object only promises *some* JSON object, so the schema has to travel in the prompt.
        system = (
            f"{system}\n\nReply with a single JSON object, and nothing else, that matches this JSON Schema:\n"
            f"{json.dumps(schema.model_json_schema())}"
        )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _response_format(schema: type[BaseModel], mode: ResponseMode) -> dict[str, Any]:
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


def _json_schema_unsupported(exc: Exception) -> bool:
    """A 400 that complains about response_format: the server lacks json_schema, json_object may work."""
    if not isinstance(exc, openai.BadRequestError):
        return False
    text = f"{exc.message} {exc.body}".lower()
    return "response_format" in text or "json_schema" in text


def _is_transient(exc: Exception) -> bool:
    if isinstance(exc, openai.APIConnectionError | _BrokenBody | openai.APIResponseValidationError):
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


def _usage_of(reply: ChatCompletion) -> Usage:
    # Some OpenAI-compatible servers omit usage; zero is honest about what we were told.
    if reply.usage is None:
        return ZERO_USAGE
    return Usage(
        prompt_tokens=reply.usage.prompt_tokens or 0,
        completion_tokens=reply.usage.completion_tokens or 0,
        total_tokens=reply.usage.total_tokens or 0,
    )


def _parse_output(reply: ChatCompletion, schema: type[T]) -> tuple[T, str]:
    choice = reply.choices[0]
    message = choice.message
    if getattr(message, "refusal", None):
        raise _Malformed(f"model refused: {message.refusal}")
    if choice.finish_reason == "length":
        # The model stopped at its token limit: what came back is not its whole answer, even when it parses.
        raise _Malformed("reply cut off at its token limit (finish_reason=length)")
    text = message.content or ""
    if not text.strip():
        raise _Malformed(f"empty content (finish_reason={choice.finish_reason})")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _Malformed(f"invalid JSON: {exc.msg} at char {exc.pos} (finish_reason={choice.finish_reason})") from None
    try:
        return schema.model_validate(data), text
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or '<root>'}: {error['msg']}" for error in exc.errors()
        )
        raise _Malformed(f"does not match {schema.__name__}: {problems}") from None


def _token_logprobs(reply: ChatCompletion) -> list[TokenLogprob] | None:
    logprobs = reply.choices[0].logprobs
    if logprobs is None or not logprobs.content:
        return None
    return [
        TokenLogprob(
            token=entry.token,
            logprob=entry.logprob,
            top_logprobs={alt.token: alt.logprob for alt in entry.top_logprobs or ()},
        )
        for entry in logprobs.content
    ]

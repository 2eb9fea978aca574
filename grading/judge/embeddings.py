"""The embeddings client: vectors from any OpenAI-compatible ``/embeddings`` endpoint, for org memory.

Not a judge call, but the same kind of server behind the same SDK: it shares the chat client's retry policy and
errors (:mod:`grading.judge.client`), so a transient failure is retried and reported the same way in both.
Production code with no Django import, so plain pytest can drive it against the loopback fake server.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import openai
from openai.types import CreateEmbeddingResponse

from grading.judge.client import BrokenBody, JudgeMalformed, RetryPolicy


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
        self._retry = RetryPolicy(max_retries, backoff_base, backoff_cap, sleep)

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
            except (openai.OpenAIError, BrokenBody) as exc:
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
            raise BrokenBody(f"reply body is not JSON ({exc.msg})") from exc
        if not isinstance(response, CreateEmbeddingResponse) or not response.data:
            raise BrokenBody("reply body is not an embeddings list")
        return response

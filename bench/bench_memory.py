"""Memory retrieval at 100,000 memory items: the HNSW top-10 against an exact scan, over 200 queries.

The items are generated learnings (topic words plus common words, 10-24 words each) embedded by the default
`hashing` embedder, so the vectors have the sparse, clustered shape production stores by default;
BENCH_MEMORY_VECTORS=random uses random unit vectors instead (no structure at all: the hard case for HNSW).
Rows go in by binary COPY with the HNSW index dropped, and the index is rebuilt from the definition it had
(one build is far faster than 100,000 inserts into the graph).

Each query runs the production query (`grading.reviews.memory.nearest_query` over the org's active learnings):
- HNSW: as the planner plans it, with `hnsw.ef_search` set per run (EXPLAIN must show the HNSW index);
- exact: `grading.reviews.memory.exact_nearest_query`, the production exact search (EXPLAIN must not show the index),
  i.e. a scan and a top-N sort.
Reported: recall@10 by id (and counting distance ties with the 10th exact neighbour as hits), the similarity the
HNSW results keep (how near its misses are), mean and p95 latency, and the latency ratio exact / HNSW.

Run: `make bench`, or with BENCH_MEMORY_ITEMS / BENCH_MEMORY_QUERIES to scale:
`BENCH_MEMORY_ITEMS=5000 DEBUG=1 TOLLGATE_DATA_DIR=.data/bench .venv/bin/python -c "import django,os;
os.environ.setdefault('DJANGO_SETTINGS_MODULE','reviewer.settings'); django.setup(); import bench.bench_memory as b;
b.main()"`
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import re
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from django.db import connection, transaction
from django.utils import timezone
from pgvector import Vector
from pgvector.psycopg.vector import register_vector_info
from psycopg.types import TypeInfo
from psycopg.types.json import Jsonb

from bench.common import fresh_org
from grading.models import EMBEDDING_DIMENSIONS, MemoryItem, Org
from grading.reviews.memory import HNSW_EF_SEARCH, HashingEmbedder, active_learnings, exact_nearest_query, nearest_query

K = 10
# pgvector's default, the one retrieval uses, and more: the sweep shows what more candidates buy.
EF_SEARCH = sorted({40, HNSW_EF_SEARCH, 200})
INDEX = "memory_embedding_hnsw"
SEED = 20250407
TOPICS = 300
WORDS_PER_TOPIC = 40
COMMON_WORDS = 2_000
_VECTOR_LITERAL = re.compile(r"'\[[^\]]*\]'::vector")
SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in ("a", "e", "i", "o", "u", "ai", "ou")]


@dataclass(frozen=True)
class Timing:
    ids: list[list[int]]
    distances: list[list[float]]
    seconds: list[float]

    @property
    def mean_ms(self) -> float:
        return statistics.fmean(self.seconds) * 1000

    @property
    def p95_ms(self) -> float:
        return sorted(self.seconds)[int(0.95 * (len(self.seconds) - 1))] * 1000


def main() -> None:
    items = int(os.environ.get("BENCH_MEMORY_ITEMS", "100000"))
    queries = int(os.environ.get("BENCH_MEMORY_QUERIES", "200"))
    vectors = os.environ.get("BENCH_MEMORY_VECTORS", "hashing")
    if vectors not in ("hashing", "random"):
        raise SystemExit(f"BENCH_MEMORY_VECTORS={vectors!r}: use hashing or random")
    org = fresh_org()
    make_vector = _vector_maker(vectors)

    started = time.perf_counter()
    definition = _copy_learnings(org, items, make_vector)
    loaded = time.perf_counter() - started
    started = time.perf_counter()
    _rebuild_index(definition)
    built = time.perf_counter() - started
    print(
        f"{items:,} learnings ({vectors} vectors, {EMBEDDING_DIMENSIONS} dims): embedded and copied in {loaded:.1f} s, "
        f"HNSW (m=16, ef_construction=64) built in {built:.1f} s; table {_size('grading_memoryitem')}, "
        f"index {_size(INDEX)}"
    )

    query_rng = random.Random(SEED + 1)
    query_vectors = [make_vector(query_rng) for _ in range(queries)]
    _assert_plans(org, query_vectors[0])

    exact = _run(org, query_vectors, exact=True)
    print(f"exact scan: mean {exact.mean_ms:.1f} ms, p95 {exact.p95_ms:.1f} ms over {queries} queries")
    for ef_search in EF_SEARCH:
        hnsw = _run(org, query_vectors, ef_search=ef_search)
        quality = _quality(hnsw, exact)
        used = " (retrieve_memory's)" if ef_search == HNSW_EF_SEARCH else ""
        print(
            f"HNSW ef_search={ef_search}{used}: recall@{K} {quality.recall:.3f} "
            f"(ties counted {quality.recall_ties:.3f}), "
            f"similarity kept {quality.similarity_kept:.3f}, mean {hnsw.mean_ms:.2f} ms, p95 {hnsw.p95_ms:.2f} ms; "
            f"latency ratio exact/HNSW {exact.mean_ms / hnsw.mean_ms:.1f}x"
        )


# -- data ---------------------------------------------------------------------------------------------------


def _vector_maker(kind: str) -> Callable[[random.Random], list[float]]:
    if kind == "random":
        return _random_unit_vector
    embedder = HashingEmbedder()
    vocabulary = _Vocabulary(random.Random(SEED))
    return lambda rng: embedder.embed([vocabulary.learning(rng)])[0]


def _random_unit_vector(rng: random.Random) -> list[float]:
    vector = [rng.gauss(0.0, 1.0) for _ in range(EMBEDDING_DIMENSIONS)]
    norm = math.sqrt(sum(v * v for v in vector))
    return [v / norm for v in vector]


class _Vocabulary:
    """Pseudo-words: each learning draws most words from one topic and the rest from Zipf-weighted common words."""

    def __init__(self, rng: random.Random) -> None:
        words = sorted({self._word(rng) for _ in range(COMMON_WORDS + TOPICS * WORDS_PER_TOPIC * 2)})
        rng.shuffle(words)
        self.common = words[:COMMON_WORDS]
        self.common_weights = [1.0 / rank for rank in range(1, COMMON_WORDS + 1)]
        rest = words[COMMON_WORDS:]
        self.topics = [rest[i * WORDS_PER_TOPIC : (i + 1) * WORDS_PER_TOPIC] for i in range(TOPICS)]

    @staticmethod
    def _word(rng: random.Random) -> str:
        return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4)))

    def learning(self, rng: random.Random) -> str:
        topic = rng.choice(self.topics)
        count = rng.randint(10, 24)
        on_topic = sum(rng.random() < 0.5 for _ in range(count))
        words = rng.choices(topic, k=on_topic) + rng.choices(self.common, self.common_weights, k=count - on_topic)
        rng.shuffle(words)
        return " ".join(words)


def _copy_learnings(org: Org, items: int, make_vector: Callable[[random.Random], list[float]]) -> str:
    """Binary COPY with the HNSW index dropped; returns the index's definition for `_rebuild_index`."""
    rng = random.Random(SEED)
    now = timezone.now()
    connection.ensure_connection()
    raw = connection.connection
    info = TypeInfo.fetch(raw, "vector")
    with raw.cursor() as cursor:
        # The vector adapters go on this cursor only: Django's own queries keep reading vectors as text.
        register_vector_info(cursor, info)
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [INDEX])
        (definition,) = cursor.fetchone()
        cursor.execute(f"DROP INDEX {INDEX}")
        copy_sql = (
            "COPY grading_memoryitem (org_id, kind, text, proof_terms, embedding, source, active, created_at) "
            "FROM STDIN WITH (FORMAT BINARY)"
        )
        with cursor.copy(copy_sql) as copy:
            copy.set_types(["bigint", "varchar", "text", "jsonb", "vector", "varchar", "bool", "timestamptz"])
            for number in range(items):
                vector = Vector(make_vector(rng))
                text = f"learning {number}"
                copy.write_row([org.pk, MemoryItem.Kind.LEARNING, text, Jsonb([]), vector, "import", True, now])
    return definition


def _rebuild_index(definition: str) -> None:
    """Recreate the index from the definition it had before the load, then refresh the planner's statistics."""
    with connection.cursor() as cursor:
        # Room for the whole graph in memory: a build that spills to disk is several times slower.
        cursor.execute("SET maintenance_work_mem = '1GB'")
        cursor.execute(definition)
        cursor.execute("RESET maintenance_work_mem")
        cursor.execute("ANALYZE grading_memoryitem")


def _size(relation: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_size_pretty(pg_total_relation_size(%s::regclass))", [relation])
        return cursor.fetchone()[0]


# -- queries ------------------------------------------------------------------------------------------------


def _assert_plans(org: Org, vector: list[float]) -> None:
    """The comparison means something only if one side really uses the HNSW index and the other really does not."""
    with transaction.atomic():
        hnsw_plan = nearest_query(active_learnings(org), vector, K).explain()
    exact_plan = exact_nearest_query(active_learnings(org), vector, K).explain()
    print(f"EXPLAIN (HNSW):  {_plan_summary(hnsw_plan)}")
    print(f"EXPLAIN (exact): {_plan_summary(exact_plan)}")
    if INDEX not in hnsw_plan:
        raise SystemExit(f"the planner did not use {INDEX}:\n{hnsw_plan}")
    if INDEX in exact_plan:
        raise SystemExit(f"the exact scan still used {INDEX}:\n{exact_plan}")


def _plan_summary(plan: str) -> str:
    """The plan's nodes on one line, without the 384 numbers of the query vector."""
    nodes = [_VECTOR_LITERAL.sub("'[…]'::vector", line.strip()) for line in plan.splitlines()]
    return " | ".join(re.sub(r"\s*\(cost=[^)]*\)", "", node) for node in nodes)


def _run(org: Org, vectors: list[list[float]], *, exact: bool = False, ef_search: int = 40) -> Timing:
    ids: list[list[int]] = []
    distances: list[list[float]] = []
    seconds: list[float] = []
    query = exact_nearest_query if exact else nearest_query
    with _planner(ef_search=ef_search):
        for vector in vectors[:5]:  # warm the caches and the plan; not timed
            list(query(active_learnings(org), vector, K))
        for vector in vectors:
            started = time.perf_counter()
            rows = list(query(active_learnings(org), vector, K).values_list("pk", "distance"))
            seconds.append(time.perf_counter() - started)
            ids.append([pk for pk, _ in rows])
            distances.append([distance for _, distance in rows])
    return Timing(ids, distances, seconds)


@contextlib.contextmanager
def _planner(*, ef_search: int) -> Iterator[None]:
    """`hnsw.ef_search` candidates for an HNSW scan, transaction-local."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT set_config('hnsw.ef_search', %s, true)", [str(ef_search)])
        yield


@dataclass(frozen=True)
class Quality:
    recall: float  # mean |HNSW top-K ∩ exact top-K| / K, by id
    recall_ties: float  # the same, counting as a hit any result no farther than the K-th exact neighbour
    similarity_kept: float  # mean cosine similarity of HNSW's K over that of the exact K: how near the misses are


def _quality(hnsw: Timing, exact: Timing) -> Quality:
    recall = recall_ties = kept = 0.0
    for found, truth, found_distances, truth_distances in zip(
        hnsw.ids, exact.ids, hnsw.distances, exact.distances, strict=True
    ):
        recall += len(set(found) & set(truth)) / K
        bound = truth_distances[-1] + 1e-6
        recall_ties += sum(1 for d in found_distances if d <= bound) / K
        kept += sum(1 - d for d in found_distances) / sum(1 - d for d in truth_distances)
    queries = len(exact.ids)
    return Quality(recall / queries, recall_ties / queries, kept / queries)

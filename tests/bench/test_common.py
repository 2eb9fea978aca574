"""The benchmarks' count of PostgreSQL's CPU: a query's parallel workers are PostgreSQL's work for that query."""

from django.db import connection

from bench.common import backend_cpu

# Parallel safe throughout, so under debug_parallel_query the whole count runs in one parallel worker.
COUNT = "SELECT count(*) FROM generate_series(1, 1500000) AS n WHERE mod(n, 7) = 3"


def _cpu_of_count(*, in_worker: bool) -> float:
    with connection.cursor() as cursor:
        # The suite's own server plans nothing in parallel (tests/conftest.py): allowed here, for this transaction.
        cursor.execute("SET LOCAL max_parallel_workers_per_gather = 2")
        cursor.execute(f"SET LOCAL debug_parallel_query = {'on' if in_worker else 'off'}")
        cursor.execute(f"EXPLAIN (COSTS OFF) {COUNT}")
        assert any("Gather" in line for (line,) in cursor.fetchall()) == in_worker  # the count runs where asked
        started = backend_cpu()
        cursor.execute(COUNT)
        cursor.fetchone()
        return backend_cpu() - started


def test_it_counts_the_cpu_of_a_querys_parallel_workers(db):
    in_backend = _cpu_of_count(in_worker=False)
    in_worker = _cpu_of_count(in_worker=True)
    assert in_backend > 0.05  # /proc counts in ticks of 10 ms: the query must take several
    assert in_worker > in_backend / 2, (in_worker, in_backend)

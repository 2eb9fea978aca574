"""The benchmarks' count of PostgreSQL's CPU: a query's parallel workers are PostgreSQL's work for that query."""

from bench.common import backend_cpu
from tests.builders.database import count_measured


def test_it_counts_the_cpu_of_a_querys_parallel_workers(db):
    in_backend = count_measured(backend_cpu, in_worker=False)
    in_worker = count_measured(backend_cpu, in_worker=True)
    assert in_backend > 0.05  # /proc counts in ticks of 10 ms: the query must take several
    assert in_worker > in_backend / 2, (in_worker, in_backend)

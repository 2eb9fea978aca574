"""The suite's own statements to PostgreSQL, beyond what the ORM says: they live here, as the app's live in the
modules that own them. A test asks for what it needs by name."""

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from functools import cache
from typing import TypeVar

import psycopg
from django.db import connection, connections

T = TypeVar("T")

# The suite's embedded server's own settings (tests/conftest.py `_suite_postgres_settings` says why).
_SUITE_SERVER_SETTINGS = {"fsync": "off", "max_parallel_workers_per_gather": "0"}


def suite_server_settings(url: str, *, on: bool) -> None:
    """Set the suite's own settings on the server at `url` (`on`), or reset them, and have it read them again. On a
    connection of its own in autocommit: ALTER SYSTEM refuses a transaction block."""
    with psycopg.connect(url, autocommit=True) as server:
        for name, value in _SUITE_SERVER_SETTINGS.items():
            server.execute(f"ALTER SYSTEM SET {name} = {value}" if on else f"ALTER SYSTEM RESET {name}")
        server.execute("SELECT pg_reload_conf()")


def started_on_a_connection_of_its_own(work: Callable[[], T]) -> Future[T]:
    """Start `work` in a thread of its own, so on a database connection of its own, as another worker's would: its
    future. The test's own transaction stays open meanwhile."""

    def run() -> T:
        try:
            return work()
        finally:
            connections.close_all()

    thread = ThreadPoolExecutor(max_workers=1)
    try:
        return thread.submit(run)
    finally:
        thread.shutdown(wait=False)


def on_a_connection_of_its_own(work: Callable[[], T]) -> T:
    """`work` run to its end on a connection of its own: its result, or its exception raised here."""
    return started_on_a_connection_of_its_own(work).result()


def migration_recorded(app: str, name: str, *, on: psycopg.Connection | None = None) -> None:
    """Record a migration as applied, as `migrate` does in the migration's own transaction: on the connection `on`
    (a migration's, opened apart), else the test's."""
    statement = "INSERT INTO django_migrations (app, name, applied) VALUES (%s, %s, now())"
    if on is not None:
        on.execute(statement, [app, name])
        return
    with connection.cursor() as cursor:
        cursor.execute(statement, [app, name])


def someone_waits_for_a_lock() -> bool:
    """Some session of the server waits for a lock another holds."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT EXISTS (SELECT FROM pg_locks WHERE NOT granted)")
        return cursor.fetchone()[0]


def foreign_keys_checked_now() -> None:
    """Check deferred foreign keys at once. A test's own transaction never commits, so what a worker's commit would
    refuse (a row pointing at one an erasure took) is refused here, inside the test, instead of never."""
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")


def table_analysed(table: str) -> None:
    """Fresh planner statistics for `table` (one of ours), for a test that asks which plan a statement gets."""
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {connection.ops.quote_name(table)}")


def backends_terminated(pids: list[int]) -> int:
    """End these PostgreSQL backends, as a failover ends a process's connections, and wait until they have ended (up
    to 5 s each); how many were ended. Not only signalled: a connection's client sees the end once the backend has
    sent its last message, as it would after a failover."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 5000)) FROM unnest(%s::int[]) AS pid", [pids]
        )
        return cursor.fetchone()[0]


@cache
def _counts_sql(tables: tuple[str, ...]) -> str:
    quote = connection.ops.quote_name
    return "SELECT " + ", ".join(f"(SELECT count(*) FROM {quote(table)})" for table in tables)  # noqa: S608 - our table names


def rows_counted(tables: tuple[str, ...]) -> tuple[int, ...]:
    """How many rows each of these tables (ours) holds, in one round trip: a refusal's before and after is read
    thousands of times by the fuzzers, where counting each table through the ORM took a quarter of their CPU."""
    with connection.cursor() as cursor:
        cursor.execute(_counts_sql(tables))
        return cursor.fetchone()


@cache
def _snapshot_sql(tables: tuple[str, ...], last_used: frozenset[str]) -> str:
    # Per table, its row count and the sum of its rows' 64-bit hashes (in any order: no sort), all in one round trip.
    # A row is hashed as its text, which tells rows apart as its JSON does at half the server's CPU (the digest was
    # most of PostgreSQL's work in the hostile-routes sweep). A key's last use is not a write a request owes: any
    # authenticated call may move it (grading/api/keys.py), so in the tables that keep one it is left out.
    quote = connection.ops.quote_name
    return " UNION ALL ".join(
        f"SELECT '{table}', count(*), sum({_row_hash(table in last_used)}) FROM {quote(table)} r"  # noqa: S608 - our table names
        for table in tables
    )


def _row_hash(has_last_use: bool) -> str:
    row = "(to_jsonb(r) - 'last_used_at')" if has_last_use else "r"
    return f"hashtextextended({row}::text, 0)"


@cache
def _tables(database: str) -> tuple[str, ...]:
    # The migrations make every table before the first test, and no test makes one: read the catalogue once per
    # database, not twice a request (it was 8% of the hostile-routes sweep).
    return tuple(sorted(t for t in connection.introspection.table_names() if t != "django_migrations"))


@cache
def _tables_with_last_use(database: str) -> frozenset[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND column_name = 'last_used_at'"
        )
        return frozenset(table for (table,) in cursor.fetchall())


def database_snapshot() -> dict[str, tuple[int, int]]:
    """Every table's rows, digested: equal before and after a refused request, or it inserted, changed or deleted
    something (row counts alone miss an update, or a delete with an insert)."""
    with connection.cursor() as cursor:
        database = connection.settings_dict["NAME"]
        cursor.execute(_snapshot_sql(_tables(database), _tables_with_last_use(database)))
        return {table: (count, digest) for table, count, digest in cursor.fetchall()}


# Parallel safe throughout, so under debug_parallel_query the whole count runs in one parallel worker.
_COUNT = "SELECT count(*) FROM generate_series(1, 1500000) AS n WHERE mod(n, 7) = 3"


def count_measured(cpu: Callable[[], float], *, in_worker: bool) -> float:
    """What `cpu` reads across a count that takes PostgreSQL a good part of a second, run in the backend or (with
    `in_worker`) in one parallel worker, which the suite's own server allows for this transaction only
    (tests/conftest.py). The plan is checked to run where asked."""
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL max_parallel_workers_per_gather = 2")
        cursor.execute(f"SET LOCAL debug_parallel_query = {'on' if in_worker else 'off'}")
        cursor.execute(f"EXPLAIN (COSTS OFF) {_COUNT}")
        assert any("Gather" in line for (line,) in cursor.fetchall()) == in_worker
        started = cpu()
        cursor.execute(_COUNT)
        cursor.fetchone()
        return cpu() - started

"""After a failover every pooled connection a process holds is dead. The next query gets a live one at once, not
after going through the dead ones one by one until the pool's timeout (reviewer/postgresql)."""

import pytest
from django.db import connection

from tests.builders.database import backends_terminated


@pytest.mark.django_db
def test_a_pool_whose_idle_connections_all_died_hands_out_a_live_one():
    pool = connection.pool
    taken = [pool.getconn() for _ in range(pool.max_size - 1)]  # every one but the test's own
    backends = [conn.info.backend_pid for conn in taken]
    for conn in taken:
        pool.putconn(conn)
    assert backends_terminated(backends) == len(backends)  # a failover, as these connections see it

    conn = pool.getconn()  # before: six dead in turn outlasted the pool's 30 s timeout (PoolTimeout)
    try:
        assert conn.execute("SELECT 1").fetchone() == (1,)
        assert conn.info.backend_pid not in backends
    finally:
        pool.putconn(conn)


@pytest.mark.django_db
def test_a_connection_handed_out_a_moment_ago_is_handed_out_again_without_a_round_trip():
    pool = connection.pool
    conn = pool.getconn()
    backend = conn.info.backend_pid
    conn.execute("SELECT 'the last statement it ran'")
    pool.putconn(conn)

    taken = []
    try:
        while not taken or taken[-1].info.backend_pid != backend:  # the pool hands out its idle ones in turn
            taken.append(pool.getconn())
    finally:
        for conn in taken:
            pool.putconn(conn)

    with connection.cursor() as cursor:
        cursor.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", [backend])
        assert cursor.fetchone() == ("SELECT 'the last statement it ran'",)  # before: '', the pool's check

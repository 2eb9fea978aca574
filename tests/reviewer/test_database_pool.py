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

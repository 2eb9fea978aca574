"""Django's PostgreSQL backend, with a connection pool that comes back at once after a failover.

Django builds the pool with psycopg_pool's health check, which tests the idle connection it is about to hand out and,
when that one is dead, takes the next after a wait of 0, 1, 2, 4, 8 and 16 s: after a failover ended every
connection a process held, its next query went through them one by one and gave up at the pool's 30 s timeout once
six were dead (a web request answered 500, a grading task waited and retried). Here the first dead connection found
makes the pool test every idle one at once (psycopg_pool's `ConnectionPool.check`: the dead dropped, new ones made),
so the next one handed out is alive or new. Django passes the pool its own `check=`, so no setting can change it.
"""

from functools import partial

from django.db.backends.postgresql import base
from psycopg import Connection
from psycopg_pool import ConnectionPool


def _alive_or_every_idle_checked(pool: ConnectionPool, conn: Connection) -> None:
    try:
        ConnectionPool.check_connection(conn)
    except Exception:
        pool.check()
        raise


class DatabaseWrapper(base.DatabaseWrapper):
    @property
    def pool(self) -> ConnectionPool | None:
        pool = super().pool
        # Django set the check when it made the pool (CONN_HEALTH_CHECKS); replaced once, on first use.
        if pool is not None and pool._check is ConnectionPool.check_connection:
            pool._check = partial(_alive_or_every_idle_checked, pool)
        return pool

"""Liveness of what Tollgate depends on. Workers are asked over the broker (a real round trip through
a running worker), not inferred from Redis answering.

Any org's API key may read this, so it says whether each part works and how many workers answered, and nothing
an attacker could use: no server versions, no host names (those are in the operators' own logs and `celery
inspect`)."""

import redis
from celery import current_app
from django.conf import settings
from django.db.backends.base.base import BaseDatabaseWrapper

_WORKER_PING_SECONDS = 1.0


def database_status(connection: BaseDatabaseWrapper) -> dict:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            row = cursor.fetchone()
    except Exception as exc:  # any failure to reach the database is the answer, not a crash
        return {"ok": False, "detail": f"unreachable: {type(exc).__name__}"}
    if row is None:
        return {"ok": False, "detail": "reachable, but the vector extension is missing (run migrate)"}
    return {"ok": True, "detail": "reachable, with the vector extension"}


def redis_status() -> dict:
    try:
        redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1.0).ping()
    except redis.RedisError as exc:
        return {"ok": False, "detail": f"unreachable: {type(exc).__name__}"}
    return {"ok": True, "detail": "answers PING"}


def worker_status() -> dict:
    try:
        replies = current_app.control.ping(timeout=_WORKER_PING_SECONDS)
    except Exception as exc:  # a broker failure means no worker can be reached either
        return {"ok": False, "detail": f"could not ask workers: {type(exc).__name__}", "count": 0}
    answered = len({name for reply in replies for name in reply})
    if not answered:
        return {"ok": False, "detail": f"no worker answered within {_WORKER_PING_SECONDS:g}s", "count": 0}
    return {"ok": True, "detail": f"{answered} worker(s) answered", "count": answered}

"""Whether an item's grading task still exists, asked of the two places a task can be: the broker and a live worker.

Each enqueue gives the item a ticket, the Celery task id of the task that owes it a review (`grading_task_id`,
committed with `queued_at` in the transaction that decided to grade it: the ticket is the outbox row). The task
is in flight while

1. its message is in the broker: waiting in a queue, or delivered to a worker and not acknowledged yet (tasks are
   acknowledged late, so a running task's message is still there); read from Redis, where kombu keeps each queue
   as a list per priority step and delivered messages in one hash until they are acknowledged;
2. and, once delivered, while the worker running it lives: the task holds a session advisory lock on each of
   its items until it is done with that one, and PostgreSQL drops the locks the moment the worker's lock session
   dies (a SIGKILL, a lost machine), with no time limit or visibility timeout to wait out. The locks live in one
   session per worker process (`_LockSession`), not on the grading thread's connection: with a connection pool a
   grader hands its connection back while the judge thinks, and a session lock would go with it to another thread.

A ticket in neither place was lost (a broker that lost its queue, a worker that died, a send that failed) and the
planner sends the item again. Sending one twice costs little: the lock makes a second task for an item wait for
the first, which then finds the review written and does not call the judge again (the identity check in the
graders), and the review identity constraint makes a second review impossible anyway.

Why not trust `queued_at` for a while: a queue can hold work for longer than any fixed time, and a lost task is
no more likely to come back after a time limit than before it.
"""

import contextlib
import itertools
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
import redis
from django.conf import settings
from django.db import DatabaseError, OperationalError, connection
from kombu.transport.redis import Channel

from grading.models import ItemKind, Review
from grading.reviews.sql import ticket_return

logger = logging.getLogger(__name__)
T = TypeVar("T")

# Advisory lock keys: 16 bits that name Tollgate, 8 that name the kind of item, 40 for its primary key.
_LOCK_NAMESPACE = 0x7467  # "tg"
_KIND_CODES = {ItemKind.CONVERSATION: 1, ItemKind.DRAFT: 2}
_KINDS_BY_CODE = {code: kind for kind, code in _KIND_CODES.items()}
_PK_BITS = 40
_CENSUS_CHUNK = 1000


def lock_key(kind: str, item_id: int) -> int:
    """The item's advisory lock key (pg_locks shows it as classid, objid with objsubid 1)."""
    return (_LOCK_NAMESPACE << 48) | (_KIND_CODES[kind] << _PK_BITS) | item_id


def grade_each(kind: str, item_ids: Sequence[int], grade: Callable[[int], T], *, task_id: str) -> list[T | None]:
    """Grade a task's items one after another (`grade(item_id)`) under their grading locks, then hand each ticket back.

    The locks are session-level advisory locks, taken outside any transaction (the judge is called while they are
    held), and waited for: a second task for an item waits until the first is done with it, then finds its review.
    Every item's lock is taken before the first is graded, in key order (two tasks sharing items cannot wait for
    each other): a delivered task's items count as in flight while their locks are held, the ones still waiting
    their turn included. Each item's lock is let go, and its ticket handed back if it is still this task's, as soon
    as that item is done (by the review's own transaction when `grade` returns a review whose `ticket_returned`
    says so, one statement less per item). A database error stops the task and keeps the tickets of the items not
    done (the task is retried under the same id, or the next recovery finds it lost); any other error ends that
    item alone: its ticket is handed back, so a task that fails for good is not sent again every minute (the next
    grading pass tries the item again), the other items are graded, and the first such error is raised at the end.
    """
    keys = {item_id: lock_key(kind, item_id) for item_id in item_ids}
    waiting = sorted(set(keys.values()))
    held: list[int] = []
    results: list[T | None] = []
    failure: Exception | None = None
    try:
        held += _LOCKS.take_free(waiting)  # nearly always all of them, in one statement
        for key in waiting[len(held) :]:
            _LOCKS.acquire(key)
            held.append(key)
        for item_id in keys:
            try:
                results.append(grade(item_id))
            except DatabaseError:
                raise
            except Exception as exc:  # one item's failure; raised once the others are graded
                failure = failure or exc
                results.append(None)
            held.remove(keys[item_id])
            _LOCKS.release(keys[item_id])
            if not (isinstance(results[-1], Review) and results[-1].ticket_returned):
                with contextlib.suppress(DatabaseError):  # the ticket is kept for the recovery then
                    ticket_return(kind=kind, item_id=item_id, task_id=task_id)
    finally:
        for key in held:
            _LOCKS.release(key)
    if failure is not None:
        raise failure
    return results


class _LockSession:
    """This process's PostgreSQL session for grading locks, shared by its threads.

    One session holds every lock the process's tasks hold, so the locks die with the process and with nothing
    else, and cost one connection per process however many tasks are in flight. A session's advisory locks
    stack (taking a held key again succeeds), so threads of one process wait for each other here, by key;
    tasks of other processes wait in PostgreSQL, polled with `pg_try_advisory_lock` so that a waiting thread
    never holds the shared session. A session lost to the network or a failover is opened again, and takes
    back the keys still held: until then another process may start on such an item, which the graders'
    identity check and the review identity constraint make harmless.
    """

    _POLL_FIRST, _POLL_MAX = 0.05, 1.0  # seconds between tries while another process grades the item

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._held: set[int] = set()
        self._session: psycopg.Connection | None = None
        self._pid = 0

    def take_free(self, keys: Sequence[int]) -> list[int]:
        """Take the keys from the first on that no one holds, up to the first one someone does, in one statement;
        return them. The rest are for `acquire`, one at a time and in order, so a task waits for a key only while
        it holds every key before it (two tasks sharing items cannot wait for each other)."""
        with self._mutex:
            # A key in _held is one another thread of this process grades (session locks stack in PostgreSQL).
            free = list(itertools.takewhile(lambda key: key not in self._held, keys))
            if not free:
                return []
            granted = self._execute(
                "SELECT array_agg(pg_try_advisory_lock(key) ORDER BY n)"
                " FROM unnest(%s::bigint[]) WITH ORDINALITY AS free(key, n)",
                free,
            )
            taken = list(itertools.takewhile(bool, granted))
            beyond = [key for key, got in zip(free[len(taken) :], granted[len(taken) :], strict=True) if got]
            if beyond:  # taken past one another task holds: let them go, to be waited for in order
                self._execute("SELECT count(pg_advisory_unlock(key)) FROM unnest(%s::bigint[]) AS key", beyond)
            self._held.update(free[: len(taken)])
            return free[: len(taken)]

    def acquire(self, key: int) -> None:
        delay = self._POLL_FIRST
        while not self.take_free([key]):
            time.sleep(delay)
            delay = min(delay * 2, self._POLL_MAX)

    def release(self, key: int) -> None:
        with self._mutex:
            self._held.discard(key)
            with contextlib.suppress(DatabaseError):  # a lost session has released the lock already
                self._execute("SELECT pg_advisory_unlock(%s)", key)

    def _execute(self, sql: str, keys: int | list[int]) -> Any:
        """Run a lock function in the session (under the mutex), reopening a lost session once; return the value
        of its one row. A database still unreachable raises Django's OperationalError, which the grading tasks
        retry on."""
        try:
            return self._cursor_value(sql, keys)
        except psycopg.OperationalError:
            self._close()
        try:
            return self._cursor_value(sql, keys)
        except psycopg.OperationalError as exc:
            self._close()
            raise OperationalError(str(exc)) from exc

    def _cursor_value(self, sql: str, keys: int | list[int]) -> Any:
        session = self._open()
        return session.execute(sql, [keys]).fetchone()[0]

    def _open(self) -> psycopg.Connection:
        # A forked child (the prefork pool) must not share its parent's socket: it opens a session of its own.
        if self._session is None or self._session.closed or self._pid != os.getpid():
            params = connection.get_connection_params()
            params.pop("cursor_factory", None)
            params["application_name"] = "tollgate grading locks"
            self._session = psycopg.connect(**params, autocommit=True)
            self._pid = os.getpid()
            for key in self._held:  # taken back after a lost session
                self._session.execute("SELECT pg_try_advisory_lock(%s)", [key])
        return self._session

    def close(self) -> None:
        """End the session (its locks go with it): at a worker's shutdown, or a test process's end."""
        with self._mutex:
            self._held.clear()
            self._close()

    def _close(self) -> None:
        if self._session is not None and self._pid == os.getpid():
            with contextlib.suppress(psycopg.Error):
                self._session.close()
        self._session = None


_LOCKS = _LockSession()
lock_session_close = _LOCKS.close


def items_being_graded() -> set[tuple[str, int]]:
    """(kind, id) of every item a live worker holds the grading lock of, in this database."""
    # Plain SQL beside the locks it reads: pg_locks is PostgreSQL's own view, with no model.
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT (classid::bigint << 32) | objid::bigint FROM pg_locks
            WHERE locktype = 'advisory' AND objsubid = 1 AND granted
              AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
            """
        )
        keys = [row[0] for row in cursor.fetchall()]
    held = set()
    for key in keys:
        if key >> 48 != _LOCK_NAMESPACE:
            continue
        kind = _KINDS_BY_CODE.get((key >> _PK_BITS) & 0xFF)
        if kind is not None:
            held.add((kind, key & ((1 << _PK_BITS) - 1)))
    return held


@dataclass(frozen=True)
class BrokerTasks:
    """Task ids the broker holds: `waiting` in a queue, `delivered` to a worker and not acknowledged."""

    waiting: frozenset[str]
    delivered: frozenset[str]


def broker_tasks(queues: Iterable[str]) -> BrokerTasks | None:
    """Read the task ids in `queues` and in the delivered-but-unacknowledged hash; None if Redis cannot be read
    (the caller must then assume nothing was lost: it cannot tell)."""
    client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=5.0, socket_connect_timeout=5.0)
    try:
        waiting = set()
        for queue in queues:
            for key in _priority_lists(queue):
                start = 0
                while batch := client.lrange(key, start, start + _CENSUS_CHUNK - 1):
                    waiting.update(_task_id(raw) for raw in batch)
                    start += len(batch)
        delivered = {_task_id(raw, delivered=True) for raw in client.hvals(Channel.unacked_key)}
    except redis.RedisError as exc:
        logger.warning("could not read the broker's queues (%s): no grading task is taken for lost", exc)
        return None
    finally:
        client.close()
    return BrokerTasks(frozenset(waiting - {""}), frozenset(delivered - {""}))


def _priority_lists(queue: str) -> list[str]:
    """The Redis lists kombu keeps one queue in: the queue's name for priority 0, a suffix for each other step."""
    return [queue if step == 0 else f"{queue}{Channel.sep}{step}" for step in Channel.priority_steps]


def _task_id(raw: bytes, *, delivered: bool = False) -> str:
    """The task id in a kombu message (protocol 2 puts it in the headers); delivered ones are stored with their
    exchange and routing key."""
    try:
        message = json.loads(raw)
        if delivered:
            message = message[0]
        return str(message["headers"]["id"])
    except (ValueError, KeyError, IndexError, TypeError):
        return ""  # not a Celery task message: nothing of ours

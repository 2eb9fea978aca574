"""The suite's real processes: where the repository is, the address a Celery worker started by a test reaches the
test database at, waiting for a worker (or anything another process does), and reading its broker."""

import json
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

import redis
from django.conf import settings
from kombu.transport.redis import Channel

from grading.delivery.enqueue import queue_names
from grading.reviews.inflight import broker_tasks

REPO_ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    """A loopback port nothing listens on now, for a server a test starts."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def database_url(settings_dict: dict) -> str:
    """A DATABASE_URL for the database Django is using now (the test database, once it exists)."""
    credentials = quote(settings_dict["USER"] or "")
    if settings_dict["PASSWORD"]:
        credentials += ":" + quote(settings_dict["PASSWORD"])
    host = settings_dict["HOST"] or ""
    if host.startswith("/"):  # a unix socket directory
        return f"postgresql://{credentials}@/{settings_dict['NAME']}?host={quote(host)}"
    port = f":{settings_dict['PORT']}" if settings_dict["PORT"] else ""
    return f"postgresql://{credentials}@{host}{port}/{settings_dict['NAME']}"


def wait_for_worker(app, name: str, worker: subprocess.Popen, log_path: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if worker.poll() is not None:
            raise RuntimeError(f"the Celery worker exited with {worker.returncode}:\n{log_path.read_text()}")
        if app.control.ping(destination=[name], timeout=0.5):
            return
    raise RuntimeError(f"the Celery worker did not answer within 60 s:\n{log_path.read_text()}")


def wait_until(
    condition,
    *,
    timeout: float = 30.0,
    interval: float = 0.1,
    message: str = "condition",
    explain: Callable[[], str] | None = None,
):
    """Poll `condition()` until it returns something truthy; the worker runs in another process. On a timeout,
    `explain()` (what the processes were doing then) is added to the failure."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(interval)
    seen = f"\n{explain()}" if explain else ""
    raise AssertionError(f"timed out after {timeout:g}s waiting for {message}{seen}")


def pool_processes(app, node: str) -> list[int]:
    """The pids of a worker's pool processes: the ones that run tasks."""
    stats = wait_until(lambda: app.control.inspect(destination=[node], timeout=2.0).stats(), message="worker stats")
    return list(stats[node]["pool"]["processes"])


def workers_idle(app, nodes: list[str], *, timeout: float = 60.0) -> None:
    """Wait until none of the workers named is running a task (a worker that does not answer, killed by its test,
    runs none)."""

    def idle() -> bool:
        active = app.control.inspect(destination=nodes, timeout=2.0).active() or {}
        return all(not tasks for tasks in active.values())

    wait_until(idle, timeout=timeout, interval=0.2, message=f"{', '.join(nodes)} to finish their tasks")


def workers_settled(app, nodes: list[str]) -> None:
    """End a test's work on the session's workers: wait for the tasks they are running, then drop what would run
    later (prefetched, waiting out a retry's countdown, still queued). Left alone, such a task runs in a later test
    and takes a reply that test scripted on the shared fake judge."""
    workers_idle(app, nodes)
    inspect = app.control.inspect(destination=nodes, timeout=2.0)
    waiting = [task["id"] for tasks in (inspect.reserved() or {}).values() for task in tasks]
    waiting += [entry["request"]["id"] for entries in (inspect.scheduled() or {}).values() for entry in entries]
    if waiting:
        app.control.revoke(waiting, destination=nodes)
    app.control.purge()
    workers_idle(app, nodes)  # a task that started between the look and the revoke


def broker() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL)


def task_census(app, node: str, task_ids: set[str], log_path: Path | None = None) -> str:
    """Where the tasks `task_ids` are (waiting in a queue, delivered and unacknowledged, or in neither), what the
    worker `node` says it runs and holds, and its log's end: what a test that timed out waiting on them prints."""
    tasks = broker_tasks(queue_names())
    waiting, delivered = (tasks.waiting, tasks.delivered) if tasks else (frozenset(), frozenset())
    inspect = app.control.inspect(destination=[node], timeout=2.0)
    lines = [
        f"of {len(task_ids)} tasks: {len(task_ids & waiting)} waiting, {len(task_ids & delivered)} delivered and "
        f"unacknowledged, {len(task_ids - waiting - delivered)} in neither",
        f"{node} runs {inspect.active()} and holds {inspect.reserved()}",
    ]
    if log_path is not None:
        lines += ["its log ends:", log_end(log_path)]
    return "\n".join(lines)


def log_end(log_path: Path) -> str:
    """A process's log's last lines: enough for a traceback and the line above it that says what ended."""
    return "\n".join(log_path.read_text(errors="replace").splitlines()[-80:])


def forget_delivered(task_ids: set[str]) -> None:
    """Drop messages a killed worker left delivered and unacknowledged: kombu would put them back in their queue
    after the visibility timeout, long after this test and its rows are gone."""
    client = broker()
    for tag, raw in client.hgetall(Channel.unacked_key).items():
        if json.loads(raw)[0]["headers"]["id"] in task_ids:
            client.hdel(Channel.unacked_key, tag)
            client.zrem(Channel.unacked_index_key, tag)

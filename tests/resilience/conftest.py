"""Real processes to break: Celery workers and beats started (and killed) by the test, the suite's own Redis
stopped and started again, PostgreSQL connections terminated. The session's worker (tests/conftest.py) keeps
running through all of it, as a deployment's other machines would.
"""

import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.conf import settings

from reviewer import embedded
from tests.builders.processes import REPO_ROOT, database_url


def worker_environment(fake_llm_server, **extra: str) -> dict[str, str]:
    """What the session's worker is started with (tests/conftest.py): the test database, Redis, the fake judge."""
    return (
        os.environ
        | {
            "DATABASE_URL": database_url(settings.DATABASES["default"]),
            "REDIS_URL": settings.REDIS_URL,
            "JUDGE_BASE_URL": fake_llm_server.base_url,
            "JUDGE_API_KEY": "test-key",
            "JUDGE_TIMEOUT_SECONDS": "5",
            "OUTBOUND_ALLOWED_NETWORKS": "127.0.0.1/32",
        }
        | extra
    )


@dataclass
class Started:
    """A Celery process the test started in a session of its own, so that it can be killed whole."""

    process: subprocess.Popen
    log_path: Path
    name: str

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL the process and every child it forked: a machine that is gone, not one shutting down."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()


def start_celery(tmp_path: Path, env: dict[str, str], *arguments: str, name: str) -> Started:
    log_path = tmp_path / f"{name}.log"
    command = [sys.executable, "-m", "celery", "-A", "reviewer", *arguments]
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            command, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    return Started(process, log_path, name)


@pytest.fixture
def celery_processes(tmp_path, fake_llm_server):
    """`start(kind, *options, env=...)` starts a `celery worker` (waiting until it answers a ping) or a `celery
    beat`; everything started is stopped when the test ends."""
    from reviewer.celery import app

    started: list[Started] = []

    def start(kind: str, *options: str, **extra_env: str) -> Started:
        env = worker_environment(fake_llm_server, **extra_env)
        if kind == "worker":
            name = f"resilience-{uuid.uuid4().hex[:8]}@localhost"
            process = start_celery(
                tmp_path, env, "worker", "-n", name, "-l", "info", "--include", "tests.fakes.canary_tasks", *options,
                name=name,
            )  # fmt: skip
            started.append(process)
            wait_for_worker(app, process)
        else:
            name = f"beat-{len(started)}"
            schedule = ("--scheduler", "django_celery_beat.schedulers:DatabaseScheduler")
            process = start_celery(tmp_path, env, "beat", "-l", "info", *schedule, *options, name=name)
            started.append(process)
        return process

    yield start
    for process in started:
        process.stop()


def wait_for_worker(app, worker: Started, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if worker.process.poll() is not None:
            raise RuntimeError(f"worker {worker.name} exited with {worker.process.returncode}:\n{worker.log()}")
        if app.control.ping(destination=[worker.name], timeout=0.5):
            return
    raise RuntimeError(f"worker {worker.name} did not answer within {timeout:g} s:\n{worker.log()}")


# --- the suite's Redis ------------------------------------------------------------------------------------


@pytest.fixture
def embedded_redis():
    """The suite's private Redis, to stop and start again; only the embedded server can be restarted by a test."""
    if os.environ.get("REDIS_URL"):
        pytest.skip("REDIS_URL names an external Redis: a test cannot restart it")
    return EmbeddedRedis(Path(settings.DATA_DIR))


class EmbeddedRedis:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir

    def stop(self, *, lose_data: bool = False) -> None:
        """Stop it; with `lose_data`, as a server without persistence (or a new machine) would come back."""
        assert embedded.redis_stop(self.data_dir), "the embedded Redis was not running"
        if lose_data:
            (self.data_dir.resolve() / "redis" / "appendonly.aof").unlink(missing_ok=True)

    def start(self) -> None:
        assert embedded.redis_url(self.data_dir) == settings.REDIS_URL  # the same address, so every client returns

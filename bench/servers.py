"""gunicorn and a Celery worker on the bench's own servers, as production runs them, and the CPU time of process
trees: what the benchmarks that go through real HTTP and real workers share (bench_load, bench_gate)."""

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
from django.conf import settings

REPO_ROOT = Path(__file__).resolve().parent.parent


class WebAndWorker:
    """gunicorn (2 sync workers, production settings) and a Celery worker (2 processes) on the bench's own
    PostgreSQL and Redis; their process trees' CPU time, with PostgreSQL's and Redis's."""

    def __init__(self, judge_url: str) -> None:
        self.port = _free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.env = os.environ | {
            "DEBUG": "0",
            "SECRET_KEY": secrets.token_urlsafe(48),
            "ALLOWED_HOSTS": "127.0.0.1",
            "SECURE_SSL_REDIRECT": "0",  # plain HTTP on loopback: the TLS proxy is not part of the measurement
            "SESSION_COOKIE_SECURE": "0",
            "CSRF_COOKIE_SECURE": "0",
            "DATABASE_URL": settings.DATABASE_URL,
            "REDIS_URL": settings.REDIS_URL,
            "JUDGE_BASE_URL": judge_url,
            "JUDGE_API_KEY": "bench",
            "LOG_LEVEL": "WARNING",
            "STATIC_ROOT": str(Path(settings.DATA_DIR) / "bench-static"),
        }
        self.processes: list[subprocess.Popen] = []

    def __enter__(self) -> "WebAndWorker":
        # With DEBUG off, pages name their static files by the hashes collectstatic writes down (docs/production.md).
        collectstatic = [sys.executable, "manage.py", "collectstatic", "--noinput", "--verbosity", "0"]
        subprocess.run(collectstatic, cwd=REPO_ROOT, env=self.env, check=True)
        web = [sys.executable, "-m", "gunicorn", "reviewer.wsgi:application", "-w", "2", "-b", f"127.0.0.1:{self.port}"]
        worker = [sys.executable, "-m", "celery", "-A", "reviewer", "worker", "-Q", "judge,default", "-c", "2",
                  "-n", f"bench-{self.port}@localhost", "-l", "warning"]  # fmt: skip
        for command in (web, worker):
            self.processes.append(subprocess.Popen(command, cwd=REPO_ROOT, env=self.env, start_new_session=True))
        deadline = time.monotonic() + 60
        while not _answers(self.base_url + "/login/"):
            if time.monotonic() > deadline:
                raise RuntimeError("gunicorn did not answer within 60 s")
            time.sleep(0.2)
        from reviewer.celery import app

        while not app.control.ping(destination=[f"bench-{self.port}@localhost"], timeout=0.5):
            if time.monotonic() > deadline:
                raise RuntimeError("the Celery worker did not answer within 60 s")
        return self

    def __exit__(self, *exc_info) -> None:
        for process in self.processes:
            os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)

    def cpu(self) -> dict[str, float]:
        web, worker = self.processes
        return {
            "gunicorn (2 workers)": tree_cpu(web.pid),
            "Celery worker (2 processes)": tree_cpu(worker.pid),
            "PostgreSQL": tree_cpu(_pid_from(Path(settings.DATA_DIR) / "postgres" / "postmaster.pid")),
            "Redis": tree_cpu(_pid_from(Path(settings.DATA_DIR) / "redis" / "redis.pid")),
            "this process (clients, judge)": tree_cpu(os.getpid(), children=False),
        }


def tree_cpu(pid: int, *, children: bool = True) -> float:
    """User + system seconds of a process, its live descendants, and the descendants it has reaped."""
    root = psutil.Process(pid)
    processes = [root, *(root.children(recursive=True) if children else [])]
    total = 0.0
    for process in processes:
        try:
            times = process.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
        if children:
            total += times.children_user + times.children_system
    return total


def _pid_from(path: Path) -> int:
    return int(path.read_text().split()[0])


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False

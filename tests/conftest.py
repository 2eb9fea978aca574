"""Personas, real services and fakes shared by the whole suite.

Personas: an operator, an operator of another org, a criteria admin, a stakeholder, a
signed-in user with no role, and anonymous. Services: a real Celery worker process and a loopback
server speaking the OpenAI chat-completions protocol.
"""

import gc
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client, override_settings

from grading.models import Org
from reviewer.models import Role
from tests.builders.database import suite_server_settings
from tests.builders.judges import configure_judges, judge_config
from tests.builders.people import make_person, persona_criteria_admin, persona_operator, persona_org
from tests.builders.processes import REPO_ROOT, database_url, log_end, wait_for_worker, workers_settled
from tests.fakes.openai_server import FakeLLM
from tests.fakes.smtp_server import SmtpServer

# --- the real-judge tests: a step of their own -----------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--realjudge",
        action="store_true",
        help="run the real-judge tests (tests/realjudge/) too; `make test-realjudge` runs them alone",
    )


# A test that starts a process or a server of its own (Chromium, a Celery worker, a live HTTP server, nginx and
# gunicorn) takes seconds, whatever it asserts: it is slow by the fixtures it uses, without a mark to forget. One that
# starts it in its own body (a command, an embedded server), or loads a model, says so: `@pytest.mark.slow`.
STARTS_PROCESSES = {"browser", "celery_worker", "deployment", "live_server"}


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by the marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The real-judge tests run when asked (`--realjudge`). Their model server holds a core for minutes under the
    suite's load (94 s quiet, up to 315 s), and inside `make test` one of its two workers waited on it; `.ci/run`
    runs them after `make test`, as `make test-realjudge`, and fails as for any other test."""
    for item in items:
        if STARTS_PROCESSES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    if config.getoption("realjudge"):
        return
    step = pytest.mark.skip(reason="the real-judge tests run on their own: make test-realjudge (pytest --realjudge)")
    for item in items:
        if item.get_closest_marker("realjudge"):
            item.add_marker(step)


@pytest.hookimpl(trylast=True, specname="pytest_collection_modifyitems")
def pytest_collection_modifyitems_slow_last(items: list[pytest.Item]) -> None:
    """The slow tests run after the others (`QuickLoopClock`): sorted last of all, since pytest-django sorts the
    tests by their kind of database access first, and a stable sort keeps its order within the quick and the
    slow."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is not None)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection imported (Django, the app, hypothesis, the tests) lives as long as the process, and each full
    collection of the garbage collector walked it again: frozen, those collections walk only what the tests make."""
    gc.collect()  # garbage frozen would never be collected
    gc.freeze()


# --- the quick loop's time, from the whole suite's run ------------------------------------------------


class QuickLoopClock:
    """How long `pytest -m "not slow"` takes, read off a run of the whole suite without running it twice: the
    slow tests are collected last (a stable sort, the same on every xdist worker, which hands tests out in
    collection order), so the quick loop is done when its last test's report arrives. A worker that reaches the
    slow tests first runs them beside the other's last quick ones, so the figure errs long, never short."""

    def __init__(self) -> None:
        self.began = time.monotonic()
        self.quick_tests = 0
        self.quick_done = self.began

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "teardown" and "slow" not in report.keywords:
            self.quick_tests += 1
            self.quick_done = time.monotonic()

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.quick_tests:
            terminalreporter.write_line(
                f"the quick loop (-m 'not slow'): {self.quick_tests} tests done "
                f"{self.quick_done - self.began:.1f} s after the session began"
            )


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the xdist controller, or a run without xdist
        config.pluginmanager.register(QuickLoopClock(), "quick-loop-clock")


# --- the suite's own PostgreSQL -------------------------------------------------------------------


@pytest.fixture(autouse=True, scope="session")
def _suite_postgres_settings() -> Iterator[None]:
    """The suite's embedded PostgreSQL (under TOLLGATE_DATA_DIR) runs the session with two settings of its own:
    - it writes without waiting for the disk: every commit of a transactional test, a worker or gunicorn waited on
      fsync, and a transactional test's flush of some 60 tables took 0.2 to 1.5 s on a shared disk (0.06 s
      without). What the suite kills is processes, PostgreSQL's among them, and their writes are in the kernel all
      the same: only a machine that loses power loses them;
    - it plans no query in parallel: the tests' rolled-back rows leave tables of dead pages that vacuum cannot take
      while a module's transaction stays open (the demo's, the hostile routes' world), the planner then scans them
      with two workers forked for the one query, and the database digest a hostile request takes before and after
      cost PostgreSQL 275 s of CPU for one file where it cost 35 s without.
    Set before the test database is made, reset at the end; a server given by DATABASE_URL is left as it is.
    Through a connection of its own: Django's pool, opened here, would keep serving the database the settings named
    before pytest-django made the test database."""
    if os.environ.get("DATABASE_URL"):
        yield
        return
    suite_server_settings(database_url(settings.DATABASES["default"]), on=True)
    try:
        yield
    finally:
        suite_server_settings(database_url(settings.DATABASES["default"]), on=False)


# --- personas -------------------------------------------------------------------------------------


@pytest.fixture(autouse=True, scope="session")
def _fast_password_hashing() -> Iterator[None]:
    """Production's hasher is slow on purpose (PBKDF2, ~0.4 s a hash on these cores), and every persona made and
    every sign-in hashes; what the suite tests about passwords is who gets in, which any hasher shows."""
    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        yield


@pytest.fixture
def org(db) -> Org:
    return persona_org()


@pytest.fixture
def other_org(db) -> Org:
    return Org.objects.create(name="Globex", slug="globex")


@pytest.fixture
def operator(org):
    return persona_operator(org)


@pytest.fixture
def other_org_operator(other_org):
    return make_person("mallory", other_org, Role.OPERATOR)


@pytest.fixture
def criteria_admin(org):
    return persona_criteria_admin(org)


@pytest.fixture
def stakeholder(org):
    return make_person("sam", org, Role.STAKEHOLDER)


@pytest.fixture
def roleless(db):
    return make_person("riley")


@pytest.fixture
def client_for(client):
    """`client_for(user)`: a test client signed in as that user."""

    def sign_in(user) -> Client:
        client.force_login(user)
        return client

    return sign_in


# --- the fake LLM ---------------------------------------------------------------------------------


@pytest.fixture
def smtp(settings) -> Iterator[SmtpServer]:
    """A real SMTP server on loopback that Django's mail goes to for the test."""
    server = SmtpServer()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", server.port
    yield server
    server.close()


@pytest.fixture(scope="session")
def fake_llm_server() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


@pytest.fixture
def fake_llm(fake_llm_server: FakeLLM) -> Iterator[FakeLLM]:
    """The loopback OpenAI-compatible server, with no scripted replies and no recorded requests."""
    fake_llm_server.reset()
    yield fake_llm_server
    fake_llm_server.reset()


SECOND_JUDGE = "second"  # the name the workers and the test process know the second judge by


@pytest.fixture(scope="session")
def second_llm_server() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


@pytest.fixture
def second_llm(second_llm_server: FakeLLM, settings) -> Iterator[FakeLLM]:
    """A second judge's loopback server, configured as the judge named `second` in this process and in the
    session's workers (as JUDGES_FILE configures it), with no scripted replies and no recorded requests."""
    configure_judges(settings, **{SECOND_JUDGE: judge_config(second_llm_server, model="second-model")})
    second_llm_server.reset()
    yield second_llm_server
    second_llm_server.reset()


def _judges_file(directory: Path, second: FakeLLM) -> Path:
    """The workers' JUDGES_FILE: the second judge, its key in a file of its own as production keeps it."""
    key = directory / "second.key"
    key.write_text("test-key\n")
    path = directory / "judges.json"
    path.write_text(
        json.dumps({SECOND_JUDGE: {"base_url": second.base_url, "model": "second-model", "key_file": str(key)}})
    )
    return path


# --- a real Celery worker -------------------------------------------------------------------------


_WORKERS = pytest.StashKey[str]()  # the session's grading worker, once a test has started it
_WORKER_PROCESSES = pytest.StashKey[dict[str, tuple[subprocess.Popen, Path]]]()  # every session worker, its log


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test that needs the session's workers fails at once, saying why, when one of them has exited: it would
    otherwise wait out its timeouts on a worker that is gone."""
    if "celery_worker" in getattr(item, "fixturenames", ()):
        _fail_if_a_worker_exited(item.session)


def _fail_if_a_worker_exited(session: pytest.Session) -> None:
    for node, (worker, log_path) in session.stash.get(_WORKER_PROCESSES, {}).items():
        if worker.poll() is not None:
            exited = f"the session's worker {node} exited with {worker.returncode}"
            pytest.fail(f"{exited}; its log ends:\n{log_end(log_path)}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    """Before a test's fixtures go (a transactional test's flush truncates every table), the session's workers
    finish what the test left them and drop what it left for later: a task still writing while the flush truncates
    its tables deadlocks the two (seen: a webhook try ending as its slow receiver closed with the test), a retry
    run in the next test takes the reply that test scripted on the shared fake judge (seen: "no scripted reply"),
    and the next test finds rows left. A transactional test commits, so its tasks reach the workers whether or not
    it asked for them."""
    node = item.session.stash.get(_WORKERS, None)
    if node and ("celery_worker" in getattr(item, "funcargs", {}) or _transactional(item)):
        from reviewer.celery import app

        workers_settled(app, [node, f"webhooks-{node}"])
    return (yield)


def _transactional(item: pytest.Item) -> bool:
    marker = item.get_closest_marker("django_db")
    return bool(marker and marker.kwargs.get("transaction", marker.args[0] if marker.args else False))


@pytest.fixture(scope="session")
def celery_worker(
    request, django_db_setup, django_db_blocker, fake_llm_server, second_llm_server, tmp_path_factory
) -> Iterator[str]:
    """Real `celery worker` processes on the test database and Redis, laid out as in production: one for
    grading (`judge`, `default`), whose name is yielded, and one with threads for `webhooks`. The default judge is
    the fake LLM, the judge named `second` the second fake; webhooks may reach the tests' receivers on 127.0.0.1.

    Tests that use it must commit what the workers read: mark them `django_db(transaction=True)`.
    """
    from reviewer.celery import app

    app.control.purge()  # tasks left in the queues by an earlier, interrupted run
    name = f"test-{uuid.uuid4().hex[:8]}@localhost"
    env = os.environ | {
        "DATABASE_URL": database_url(settings.DATABASES["default"]),
        "REDIS_URL": settings.REDIS_URL,
        "JUDGE_BASE_URL": fake_llm_server.base_url,
        "JUDGE_API_KEY": "test-key",
        "JUDGE_TIMEOUT_SECONDS": "5",
        "JUDGES_FILE": str(_judges_file(tmp_path_factory.mktemp("judges"), second_llm_server)),
        "OUTBOUND_ALLOWED_NETWORKS": "127.0.0.1/32",
        "WEBHOOK_TIMEOUT_SECONDS": "120",  # a slow receiver holds its try for as long as a test needs
    }
    workers = {
        name: ["-Q", "judge,default", "-c", "2"],
        f"webhooks-{name}": ["-Q", "webhooks", "-P", "threads", "-c", "4"],
    }
    started: dict[str, tuple[subprocess.Popen, Path]] = {}
    try:
        for node, options in workers.items():
            log_path = tmp_path_factory.mktemp("worker") / "worker.log"
            command = [
                sys.executable, "-m", "celery", "-A", "reviewer", "worker", *options, "-n", node, "-l", "info",
                "--include", "tests.fakes.canary_tasks",
            ]  # fmt: skip
            with open(log_path, "w") as log:
                worker = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
            started[node] = worker, log_path
        for node, (worker, log_path) in started.items():
            wait_for_worker(app, node, worker, log_path)
        request.session.stash[_WORKERS] = name
        request.session.stash[_WORKER_PROCESSES] = started
        yield name
    finally:
        for worker, _ in started.values():
            worker.terminate()
        for worker, _ in started.values():
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.kill()


@pytest.fixture
def celery_worker_log(request, celery_worker: str) -> Path:
    """The session's grading worker's log, for a test to print when it timed out waiting on the worker."""
    return request.session.stash[_WORKER_PROCESSES][celery_worker][1]


@pytest.fixture
def celery_worker_logs(request, celery_worker: str) -> list[Path]:
    """The logs of all the session's workers (grading and webhooks)."""
    return [log_path for _, log_path in request.session.stash[_WORKER_PROCESSES].values()]

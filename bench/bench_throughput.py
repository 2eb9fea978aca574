"""Grading throughput through real Celery worker processes against a loopback judge that answers in 200 ms.

2,000 closed conversations and 500 drafts are queued by one grading pass; real `celery worker` processes (the
worker command line of `make demo` and the README) grade them against FakeLLM, the OpenAI-compatible server
the tests use, here with HTTP keep-alive. Reported per worker layout: reviews/s, the share of the concurrency
bound (judge calls in flight / judge latency), the CPU milliseconds per review that the worker processes
themselves spent (psutil, children included), and the CPU of everything else on the machine (PostgreSQL, Redis,
this process serving the fake judge) beside it. The seed's layout (prefork, 2 processes) is the baseline.

BENCH_THROUGHPUT_CONVERSATIONS, BENCH_THROUGHPUT_DRAFTS, BENCH_THROUGHPUT_LATENCY and BENCH_THROUGHPUT_THREADS
scale it; BENCH_THROUGHPUT_PROFILE=1 records a py-spy profile of one worker (needs py-spy).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import psutil
from django.conf import settings
from django.db import connection
from django.utils import timezone

from bench.common import fresh_org, purge_queues
from grading.criteria import criteria_active
from grading.evidence import EvidenceMessage, fingerprint
from grading.models import Conversation, Draft, ItemKind, Message, Review
from grading.planner import grading_pass
from grading.schemas import DraftIn
from grading.services import draft_save
from tests.conftest import database_url
from tests.fakes.openai_server import FakeLLM, Reply, json_reply

REPO_ROOT = Path(__file__).resolve().parent.parent
PATH_IDS = ["m1", "m2", "m3", "m4"]


@dataclass(frozen=True)
class Layout:
    name: str
    processes: int
    pool: str  # prefork | threads
    concurrency: int  # per process

    @property
    def in_flight(self) -> int:
        return self.processes * self.concurrency


@dataclass(frozen=True)
class Result:
    layout: Layout
    reviews: int
    seconds: float
    worker_cpu: float  # seconds, all worker processes and their children
    other_cpu: dict[str, float]  # seconds by process name: PostgreSQL, Redis and this process (the fake judge)


def main() -> None:
    conversations = int(os.environ.get("BENCH_THROUGHPUT_CONVERSATIONS", "2000"))
    drafts = int(os.environ.get("BENCH_THROUGHPUT_DRAFTS", "500"))
    latency = float(os.environ.get("BENCH_THROUGHPUT_LATENCY", "0.2"))
    threads = int(os.environ.get("BENCH_THROUGHPUT_THREADS", "32"))
    org = fresh_org()
    criteria_active(org=org, kind=ItemKind.CONVERSATION)
    criteria_active(org=org, kind=ItemKind.DRAFT)
    _populate(org, conversations, drafts)
    total = conversations + drafts

    layouts = [
        # The seed's demo: the default prefork pool, one process per core.
        (Layout("seed: prefork -c 2", 1, "prefork", 2), max(total // 10, 50)),
        (Layout(f"threads -c {threads}, 1 process", 1, "threads", threads), total),
        (Layout(f"threads -c {threads}, 2 processes", 2, "threads", threads), total),
    ]
    with FakeLLM(keep_alive=True, record=False) as judge:
        judge.set_default(_responder(latency))
        results = [_run(layout, judge, latency, items) for layout, items in layouts]

    print(f"judge latency {latency * 1000:.0f} ms; {conversations:,} conversations and {drafts:,} drafts queued")
    baseline = results[0].reviews / results[0].seconds
    for result in results:
        rate = result.reviews / result.seconds
        bound = result.layout.in_flight / latency
        print(
            f"{result.layout.name:<32} {result.reviews:>5} reviews in {result.seconds:6.1f} s = {rate:6.1f} reviews/s "
            f"({rate / baseline:5.1f}x the seed), {rate / bound:4.0%} of the bound {bound:.0f}/s; "
            f"worker CPU {result.worker_cpu / result.reviews * 1000:5.1f} ms/review, "
            "everything else "
            + ", ".join(f"{name} {cpu / result.reviews * 1000:.1f}" for name, cpu in result.other_cpu.items())
            + " ms/review"
        )


def _responder(latency: float):
    verdicts = {
        name: {"verdict": "pass", "message_ids": PATH_IDS, "rationale": f"{name}: supported by the path."}
        for name in ("grounded", "complete", "usable")
    }
    conversation_reply = json_reply(verdicts, latency=latency)
    draft = {"overall": 8, "aeo": 4, "writing": 4, "org_fit": 4, "passed": True, "issues": []}
    draft_reply = json_reply(
        draft, top_logprobs={"8": 0.7, "9": 0.2, "7": 0.1}, logprob_field="overall", latency=latency
    )

    def respond(body) -> Reply:
        schema = ((body or {}).get("response_format") or {}).get("json_schema") or {}
        return draft_reply if schema.get("name") == "DraftVerdict" else conversation_reply

    return respond


def _populate(org, conversations: int, drafts: int) -> None:
    now = timezone.now()
    rows, paths = [], []
    for i in range(conversations):
        path = _conversation_path(i)
        paths.append(path)
        rows.append(
            Conversation(
                org=org, external_id=f"tp-{i}", application="bench", closed=True, started_at=now,
                last_activity_at=now, fingerprint=fingerprint(path), active_path_ids=[m.id for m in path],
                branch_count=1, message_count=len(path),
            )
        )  # fmt: skip
    Conversation.objects.bulk_create(rows, batch_size=1000)
    Message.objects.bulk_create(
        [
            Message(
                conversation=c, external_id=m.id, parent_external_id=m.parent_id, role=m.role, content=m.content,
                tool_calls=m.tool_calls, tool_call_id=m.tool_call_id, created_at=now,
            )
            for c, path in zip(rows, paths, strict=True)
            for m in path
        ],
        batch_size=2000,
    )  # fmt: skip
    import random

    from bench.bench_checks import generate_draft
    from grading.rules import default_rules

    rules = default_rules()
    rng = random.Random(7)
    for i in range(drafts):
        body, sources = generate_draft(rng, rules.banned_words.terms, rules.filler_phrases.terms, 800)
        draft_save(
            org=org,
            payload=DraftIn(
                external_id=f"tp-d{i}", title=f"Draft {i}", slug=f"draft-{i}", body=body, source_urls=sources
            ),
        )


def _conversation_path(i: int) -> list[EvidenceMessage]:
    call = {"id": f"call_{i}", "type": "function", "function": {"name": "refund", "arguments": f'{{"order": {i}}}'}}
    return [
        EvidenceMessage("m1", None, "user", f"Please refund order {i}, it arrived broken."),
        EvidenceMessage("m2", "m1", "assistant", None, tool_calls=[call]),
        EvidenceMessage("m3", "m2", "tool", f'{{"status": "refunded", "order": {i}}}', tool_call_id=f"call_{i}"),
        EvidenceMessage("m4", "m3", "assistant", f"Done: order {i} was refunded."),
    ]


def _run(layout: Layout, judge: FakeLLM, latency: float, items: int) -> Result:
    """Queue `items` gradings, start the layout's workers, and time them from the first task to the last review."""
    Review.objects.all().delete()
    Conversation.objects.update(queued_at=None)
    Draft.objects.update(queued_at=None)
    _stop_stale_workers()
    purge_queues()
    conversation_ids = list(Conversation.objects.order_by("pk").values_list("pk", flat=True))
    draft_ids = list(Draft.objects.order_by("pk").values_list("pk", flat=True))
    # Drafts and conversations in the proportion of the whole set.
    share = len(draft_ids) / max(len(draft_ids) + len(conversation_ids), 1)
    keep_drafts = round(items * share)
    Conversation.objects.exclude(pk__in=conversation_ids[: items - keep_drafts]).update(queued_at=timezone.now())
    Draft.objects.exclude(pk__in=draft_ids[:keep_drafts]).update(queued_at=timezone.now())
    connection.close()

    workers = [_start_worker(layout, judge, n) for n in range(layout.processes)]
    profiler = _profile(layout, workers[0][0].pid)
    try:
        processes = [psutil.Process(worker.pid) for worker, _ in workers]
        others = _other_processes()
        worker_cpu_before = _cpu(processes)
        other_cpu_before = [_cpu([p], children=p.pid != os.getpid()) for p in others]
        started = time.perf_counter()
        enqueued = grading_pass(cap=items)
        expected = len(enqueued.enqueued_ids) + len(enqueued.enqueued_draft_ids)
        deadline = time.monotonic() + max(120.0, expected * latency * 2)
        while (done := Review.objects.count()) < expected:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{layout.name}: {done} of {expected} reviews after the deadline")
            time.sleep(0.05)
        seconds = time.perf_counter() - started
        worker_cpu = _cpu(processes) - worker_cpu_before
        other_cpu = {
            p.name(): _cpu([p], children=p.pid != os.getpid()) - before
            for p, before in zip(others, other_cpu_before, strict=True)
        }
    finally:
        if profiler is not None:
            profiler.send_signal(signal.SIGINT)
            profiler.wait(timeout=60)
        for worker, _ in workers:
            worker.terminate()
        for worker, _ in workers:
            try:
                worker.wait(timeout=60)
            except subprocess.TimeoutExpired:
                worker.kill()
    errors = Review.objects.filter(route="error").count()
    if errors:
        raise RuntimeError(f"{layout.name}: {errors} reviews are errors; see {workers[0][1]}")
    return Result(layout, expected, seconds, worker_cpu, other_cpu)


def _profile(layout: Layout, pid: int) -> subprocess.Popen | None:
    """py-spy attached to the first worker process (BENCH_THROUGHPUT_PROFILE=1), written as collapsed stacks."""
    if os.environ.get("BENCH_THROUGHPUT_PROFILE") != "1" or layout.pool != "threads" or not shutil.which("py-spy"):
        return None
    out = Path(settings.DATA_DIR) / f"bench-profile-{layout.pool}-{layout.processes}p.txt"
    command = [
        "py-spy",
        "record",
        "--format",
        "raw",
        "--gil",
        "--nonblocking",
        "-r",
        "250",
        "-o",
        str(out),
        "--pid",
        str(pid),
    ]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _stop_stale_workers() -> None:
    """Workers an interrupted run left behind would take tasks against a judge that is gone. The bench's Redis is
    its own (.data/bench), so every worker answering on it is one of ours."""
    from reviewer.celery import app

    stale = [name for reply in app.control.ping(timeout=1.0) for name in reply]
    if stale:
        app.control.shutdown(destination=stale)
        time.sleep(2)


def _start_worker(layout: Layout, judge: FakeLLM, n: int) -> tuple[subprocess.Popen, Path]:
    from reviewer.celery import app

    name = f"bench-{uuid.uuid4().hex[:8]}@localhost"
    log_path = Path(settings.DATA_DIR) / f"bench-worker-{n}.log"
    env = os.environ | {
        "DATABASE_URL": database_url(settings.DATABASES["default"]),
        "REDIS_URL": settings.REDIS_URL,
        "JUDGE_BASE_URL": judge.base_url,
        "JUDGE_API_KEY": "bench-key",
        "JUDGE_TIMEOUT_SECONDS": "30",
        # As in production: no query log, no debug cursor wrappers.
        "DEBUG": "0",
        "SECRET_KEY": "bench-" + "x" * 60,
        "ALLOWED_HOSTS": "localhost",
    }
    command = [
        sys.executable, "-m", "celery", "-A", "reviewer", "worker", "-Q", "judge,default",
        "-P", layout.pool, "-c", str(layout.concurrency), "-n", name, "-l", "warning",
    ]  # fmt: skip
    with open(log_path, "w") as log:
        worker = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while not app.control.ping(destination=[name], timeout=0.5):
        if worker.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the bench worker did not start:\n{log_path.read_text()}")
    return worker, log_path


def _other_processes() -> list[psutil.Process]:
    """This bench's PostgreSQL postmaster (its backends are its children) and Redis, and this process (it serves
    the fake judge). Other engineers' servers on the same machine are left out."""
    data_dir = str(Path(settings.DATA_DIR).resolve())
    redis_port = f":{urlsplit(settings.REDIS_URL).port}"
    found = [psutil.Process()]
    for process in psutil.process_iter(["name", "cmdline"]):
        command = " ".join(process.info["cmdline"] or ())
        if (
            process.info["name"] == "postgres"
            and f"-D {data_dir}/" in command
            or "redis-server" in command
            and command.endswith(redis_port)
        ):
            found.append(process)
    return found


def _cpu(processes: list[psutil.Process], *, children: bool = True) -> float:
    """CPU seconds of the processes and, unless told not to, of their children (live, and exited ones waited for)."""
    total = 0.0
    for process in processes:
        try:
            times = process.cpu_times()
            total += times.user + times.system
            if not children:
                continue
            total += times.children_user + times.children_system
            for child in process.children(recursive=True):
                child_times = child.cpu_times()
                total += child_times.user + child_times.system
        except psutil.NoSuchProcess:
            continue
    return total

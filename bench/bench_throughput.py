"""Grading throughput through real Celery worker processes against a loopback judge that answers in 200 ms.

2,000 closed conversations and 500 drafts are queued by one grading pass; real `celery worker` processes (the
worker command line of `make demo` and docs/production.md) grade them against FakeLLM, the OpenAI-compatible server
the tests use, here with HTTP keep-alive. Reported per worker layout: reviews/s from the pass's start to the last
review, and of grading alone (from the moment the pass had sent its last task: until then this process plans and
sends while the workers grade the first items); for grading alone, the share of the concurrency bound (judge calls
in flight / judge latency), the CPU milliseconds per review that the worker processes themselves spent (psutil,
children included), and the CPU of everything else on the machine (PostgreSQL, Redis, this process serving the
fake judge) beside it. The seed's layout (prefork, 2 processes) is the baseline.

What CPU allows, beside what was measured: all the CPU one review costs (workers, PostgreSQL, Redis, the judge)
caps reviews/s at cores / CPU per review however many calls are in flight, and a worker process holds the GIL
for its own share, so one process tops out at 1 / (its CPU per review). The machine is shared: the load average
of the run is printed, and wall-clock rates are only comparable within one run; CPU per review is the figure.

BENCH_THROUGHPUT_CHECKS is a comma-separated list of how many checks the conversation version asks (default 3,
today's; 12: `bench.common.bench_checks`, four of them with a rule of each kind): the threaded layouts run at each,
the seed's at the first only. BENCH_THROUGHPUT_CONVERSATIONS, BENCH_THROUGHPUT_DRAFTS and BENCH_THROUGHPUT_LATENCY
scale it;
BENCH_THROUGHPUT_THREADS is a comma-separated list of thread counts (default 32): one process at each, and two
processes at the largest. BENCH_THROUGHPUT_PROFILE=1 records a py-spy profile (--gil: the samples are the time a
thread holds the GIL) of the first worker of each threaded layout and prints where its CPU went (needs py-spy).

Two checkouts compared (`bench.compare` cannot: what it measures is its own process and backend, and the CPU here is
the workers' and every backend's): BENCH_THROUGHPUT_BASE=<a checkout of the code before> runs only the two-process
layout, BENCH_THROUGHPUT_ROUNDS times (default 5) with workers started from that checkout and as many from this one,
the order alternating from round to round, on the same data, judge and servers; and prints per side the median
[interquartile range] (least-most) of reviews/s, the workers' CPU ms a review and the rest's (PostgreSQL alone
beside it), with a verdict only where the interquartile ranges do not overlap (`bench.compare.verdict`). The
checkout's schema must be this one's: the data is set up once, by this checkout. BENCH_THROUGHPUT_SETTING=NAME=VALUE
(comma-separated for several) sets environment variables of the head's workers, BENCH_THROUGHPUT_BASE_SETTING the
base's: with this checkout as the base too, two settings compared (`bench.compare`'s `--setting`).
"""

from __future__ import annotations

import functools
import os
import re
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

from bench.common import bench_checks, fresh_org, purge_queues
from grading.core.evidence import EvidenceMessage, fingerprint
from grading.core.schemas import DraftIn
from grading.drafts.submit import draft_save
from grading.models import Conversation, Draft, ItemKind, Message, Review
from grading.passes.planner import grading_pass
from grading.reviews.versions import criteria_active, criteria_new_version, criteria_publish
from tests.builders.processes import database_url
from tests.fakes.openai_server import FakeLLM, Reply, json_reply

REPO_ROOT = Path(__file__).resolve().parent.parent
PATH_IDS = ["m1", "m2", "m3", "m4"]


@dataclass(frozen=True)
class Layout:
    name: str
    processes: int
    pool: str  # prefork | threads
    concurrency: int  # per process
    checkout: Path = REPO_ROOT  # the code the workers run
    settings: tuple[tuple[str, str], ...] = ()  # environment variables of this side's workers (a setting compared)

    @property
    def in_flight(self) -> int:
        return self.processes * self.concurrency


@dataclass(frozen=True)
class Sample:
    """The clock, the reviews written and the CPU spent so far, at one moment of a run."""

    at: float  # perf_counter seconds
    reviews: int
    worker_cpu: float  # seconds, all worker processes and their children
    worker_system: float  # the part of it spent in the kernel (syscalls, switching threads for the GIL)
    other_cpu: dict[str, float]  # seconds by what it is: PostgreSQL, Redis and this process (the fake judge)

    def __sub__(self, earlier: Sample) -> Sample:
        return Sample(
            self.at - earlier.at,
            self.reviews - earlier.reviews,
            self.worker_cpu - earlier.worker_cpu,
            self.worker_system - earlier.worker_system,
            {name: cpu - earlier.other_cpu[name] for name, cpu in self.other_cpu.items()},
        )


@dataclass(frozen=True)
class Result:
    """A run in two windows: `whole`, from the grading pass's start to the last review (the pass plans the items and
    sends their tasks from this process while the workers already grade the first ones), and `grading`, from the
    moment the pass had sent every task to the last review: grading alone, what the CPU figures are read over."""

    layout: Layout
    whole: Sample
    grading: Sample
    load: float  # the machine's 1-minute load average at the end: other engineers' work shares the cores
    profile: list[tuple[str, float]]  # (what, share of the first worker's GIL-held samples), when profiled


def main() -> None:
    conversations = int(os.environ.get("BENCH_THROUGHPUT_CONVERSATIONS", "2000"))
    drafts = int(os.environ.get("BENCH_THROUGHPUT_DRAFTS", "500"))
    latency = float(os.environ.get("BENCH_THROUGHPUT_LATENCY", "0.2"))
    threads = sorted(int(n) for n in os.environ.get("BENCH_THROUGHPUT_THREADS", "32").split(","))
    check_counts = [int(n) for n in os.environ.get("BENCH_THROUGHPUT_CHECKS", "3").split(",")]
    org = fresh_org()
    criteria_active(org=org, kind=ItemKind.CONVERSATION)
    criteria_active(org=org, kind=ItemKind.DRAFT)
    _populate(org, conversations, drafts)
    total = conversations + drafts

    if base := os.environ.get("BENCH_THROUGHPUT_BASE"):
        _compare(Path(base).resolve(), rounds=int(os.environ.get("BENCH_THROUGHPUT_ROUNDS", "5")), org=org,
                 check_count=check_counts[0], threads=threads[-1], latency=latency, items=total)  # fmt: skip
        return
    results = []
    with FakeLLM(keep_alive=True, record=False) as judge:
        judge.set_default(_responder(latency))
        for count in check_counts:
            _ask_checks(org, count)
            named = f", {count} checks" if check_counts != [3] else ""
            layouts = [
                # The seed's demo: the default prefork pool, one process per core.
                (Layout(f"seed: prefork -c 2{named}", 1, "prefork", 2), max(total // 10, 50)),
                *[(Layout(f"threads -c {n}, 1 process{named}", 1, "threads", n), total) for n in threads],
                (Layout(f"threads -c {threads[-1]}, 2 processes{named}", 2, "threads", threads[-1]), total),
            ]
            if count != check_counts[0]:
                layouts = layouts[1:]  # the seed is the baseline once
            results += [_run(layout, judge, latency, items) for layout, items in layouts]

    cores = psutil.cpu_count() or 1
    print(
        f"judge latency {latency * 1000:.0f} ms; {conversations:,} conversations and {drafts:,} drafts queued; "
        f"{cores} cores"
    )
    baseline = results[0].grading.reviews / results[0].grading.at
    for result in results:
        whole, grading = result.whole, result.grading
        rate = grading.reviews / grading.at
        bound = result.layout.in_flight / latency
        worker = grading.worker_cpu / grading.reviews * 1000
        total_cpu = worker + sum(grading.other_cpu.values()) / grading.reviews * 1000
        # Python processes doing the grading, each using at most one core (the GIL): prefork children, or
        # the threaded workers themselves.
        pythons = result.layout.processes * (result.layout.concurrency if result.layout.pool == "prefork" else 1)
        print(
            f"{result.layout.name:<32} {whole.reviews:>5} reviews in {whole.at:6.1f} s from the pass's start = "
            f"{whole.reviews / whole.at:6.1f} reviews/s; the pass sent its last task at {whole.at - grading.at:.1f} s "
            f"(load average {result.load:.1f})\n"
            f"{'':<33}grading alone, the last {grading.reviews} reviews: {rate:6.1f} reviews/s "
            f"({rate / baseline:5.1f}x the seed), {rate / bound:4.0%} of the bound {bound:.0f}/s\n"
            f"{'':<33}CPU ms/review: workers {worker:.1f} "
            f"({grading.worker_system / grading.reviews * 1000:.1f} of it in the kernel), "
            + ", ".join(f"{name} {cpu / grading.reviews * 1000:.1f}" for name, cpu in grading.other_cpu.items())
            + f"; all {total_cpu:.1f}. CPU alone allows {cores / total_cpu * 1000:.0f}/s on {cores} idle cores, "
            f"{min(pythons, cores) * 1000 / worker:.0f}/s for {pythons} grading process{'es' if pythons > 1 else ''}"
            " (one core each at most)"
        )
        if result.profile:
            print(f"{'':<33}where the first worker's CPU went (py-spy --gil), ms/review:")
            for category, share in result.profile:
                print(f"{'':<35}{share * worker:5.1f}  {category}")


def _compare(base: Path, *, rounds: int, org, check_count: int, threads: int, latency: float, items: int) -> None:
    """The two-process layout, from the `base` checkout and from this one, `rounds` times each (module docstring)."""
    from bench.compare import spread_of, verdict

    sides = {"base": base, "head": REPO_ROOT}
    side_settings = {
        "base": _settings(os.environ.get("BENCH_THROUGHPUT_BASE_SETTING", "")),
        "head": _settings(os.environ.get("BENCH_THROUGHPUT_SETTING", "")),
    }

    def figures(result: Result) -> dict[str, float]:
        grading = result.grading
        per_review = 1000 / grading.reviews
        return {
            "reviews/s": grading.reviews / grading.at,
            "workers' CPU ms/review": grading.worker_cpu * per_review,
            "PostgreSQL CPU ms/review": grading.other_cpu.get("PostgreSQL", 0.0) * per_review,
            "everything else's CPU ms/review": sum(grading.other_cpu.values()) * per_review,
            "workers and PostgreSQL, CPU ms/review": (grading.worker_cpu + grading.other_cpu.get("PostgreSQL", 0.0))
            * per_review,
        }

    results: dict[str, list[Result]] = {side: [] for side in sides}
    with FakeLLM(keep_alive=True, record=False) as judge:
        judge.set_default(_responder(latency))
        _ask_checks(org, check_count)
        for round_number in range(rounds + 1):  # the first round warms up and is dropped
            for side in sides if round_number % 2 == 0 else reversed(sides):
                name = f"{side}: threads -c {threads}, 2 processes"
                layout = Layout(name, 2, "threads", threads, sides[side], side_settings[side])
                result = _run(layout, judge, latency, items)
                if round_number:
                    results[side].append(result)
                said = ", ".join(f"{name} {value:.1f}" for name, value in figures(result).items())
                print(f"round {round_number or 'warm-up'}: {layout.name}: {said} (load {result.load:.1f})", flush=True)

    print(f"\n{rounds} rounds, sides alternating; base {base} {side_settings['base']}, head {REPO_ROOT} "
          f"{side_settings['head']}; loads "
          + ", ".join(f"{r.load:.1f}" for side in sides for r in results[side]))  # fmt: skip
    for metric in figures(results["head"][0]):
        spreads = {side: spread_of([figures(r)[metric] for r in results[side]]) for side in sides}
        # verdict() reads a smaller figure as faster: here the CPU figures are lower or higher, the rate is the
        # other way round.
        said = verdict(spreads["base"], spreads["head"])
        said = {"head faster": "head lower", "head slower": "head higher"}.get(said, said)
        if metric == "reviews/s":
            said = {"head lower": "head slower", "head higher": "head faster"}.get(said, said)
        cells = [f"{s.median:.1f} [{s.low:.1f}-{s.high:.1f}] ({s.least:.1f}-{s.most:.1f})" for s in spreads.values()]
        print(f"{metric:<40} base {cells[0]:<32} head {cells[1]:<32} "
              f"{spreads['head'].median / spreads['base'].median:.3f}x  {said}")  # fmt: skip
    for side in sides:
        for result in results[side][:1]:
            if result.profile:
                worker = result.grading.worker_cpu / result.grading.reviews * 1000
                print(f"{side}: where the first worker's CPU went in its first round (py-spy --gil), ms/review:")
                for category, share in result.profile:
                    print(f"    {share * worker:5.1f}  {category}")


def _settings(said: str) -> tuple[tuple[str, str], ...]:
    """The NAME=VALUE pairs, comma-separated, of `said`."""
    pairs = [pair.partition("=") for pair in said.split(",") if pair.strip()]
    return tuple((name.strip(), value.strip()) for name, _, value in pairs)


def _responder(latency: float):
    # A fixed usage, as a hosted judge reports it: left to count, the fake judge tokenizes every prompt, and its CPU
    # shares the two cores with what is measured (a third of its cost per review).
    usage = {"prompt_tokens": 1000, "completion_tokens": 60, "total_tokens": 1060}
    draft = {"overall": 8, "aeo": 4, "writing": 4, "org_fit": 4, "passed": True, "issues": []}
    draft_reply = json_reply(
        draft, top_logprobs={"8": 0.7, "9": 0.2, "7": 0.1}, logprob_field="overall", usage=usage, latency=latency
    )

    @functools.cache
    def conversation_reply(checks: tuple[str, ...]) -> Reply:
        """A pass for each check the schema asks, with the reasons a judge gives: one reply per check set."""
        verdicts = {
            key: {"verdict": "pass", "message_ids": PATH_IDS, "rationale": f"{key}: supported by the path."}
            for key in checks
        }
        return json_reply(verdicts, usage=usage, latency=latency)

    def respond(body) -> Reply:
        schema = ((body or {}).get("response_format") or {}).get("json_schema") or {}
        if schema.get("name") == "DraftVerdict":
            return draft_reply
        return conversation_reply(tuple((schema.get("schema") or {}).get("properties") or ()))

    return respond


def _ask_checks(org, count: int) -> None:
    """Publish a conversation version asking `count` checks (`bench_checks`), unless the active one does."""
    checks = bench_checks(count)
    if criteria_active(org=org, kind=ItemKind.CONVERSATION).check_set() == checks:
        return
    version = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    version.checks = checks.model_dump(mode="json")
    version.save(update_fields=["checks"])
    criteria_publish(version=version)


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
    from grading.checks.rules import default_rules

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
    """Start the layout's workers, queue `items` gradings with one grading pass, and time them (see Result)."""
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
    # The resets above leave dead rows; vacuumed now, so PostgreSQL's CPU below is the grading's and not an
    # autovacuum of this setup landing inside the timed run.
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE grading_review, grading_conversation, grading_draft, grading_rollup")
    connection.close()

    workers = [_start_worker(layout, judge, n) for n in range(layout.processes)]
    profiler, profile_path = _profile(layout, workers[0][0].pid)
    try:
        processes = [psutil.Process(worker.pid) for worker, _ in workers]
        others = _other_processes()

        def sample() -> Sample:
            return Sample(
                time.perf_counter(),
                Review.objects.count(),
                _cpu(processes),
                _cpu(processes, system_only=True),
                {name: _cpu([p], children=p.pid != os.getpid()) for name, p in others},
            )

        started = sample()
        enqueued = grading_pass(cap=items)
        sent = sample()
        expected = len(enqueued.enqueued_ids) + len(enqueued.enqueued_draft_ids)
        deadline = time.monotonic() + max(120.0, expected * latency * 2)
        while (done := Review.objects.count()) < expected:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{layout.name}: {done} of {expected} reviews after the deadline")
            time.sleep(0.2)  # a count every 50 ms cost this process (and so "the fake judge") ~1 ms a review
        ended = sample()
        load = os.getloadavg()[0]
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
    profile = _profile_summary(profile_path) if profile_path is not None else []
    return Result(layout, ended - started, ended - sent, load, profile)


def _profile(layout: Layout, pid: int) -> tuple[subprocess.Popen | None, Path | None]:
    """py-spy attached to the first worker process (BENCH_THROUGHPUT_PROFILE=1), written as collapsed stacks."""
    # `make bench` runs the venv's python without the venv on PATH: look beside it first.
    py_spy = shutil.which("py-spy", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    if os.environ.get("BENCH_THROUGHPUT_PROFILE") != "1" or layout.pool != "threads" or py_spy is None:
        return None, None
    side = "" if layout.checkout == REPO_ROOT else "-base"
    out = Path(settings.DATA_DIR) / f"bench-profile-{layout.concurrency}t-{layout.processes}p{side}.txt"
    command = [
        py_spy,
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
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), out


# What a sample was doing, by the innermost frame that names it: a query inside the memory read is database
# work, JSON encoding inside the SDK is the judge client's.
_CATEGORIES = [
    ("database: Django ORM, psycopg, pool", ("django/db/", "psycopg/", "psycopg_pool/")),
    ("judge client: OpenAI SDK, HTTP", ("openai/", "httpx2/", "httpcore2/", "h11/")),
    ("draft checks and repairs: markdown-it, matching, diffs", ("markdown_it/", "grading/checks", "grading/repairs")),
    ("memory: embedding the draft, assembling", ("grading/reviews/memory.py",)),
    ("Celery, kombu, Redis: receiving, acking, the task's frame", ("celery/", "kombu/", "redis/", "vine/")),
    ("grading itself: prompts, evidence, merging, rules", ("grading/",)),
]
_FRAME_FILE = re.compile(r"\(([^()]*?):\d+\)$")


def _profile_summary(path: Path) -> list[tuple[str, float]]:
    """Shares of the profile's samples by _CATEGORIES (and the rest: threads, logging, the interpreter)."""
    if not path.exists():
        return []
    counts: dict[str, int] = {}
    for line in path.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        category = "the rest: thread pool, Django outside the ORM, logging, stdlib"
        for frame in reversed(stack.split(";")):
            match = _FRAME_FILE.search(frame)
            name = match.group(1) if match else ""
            found = next((c for c, prefixes in _CATEGORIES if any(p in name for p in prefixes)), None)
            if found is not None:
                category = found
                break
        counts[category] = counts.get(category, 0) + int(n)
    total = sum(counts.values()) or 1
    return sorted(((c, n / total) for c, n in counts.items()), key=lambda item: -item[1])


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
        **dict(layout.settings),
    }
    command = [
        sys.executable, "-m", "celery", "-A", "reviewer", "worker", "-Q", "judge,default",
        "-P", layout.pool, "-c", str(layout.concurrency), "-n", name, "-l", "warning",
    ]  # fmt: skip
    with open(log_path, "w") as log:
        worker = subprocess.Popen(command, cwd=layout.checkout, env=env, stdout=log, stderr=subprocess.STDOUT)
    # A worker imports the whole project before it answers: over a minute when other people's work loads the cores
    # (a load average of 26 on 2 cores stopped a comparison after four runs).
    deadline = time.monotonic() + 240
    while not app.control.ping(destination=[name], timeout=0.5):
        if worker.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the bench worker did not start:\n{log_path.read_text()}")
    return worker, log_path


def _other_processes() -> list[tuple[str, psutil.Process]]:
    """This bench's PostgreSQL postmaster (its backends are its children) and Redis, and this process (it serves
    the fake judge; its polling for the reviews is a few queries a second). Other engineers' servers on the same
    machine are left out."""
    data_dir = str(Path(settings.DATA_DIR).resolve())
    redis_port = f":{urlsplit(settings.REDIS_URL).port}"
    found = [("fake judge (this process)", psutil.Process())]
    for process in psutil.process_iter(["name", "cmdline"]):
        # Redis rewrites its title and pads the rest of its argv with empty strings.
        command = " ".join(process.info["cmdline"] or ()).strip()
        if process.info["name"] == "postgres" and f"-D {data_dir}/" in command:
            found.append(("PostgreSQL", process))
        elif "redis-server" in command and command.endswith(redis_port):
            found.append(("Redis", process))
    return found


def _cpu(processes: list[psutil.Process], *, children: bool = True, system_only: bool = False) -> float:
    """CPU seconds of the processes and, unless told not to, of their children (live, and exited ones waited for);
    with `system_only`, the kernel's part alone."""
    total = 0.0
    for process in processes:
        try:
            times = process.cpu_times()
            total += times.system + (0 if system_only else times.user)
            if not children:
                continue
            total += times.children_system + (0 if system_only else times.children_user)
            for child in process.children(recursive=True):
                child_times = child.cpu_times()
                total += child_times.system + (0 if system_only else child_times.user)
        except psutil.NoSuchProcess:
            continue
    return total

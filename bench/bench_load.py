"""Load: 20 operators working the queue (claim next, read the item, decide), a pipeline sending conversations and
drafts, and grading passes, all at once for BENCH_LOAD_SECONDS (default 300), against gunicorn with 2 workers
(production settings, DEBUG off), 2 Celery worker processes and the loopback judge.

Reported per endpoint: requests, errors, p50 and p95 under load, and each p50 as a ratio to the same endpoint's
p50 measured idle (one client, nothing else running) in the same run. Then the decisions: every one an operator
was told was accepted must be in the database exactly once (lost and doubled must both be 0), and the CPU time
each part used (gunicorn, Celery, PostgreSQL, Redis, this process: clients and judge) beside the wall time.

BENCH_LOAD_SECONDS, BENCH_LOAD_OPERATORS (20), BENCH_LOAD_THINK_SECONDS (0.5, an operator's pause between
decisions), BENCH_LOAD_QUEUE (3000 items waiting at the start) and BENCH_LOAD_JUDGE_SECONDS (0.05, the judge's
latency) scale it. Run alone: `DEBUG=1 TOLLGATE_DATA_DIR=.data/bench .venv/bin/python -c "import django, os;
os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'reviewer.settings'); django.setup(); import bench.bench_load as b;
b.main()"`.
"""

import collections
import dataclasses
import logging
import os
import random
import re
import statistics
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import httpx
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.db import connection
from django.utils import timezone

from bench.common import fresh_org, purge_queues
from bench.servers import WebAndWorker
from grading.api.keys import api_key_create
from grading.core.evidence import draft_fingerprint
from grading.models import Decision, Draft, ItemKind, Review, ReviewState, Route
from grading.passes.planner import grading_pass
from grading.reviews.versions import criteria_active
from reviewer.models import Membership, Role
from tests.builders.conversations import PATH_IDS, support_conversation, verdicts
from tests.builders.drafts import CLEAN_BODY, SOURCE, draft_verdict, setup_org_memory
from tests.fakes.openai_server import FakeLLM, json_reply

REPO_ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "bench operator password, long enough"  # noqa: S105
PASS_EVERY_SECONDS = 30
IDLE_SAMPLES = 15


def main() -> None:
    seconds = float(os.environ.get("BENCH_LOAD_SECONDS", "300"))
    operators = int(os.environ.get("BENCH_LOAD_OPERATORS", "20"))
    think = float(os.environ.get("BENCH_LOAD_THINK_SECONDS", "0.5"))
    queued = int(os.environ.get("BENCH_LOAD_QUEUE", "3000"))
    judge_latency = float(os.environ.get("BENCH_LOAD_JUDGE_SECONDS", "0.05"))

    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per request would be the bench's own load
    org = fresh_org()
    purge_queues()
    setup_org_memory(org)
    users = _operators(org, operators)
    key = api_key_create(org=org, name="bench pipeline").plaintext
    _seed_queue(org, queued)
    connection.close()  # the servers below are what is measured; this process holds no connection meanwhile

    with FakeLLM() as judge, WebAndWorker(judge.base_url) as servers:
        judge.set_default(_judge_reply(judge_latency))
        base = servers.base_url
        sessions = [_signed_in(base, user.username) for user in users]
        pipeline = _Pipeline(base, key)
        idle = _Latencies()
        _measure_idle(sessions[0], pipeline, idle)
        cpu_before, wall_before = servers.cpu(), time.monotonic()
        loaded = _Latencies()
        decided: list[tuple[str, int]] = []  # (operator, review id) for every decision answered as accepted
        stop = threading.Event()
        threads = [
            threading.Thread(target=_operate, args=(session, loaded, decided, think, stop), daemon=True)
            for session in sessions
        ]
        threads += [
            threading.Thread(target=pipeline.run, args=(loaded, stop), daemon=True),
            threading.Thread(target=_passes, args=(loaded, stop), daemon=True),
        ]
        for thread in threads:
            thread.start()
        time.sleep(seconds)
        stop.set()
        for thread in threads:
            thread.join(timeout=120)
        wall = time.monotonic() - wall_before
        cpu = {part: servers.cpu()[part] - cpu_before[part] for part in cpu_before}
        judge_calls = len(judge.chat_requests())
        for session in sessions:
            session.client.close()
        pipeline.client.close()

    _report(operators, seconds, think, judge_latency, loaded, idle, decided, cpu, wall, judge_calls)


# --- set-up ------------------------------------------------------------------------------------------------


def _operators(org, count: int) -> list:
    hashed = make_password(PASSWORD)  # once: twenty key derivations would only measure PBKDF2
    users = get_user_model().objects.bulk_create(
        [get_user_model()(username=f"operator-{n}", password=hashed) for n in range(count)]
    )
    Membership.objects.bulk_create([Membership(user=user, org=org, role=Role.OPERATOR) for user in users])
    return users


def _seed_queue(org, count: int) -> None:
    """`count` drafts whose current review waits for a person (in the marginal band), as after earlier passes."""
    criteria = criteria_active(org=org, kind=ItemKind.DRAFT)
    fingerprint = draft_fingerprint(title="Cutting support costs", body=CLEAN_BODY, source_urls=[SOURCE])
    now = timezone.now()
    drafts = Draft.objects.bulk_create(
        [
            Draft(org=org, external_id=f"seed-{n}", title="Cutting support costs", slug=f"seed-{n}", body=CLEAN_BODY,
                  source_urls=[SOURCE], fingerprint=fingerprint)
            for n in range(count)
        ],
        batch_size=1000,
    )  # fmt: skip
    Review.objects.bulk_create(
        [
            Review(org=org, kind=ItemKind.DRAFT, draft=draft, fingerprint=fingerprint, criteria_version=criteria,
                   judge={"backend": "seed"}, judge_key="seed", started_at=now - timedelta(minutes=n % 600),
                   finished_at=now - timedelta(minutes=n % 600), stages=1, route=Route.HUMAN, reason="band",
                   score=6.7, judge_score=6.7, judge_passed=False, sub_scores={"aeo": 4, "writing": 3, "org_fit": 4},
                   state=ReviewState.WAITING)
            for n, draft in enumerate(drafts)
        ],
        batch_size=1000,
    )  # fmt: skip


def _judge_reply(latency: float) -> Callable[[dict], object]:
    """One judge for both kinds of prompt, answering so that every item goes to people: a draft judge that
    contradicts itself (7, "failed") and a conversation with an unknown check."""
    draft = dataclasses.replace(json_reply(draft_verdict(7, passed=False)), latency=latency)
    conversation = dataclasses.replace(json_reply(verdicts(PATH_IDS, complete="unknown")), latency=latency)

    def reply(body: dict):
        schema = (body.get("response_format") or {}).get("json_schema", {}).get("name", "")
        return draft if "Draft" in schema else conversation

    return reply


# --- the load --------------------------------------------------------------------------------------------------


class _Latencies:
    """Seconds per request and failures, by endpoint; shared by every thread."""

    def __init__(self) -> None:
        self.seconds: dict[str, list[float]] = collections.defaultdict(list)
        self.errors: collections.Counter = collections.Counter()
        self.error_examples: dict[str, str] = {}
        self.lock = threading.Lock()

    def timed(self, endpoint: str, send: Callable[[], httpx.Response], ok: Callable[[httpx.Response], bool]):
        started = time.perf_counter()
        try:
            response = send()
        except httpx.HTTPError as exc:
            response, failure = None, f"{type(exc).__name__}: {exc}"
        else:
            failure = None if ok(response) else f"HTTP {response.status_code}"
        elapsed = time.perf_counter() - started
        with self.lock:
            self.seconds[endpoint].append(elapsed)
            if failure:
                self.errors[endpoint] += 1
                self.error_examples.setdefault(endpoint, failure)
        return response if failure is None else None


@dataclasses.dataclass
class _Session:
    username: str
    client: httpx.Client

    def post(self, path: str, data: dict) -> httpx.Response:
        return self.client.post(path, data=data, headers={"X-CSRFToken": self.client.cookies.get("csrftoken", "")})


def _signed_in(base: str, username: str) -> _Session:
    """Signed in through the real form, CSRF token and all."""
    client = httpx.Client(base_url=base, timeout=60.0, follow_redirects=False)
    page = client.get("/login/").text
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    signed = client.post("/login/", data={"csrfmiddlewaretoken": token, "username": username, "password": PASSWORD})
    assert signed.status_code == 302, f"{username} could not sign in: {signed.status_code}"
    client.get("/queue/")  # the page that sets the CSRF cookie the operator's forms send back
    return _Session(username, client)


_ITEM = re.compile(r"^/queue/items/(\d+)/$")
_FINGERPRINT = re.compile(r'name="fingerprint" value="([^"]+)"')


def _work_one(session: _Session, latencies: _Latencies, decided: list) -> bool:
    """Claim the next item, read it, decide it; False when there was nothing to claim."""
    claimed = latencies.timed("POST claim next", lambda: session.post("/queue/claim-next/", {}), _redirected)
    if claimed is None:
        return False
    item = _ITEM.match(claimed.headers["location"].split("?")[0])
    if item is None:
        return False  # nothing free: sent back to the queue
    review_id = int(item.group(1))
    page = latencies.timed("GET item page", lambda: session.client.get(f"/queue/items/{review_id}/"), _status(200))
    if page is None:
        return True
    decision = {"fingerprint": _FINGERPRINT.search(page.text).group(1), "note": "Checked under load."}
    if 'name="outcome"' in page.text:
        decision["outcome"] = "approve"
    else:
        decision |= {"grounded": "pass", "complete": "pass", "usable": "pass"}
    path = f"/queue/items/{review_id}/decide/"
    if latencies.timed("POST decide", lambda: session.post(path, decision), _redirected) is not None:
        decided.append((session.username, review_id))
    return True


def _operate(session: _Session, latencies: _Latencies, decided: list, think: float, stop: threading.Event) -> None:
    rng = random.Random(session.username)
    rounds = 0
    while not stop.is_set():
        rounds += 1
        if rounds % 5 == 0:
            latencies.timed("GET queue page", lambda: session.client.get("/queue/"), _status(200))
        worked = _work_one(session, latencies, decided)
        stop.wait(rng.uniform(0, 2 * think) if worked else 1.0)


class _Pipeline:
    """A writing pipeline and an agent platform: a conversation and a draft at a time, then polls the draft."""

    def __init__(self, base: str, key: str) -> None:
        self.client = httpx.Client(base_url=base, timeout=60.0, headers={"Authorization": f"Bearer {key}"})
        self.sent = 0

    def send_one(self, latencies: _Latencies) -> None:
        n = self.sent = self.sent + 1
        conversation = support_conversation(f"load-{n}")
        latencies.timed(
            "POST /api/v1/conversations", lambda: self.client.post("/api/v1/conversations", json=conversation),
            _status(201),
        )  # fmt: skip
        draft = {"external_id": f"load-{n}", "title": "Cutting support costs", "slug": f"load-{n}",
                 "body": CLEAN_BODY, "source_urls": [SOURCE]}  # fmt: skip
        accepted = latencies.timed(
            "POST /api/v1/drafts", lambda: self.client.post("/api/v1/drafts", json=draft), _status(202)
        )
        if accepted is not None:
            draft_id = accepted.json()["id"]
            latencies.timed(
                "GET /api/v1/drafts/{id}", lambda: self.client.get(f"/api/v1/drafts/{draft_id}"), _status(200)
            )

    def run(self, latencies: _Latencies, stop: threading.Event) -> None:
        while not stop.is_set():
            self.send_one(latencies)
            stop.wait(0.2)


def _passes(latencies: _Latencies, stop: threading.Event) -> None:
    """A grading pass now and every PASS_EVERY_SECONDS: it plans and enqueues what was ingested meanwhile."""
    try:
        while True:
            started = time.perf_counter()
            grading_pass()
            with latencies.lock:
                latencies.seconds["grading pass (plan and enqueue)"].append(time.perf_counter() - started)
            if stop.wait(PASS_EVERY_SECONDS):
                return
    finally:
        connection.close()


def _measure_idle(session: _Session, pipeline: _Pipeline, idle: _Latencies) -> None:
    """Each endpoint with one client and nothing else running: the baseline the loaded figures are divided by."""
    for _ in range(IDLE_SAMPLES):
        idle.timed("GET queue page", lambda: session.client.get("/queue/"), _status(200))
        _work_one(session, idle, [])
        pipeline.send_one(idle)
    started = time.perf_counter()
    grading_pass()
    idle.seconds["grading pass (plan and enqueue)"].append(time.perf_counter() - started)
    connection.close()


def _redirected(response: httpx.Response) -> bool:
    return response.status_code == 302


def _status(code: int) -> Callable[[httpx.Response], bool]:
    return lambda response: response.status_code == code


# --- the report ------------------------------------------------------------------------------------------------


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _report(operators, seconds, think, judge_latency, loaded, idle, decided, cpu, wall, judge_calls) -> None:
    print(
        f"{operators} operators (think time mean {think:g} s), 1 pipeline, a grading pass every {PASS_EVERY_SECONDS} "
        f"s, for {seconds:g} s: gunicorn (2 sync workers, DEBUG off), 1 Celery worker (2 processes), the loopback "
        f"judge ({judge_latency * 1000:g} ms)"
    )
    print(f"{'endpoint':34} {'requests':>8} {'errors':>6} {'p50 ms':>8} {'p95 ms':>8} {'idle p50':>9} {'p50/idle':>8}")
    requests = 0
    for endpoint in sorted(loaded.seconds):
        values = loaded.seconds[endpoint]
        requests += len(values) if not endpoint.startswith("grading pass") else 0
        baseline = statistics.median(idle.seconds[endpoint]) if idle.seconds.get(endpoint) else None
        p50 = statistics.median(values)
        ratio = f"{p50 / baseline:8.1f}" if baseline else f"{'-':>8}"
        baseline_ms = f"{baseline * 1000:9.1f}" if baseline else f"{'-':>9}"
        print(
            f"{endpoint:34} {len(values):8} {loaded.errors[endpoint]:6} {p50 * 1000:8.1f} "
            f"{_percentile(values, 0.95) * 1000:8.1f} {baseline_ms} {ratio}"
        )
    for endpoint, example in loaded.error_examples.items():
        print(f"  first error on {endpoint}: {example}")
    print(f"throughput: {requests / wall:.1f} requests/s over {wall:.0f} s; judge calls {judge_calls}")

    accepted = collections.Counter(review_id for _, review_id in decided)
    recorded = collections.Counter(
        Decision.objects.filter(review_id__in=list(accepted)).values_list("review_id", flat=True)
    )
    lost = sum(1 for review_id in accepted if review_id not in recorded)
    doubled = sum(count - 1 for count in accepted.values() if count > 1) + sum(
        count - 1 for count in recorded.values() if count > 1
    )
    by_whom = dict(
        Decision.objects.filter(review_id__in=list(accepted)).values_list("review_id", "decided_by__username")
    )
    wrong_decider = sum(1 for username, review_id in decided if by_whom.get(review_id) != username)
    print(
        f"decisions: {len(decided)} accepted by the server; in the database: lost {lost}, doubled {doubled}, "
        f"recorded for another operator {wrong_decider}"
    )
    reviews = Review.objects.exclude(judge_key="seed").count()
    print(f"grading during the run: {reviews} reviews written by the workers")
    total = sum(cpu.values())
    print(f"CPU seconds over {wall:.0f} s of wall time (2 cores: {2 * wall:.0f} core-seconds available):")
    for part, used in cpu.items():
        print(f"  {part:32} {used:7.1f} s  ({used / wall * 100:5.1f}% of one core)")
    web_ms = cpu["gunicorn (2 workers)"] / max(requests, 1) * 1000
    worker_ms = cpu["Celery worker (2 processes)"] / max(reviews, 1) * 1000
    print(
        f"  {'all':32} {total:7.1f} s; {web_ms:.1f} ms of gunicorn CPU per request served, {worker_ms:.1f} ms of "
        "worker CPU per review written"
    )
    connection.close()
    assert lost == 0 and doubled == 0 and wrong_decider == 0, "a decision was lost or doubled"

"""Trials scored against people: a trial's wall time through the real judge worker, and its result page at scale.

(a) 200 closed conversations are graded by a grading pass and decided by a person (audit items); a trial of a new
version on them (source: decisions, K = 200) is started as the trial page starts it, and graded by a real
`celery worker` process (threads, the layout of `make demo`) against FakeLLM answering in 200 ms. Reported: the
wall time from the start to the trial's last review against the concurrency bound (200 calls / worker threads x
0.2 s), and the CPU the worker spent per item.

(b) A finished trial of 10,000 conversations, each with a trial review, a counting review and a decision (rows
bulk-inserted), and its result page through Django's test client (every middleware, a signed-in criteria admin,
real PostgreSQL): median ms, CPU ms of this process and SQL queries, against a trivial view with the same
middleware, sign-in, role check and layout, measured in the same run.

BENCH_TRIALS_ITEMS (default 200), BENCH_TRIALS_THREADS (default 32), BENCH_TRIALS_LATENCY (default 0.2) and
BENCH_TRIALS_PAGE_ITEMS (default 10000) scale it.

`phases()` offers (b) to `bench.compare`: the trivial view and the result page, `PHASE_REQUESTS` requests a phase,
and the page's first request after the trial's figures went stale (each run after an untimed change of their key):
the recount that stores the figures and the items again.
Before the phases, each side asserts the trial's JSON over the API equals `trial_score` counting it again, and
writes it to BENCH_TRIALS_FIGURES when set (give each side its own file with `--base-setting` and `--setting`, and
compare the two: the figures equal before and after).
"""

import json
import os
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from functools import partial

import psutil
from django.contrib.auth import get_user_model
from django.db import connection
from django.http import HttpRequest, HttpResponse
from django.template import RequestContext, Template
from django.test import Client
from django.test.utils import CaptureQueriesContext, override_settings
from django.urls import clear_url_caches, path, reverse
from django.utils import timezone

from bench.bench_throughput import Layout, _cpu, _populate, _responder, _start_worker, _stop_stale_workers
from bench.common import fresh_org, purge_queues
from grading.api.keys import api_key_create
from grading.criteria.scoring import trial_score
from grading.criteria.trials import criteria_trial_start, trial_count
from grading.models import (
    Conversation,
    CriteriaTrial,
    Decision,
    ItemKind,
    Review,
    ReviewState,
    TrialFigures,
    TrialSource,
)
from grading.passes.planner import grading_pass
from grading.reviews.services import PersonVerdict, decision_record, review_audit_mark
from grading.reviews.versions import criteria_active, criteria_new_version
from reviewer import urls as reviewer_urls
from reviewer.access import role_required
from reviewer.models import Membership, Role
from tests.fakes.openai_server import FakeLLM

RUNS = 15
WARMUP = 3
PHASE_REQUESTS = 5
PASS = {
    name: {"verdict": "pass", "message_ids": ["m4"], "rationale": "ok"} for name in ("grounded", "complete", "usable")
}


@role_required(Role.CRITERIA_ADMIN)
def trivial(request: HttpRequest) -> HttpResponse:
    """The yardstick: the same middleware, sign-in and role check, and the site layout around one word."""
    template = Template('{% extends "_base.html" %}{% block content %}ok{% endblock %}')
    return HttpResponse(template.render(RequestContext(request, {})))


urlpatterns = [path("bench/trivial/", trivial), *reviewer_urls.urlpatterns]


def main() -> None:
    items = int(os.environ.get("BENCH_TRIALS_ITEMS", "200"))
    threads = int(os.environ.get("BENCH_TRIALS_THREADS", "32"))
    latency = float(os.environ.get("BENCH_TRIALS_LATENCY", "0.2"))
    page_items = int(os.environ.get("BENCH_TRIALS_PAGE_ITEMS", "10000"))
    org = fresh_org()
    criteria_active(org=org, kind=ItemKind.CONVERSATION)
    _populate(org, items, 0)
    admin = get_user_model().objects.create_user(username="bench-admin", password="unused-bench-password")
    Membership.objects.create(user=admin, org=org, role=Role.CRITERIA_ADMIN)
    if items:  # BENCH_TRIALS_ITEMS=0 measures the page alone
        _trial_through_the_worker(org, admin, items, threads, latency)
    _result_page(org, admin, page_items)


def _trial_through_the_worker(org, admin, items: int, threads: int, latency: float) -> None:
    layout = Layout(f"threads -c {threads}, 1 process", 1, "threads", threads)
    _stop_stale_workers()
    purge_queues()
    with FakeLLM(keep_alive=True, record=False) as judge:
        judge.set_default(_responder(latency))
        worker, log_path = _start_worker(layout, judge, 0)
        try:
            grading_pass(cap=items)
            deadline = time.monotonic() + 120 + items * latency
            while Review.objects.filter(org=org).count() < items:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the grading pass did not finish; see {log_path}")
                time.sleep(0.2)
            review_audit_mark(review_ids=list(Review.objects.counting().values_list("pk", flat=True)))
            for review_id in Review.objects.waiting().values_list("pk", flat=True):
                checks = {"grounded": "pass", "complete": "fail" if review_id % 3 == 0 else "pass", "usable": "pass"}
                verdict = PersonVerdict(checks=checks, note="bench")
                decision_record(review_id=review_id, decided_by=admin, decided_at=timezone.now(), verdict=verdict)
            version = criteria_new_version(org=org, kind=ItemKind.CONVERSATION, author=admin)
            count = trial_count(version=version, size=items, source=TrialSource.DECISIONS)
            process = psutil.Process(worker.pid)
            cpu_before, started = _cpu([process]), time.perf_counter()
            trial = criteria_trial_start(
                version=version, size=items, counted_calls=count.judge_calls, actor=admin, source=TrialSource.DECISIONS
            )
            deadline = time.monotonic() + 120 + items * latency
            while not CriteriaTrial.objects.filter(pk=trial.pk, finished_at__isnull=False).exists():
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the trial did not finish; see {log_path}")
                time.sleep(0.05)
            wall = time.perf_counter() - started
            cpu = _cpu([process]) - cpu_before
        finally:
            worker.terminate()
            worker.wait(timeout=60)
    trial.refresh_from_db()
    bound = trial.judge_calls / threads * latency
    print(
        f"(a) trial of {len(trial.sample)} conversations, {trial.judge_calls_made} judge calls at {latency * 1000:.0f} "
        f"ms through one worker of {threads} threads: {wall:.2f} s from the start to the last review, against the "
        f"concurrency bound {bound:.2f} s ({wall / bound:.2f}x); worker CPU {cpu / len(trial.sample) * 1000:.1f} "
        f"ms per item (load average {os.getloadavg()[0]:.1f})"
    )


@contextmanager
def phases() -> Iterator[dict[str, Callable[[], None]]]:
    """For `bench.compare`: (b)'s trial set up once, its figures checked, then the trivial view, the result page, and
    the result page recounted."""
    items = int(os.environ.get("BENCH_TRIALS_PAGE_ITEMS", "10000"))
    org = fresh_org()
    criteria_active(org=org, kind=ItemKind.CONVERSATION)
    admin = get_user_model().objects.create_user(username="bench-admin", password="unused-bench-password")
    Membership.objects.create(user=admin, org=org, role=Role.CRITERIA_ADMIN)
    trial = _finished_trial(org, admin, items)
    _figures_checked(org, trial)
    client = Client(SERVER_NAME="localhost")
    client.force_login(admin)
    with override_settings(ROOT_URLCONF=__name__):
        clear_url_caches()
        try:
            trivial, page = _pages(trial, items)
            named = {
                f"{name} ({PHASE_REQUESTS} requests)": partial(_requests, client, url) for name, url in (trivial, page)
            }
            named["trial result page recounted (1 request)"] = (
                partial(_figures_stale, trial),
                partial(_read, client, page[1]),
            )
            yield named
        finally:
            clear_url_caches()


def _requests(client: Client, url: str) -> None:
    for _ in range(PHASE_REQUESTS):
        assert client.get(url).status_code == 200, url


def _figures_stale(trial: CriteriaTrial) -> None:
    """The stored figures' key no longer stands, as after any write to the trial's items: the next read counts."""
    TrialFigures.objects.filter(trial_id=trial.pk).update(key="stale")


def _read(client: Client, url: str) -> None:
    assert client.get(url).status_code == 200, url


def _pages(trial: CriteriaTrial, items: int) -> list[tuple[str, str]]:
    return [
        ("trivial view (layout only)", "/bench/trivial/"),
        (f"trial result page, {items:,} items", reverse("criteria_trial_detail", args=[trial.pk])),
    ]


def _figures_checked(org, trial: CriteriaTrial) -> None:
    """The trial's JSON over the API (read twice: counted, then as read back) equals a recount by `trial_score`."""
    key = api_key_create(org=org, name="bench").plaintext
    client = Client(SERVER_NAME="localhost")
    url = f"/api/v1/criteria/trials/{trial.pk}"
    answers = [client.get(url, HTTP_AUTHORIZATION=f"Bearer {key}").json() for _ in range(2)]
    recount = json.loads(json.dumps(trial_score(trial).as_json()))
    assert answers[0] == answers[1] == recount, "the trial's figures differ from a recount"
    if path_out := os.environ.get("BENCH_TRIALS_FIGURES"):
        with open(path_out, "w") as out:
            json.dump({k: v for k, v in recount.items() if k != "id"}, out, sort_keys=True)


def _result_page(org, admin, items: int) -> None:
    """A finished trial of `items` conversations, each decided, graded under the active version and the trial's."""
    trial = _finished_trial(org, admin, items)
    client = Client(SERVER_NAME="localhost")
    client.force_login(admin)
    with override_settings(ROOT_URLCONF=__name__):
        clear_url_caches()
        try:
            results = [(name, *_measure(client, url)) for name, url in _pages(trial, items)]
        finally:
            clear_url_caches()
    baseline, cpu_baseline = results[0][1], results[0][2]
    print(f"(b) {'page':<36} {'median ms':>10} {'vs trivial':>11} {'cpu ms':>8} {'cpu vs trivial':>15} {'queries':>8}")
    for name, median, cpu, queries in results:
        print(
            f"    {name:<36} {median:>10.1f} {median / baseline:>10.1f}x {cpu:>8.1f} {cpu / cpu_baseline:>14.1f}x "
            f"{queries:>8}"
        )


def _finished_trial(org, admin, items: int) -> CriteriaTrial:
    """A finished trial of `items` conversations, each decided, graded under the active version and the trial's."""
    active = criteria_active(org=org, kind=ItemKind.CONVERSATION)
    version = criteria_new_version(org=org, kind=ItemKind.CONVERSATION, author=admin)
    now = timezone.now()
    conversations = Conversation.objects.bulk_create(
        [
            Conversation(
                org=org, external_id=f"page-{i}", application="bench", closed=True, started_at=now,
                last_activity_at=now, fingerprint=f"fp-{i}", active_path_ids=["m4"], branch_count=1, message_count=1,
            )
            for i in range(items)
        ],
        batch_size=2000,
    )  # fmt: skip

    def review(conversation: Conversation, criteria, state: str, checks: dict, i: int) -> Review:
        return Review(
            org=org, kind=ItemKind.CONVERSATION, conversation=conversation, fingerprint=conversation.fingerprint,
            criteria_version=criteria, judge={"model": "bench"}, judge_key=f"bench-{criteria.pk}", started_at=now,
            finished_at=now + timedelta(milliseconds=i), route="pass", checks=checks, state=state,
            audit=state == ReviewState.DECIDED, usage={"prompt_tokens": 1000, "completion_tokens": 60},
        )  # fmt: skip

    failing = {**PASS, "complete": {**PASS["complete"], "verdict": "fail"}}
    counting = Review.objects.bulk_create(
        [review(c, active, ReviewState.DECIDED, PASS, i) for i, c in enumerate(conversations)], batch_size=2000
    )
    trial_reviews = Review.objects.bulk_create(
        [review(c, version, ReviewState.TRIAL, failing if i % 3 else PASS, i) for i, c in enumerate(conversations)],
        batch_size=2000,
    )
    Decision.objects.bulk_create(
        [
            Decision(org=org, review=r, outcome="fail" if i % 2 else "pass", decided_at=now, decided_by=admin, checks={
                "grounded": "pass", "complete": "fail" if i % 2 else "pass", "usable": "pass"
            })
            for i, r in enumerate(counting)
        ],
        batch_size=2000,
    )  # fmt: skip
    trial = CriteriaTrial.objects.create(
        org=org, criteria_version=version, sample=[c.pk for c in conversations], judge_calls=items,
        judge_calls_made=items, review_ids=[r.pk for r in trial_reviews], source=TrialSource.DECISIONS,
        finished_at=now,
    )  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE grading_review, grading_conversation, grading_decision")
    return trial


def _measure(client: Client, url: str) -> tuple[float, float, int]:
    for _ in range(WARMUP):
        assert client.get(url).status_code == 200, url
    connection.queries_log.clear()
    with CaptureQueriesContext(connection) as queries:
        client.get(url)
    timings, cpu = [], []
    for _ in range(RUNS):
        started, started_cpu = time.perf_counter(), time.process_time()
        response = client.get(url)
        timings.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - started_cpu) * 1000)
        assert response.status_code == 200
    return statistics.median(timings), statistics.median(cpu), len(queries)

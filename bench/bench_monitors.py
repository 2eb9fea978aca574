"""The monitors' evaluation: one beat run over 1,000 monitors (`monitors_evaluate`), against a trivial baseline
measured in the same run.

The world: BENCH_MONITORS_REVIEWS (default 200,000) conversations graded over the last 48 hours, each with one
counting review (three checks; a tenth decided by people; a twentieth waiting, half of those overdue), spread over
5 applications and 20 releases (metadata `release`), and 2,000 drafts. BENCH_MONITORS_COUNT (default 1,000)
monitors of every figure, each on a slice (no slice, an application, a release, or both), over windows of 1, 6, 24
and 48 hours.

The baseline: the same loop of one short transaction per monitor that locks its row and reads nothing else (what
any evaluation costs before its figure). Reported for each, as the median of BENCH_MONITORS_ROUNDS (default 5)
interleaved runs: wall time, CPU of this process and of its PostgreSQL backend, per run and per monitor; the
evaluation's ratio to the baseline; and the share of a minute one run takes (the beat runs every five minutes, so
anything under 1 leaves the schedule room).

`phases()` offers the same two runs to `bench.compare` (the baseline and the evaluation, each one run of every
monitor), over the same world at BENCH_MONITORS_REVIEWS and BENCH_MONITORS_COUNT, and the monitors' pages as a
stakeholder reads them, each `PAGE_REQUESTS` requests beside the trivial view's (every middleware, a signed-in
person, the site's layout around one word): the list of every monitor, one monitor's page and the items behind its
figure. The pages are read with the history the beat leaves at steady state: an evaluation every five minutes for
MONITOR_HISTORY_DAYS (BENCH_MONITORS_HISTORY_DAYS, default 30), 8,640 a monitor.
"""

import os
import random
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from functools import partial

from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.test import Client
from django.test.utils import override_settings
from django.urls import clear_url_caches
from django.utils import timezone

from bench.common import backend_cpu, fresh_org
from grading.models import (
    Conversation,
    Decision,
    Draft,
    ItemKind,
    Monitor,
    MonitorEvaluation,
    Review,
    ReviewState,
    Route,
)
from grading.monitors.evaluate import monitors_evaluate
from grading.monitors.services import monitor_create
from grading.reviews.versions import criteria_active
from reviewer.models import Membership, Role

APPLICATIONS = [f"app{n}" for n in range(5)]
RELEASES = [f"2.{n}" for n in range(20)]
BATCH = 5_000
JUDGE = {"backend": "openai", "model": "bench", "prompt_hash": "0", "temperature": 0.0}


def main() -> None:
    reviews = int(os.environ.get("BENCH_MONITORS_REVIEWS", "200000"))
    count = int(os.environ.get("BENCH_MONITORS_COUNT", "1000"))
    rounds = int(os.environ.get("BENCH_MONITORS_ROUNDS", "5"))
    org = fresh_org()
    started = time.perf_counter()
    _world(org, reviews)
    _monitors(org, count)
    print(f"world: {reviews:,} conversations and 2,000 drafts with reviews, {count:,} monitors, "
          f"in {time.perf_counter() - started:.1f} s")  # fmt: skip
    told: list[int] = []
    costs: dict[str, list[tuple[float, float, float]]] = {"baseline": [], "evaluation": []}
    monitors_evaluate(deliver=lambda evaluation_id, channels: told.append(evaluation_id))  # warm-up, dropped
    for round_number in range(rounds):
        order = ("baseline", "evaluation") if round_number % 2 == 0 else ("evaluation", "baseline")
        for name in order:
            costs[name].append(_timed(_baseline if name == "baseline" else _evaluation))
    base = [statistics.median(column) for column in zip(*costs["baseline"], strict=True)]
    for name in ("baseline", "evaluation"):
        wall, cpu, db = (statistics.median(column) for column in zip(*costs[name], strict=True))
        print(
            f"{name:>10}: {wall * 1000:8.0f} ms wall, {cpu * 1000:7.0f} ms CPU here, {db * 1000:7.0f} ms CPU in "
            f"PostgreSQL per run; {wall / count * 1000:.2f} ms wall, {(cpu + db) / count * 1000:.2f} ms CPU per monitor"
        )
    wall, cpu, db = (statistics.median(column) for column in zip(*costs["evaluation"], strict=True))
    print(
        f"evaluation / baseline: wall {wall / base[0]:.1f}x, CPU here {cpu / base[1]:.1f}x, "
        f"CPU in PostgreSQL {db / base[2]:.1f}x (baseline's backend CPU {base[2] * 1000:.0f} ms)"
    )
    print(f"one run of {count:,} monitors takes {wall / 60:.2f} of a minute ({wall:.1f} s wall)")
    states = Monitor.objects.values_list("state", flat=True)
    print(f"states: {dict(sorted((s, list(states).count(s)) for s in set(states)))}; changes told: {len(told)}")


@contextmanager
def phases() -> Iterator[dict[str, Callable[[], None]]]:
    """The world, its monitors and their history set up once; a phase is one run of every monitor (evaluated or only
    locked), or `PAGE_REQUESTS` requests of a page."""
    reviews = int(os.environ.get("BENCH_MONITORS_REVIEWS", "200000"))
    count = int(os.environ.get("BENCH_MONITORS_COUNT", "1000"))
    days = int(os.environ.get("BENCH_MONITORS_HISTORY_DAYS", "30"))
    org = fresh_org()
    _world(org, reviews)
    _monitors(org, count)
    _history(org, days)
    client = _stakeholder(org)
    monitor = Monitor.objects.filter(org=org, figure="check_pass", metadata_name="").order_by("pk").first()
    pages = {
        "trivial view (layout only)": "/bench/trivial/",
        f"monitors page ({count:,} monitors, {days} days of history)": "/monitors/",
        "a monitor's page": f"/monitors/{monitor.pk}/",
        "the items behind its figure now": f"/monitors/{monitor.pk}/items/",
    }
    with override_settings(ROOT_URLCONF="bench.bench_dashboard"):
        clear_url_caches()
        try:
            yield {
                f"baseline ({count:,} monitors locked)": _baseline,
                f"evaluation ({count:,} monitors over {reviews:,} conversations)": _evaluation,
            } | {f"{name} ({PAGE_REQUESTS} requests)": partial(_requests, client, url) for name, url in pages.items()}
        finally:
            clear_url_caches()


PAGE_REQUESTS = 10


def _requests(client: Client, url: str) -> None:
    for _ in range(PAGE_REQUESTS):
        assert client.get(url).status_code == 200, url


def _stakeholder(org) -> Client:
    user = get_user_model().objects.create_user(username="bench-stakeholder", password="unused-bench-password")
    Membership.objects.create(user=user, org=org, role=Role.STAKEHOLDER)
    client = Client(SERVER_NAME="localhost")
    client.force_login(user)
    return client


def _history(org, days: int) -> None:
    """What the beat leaves: an evaluation of every monitor every five minutes over `days`, the latest a minute ago
    (the evaluation phase's own are removed after each run, so the history stays this size). One INSERT ... SELECT
    over generate_series: 8.6 million rows through the ORM would take longer than the rest of the set-up."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO grading_monitorevaluation (monitor_id, at, value, n, state, previous, changed) "
            "SELECT m.id, now() - make_interval(mins => 1 + 5 * s), (m.id * 7 + s) %% 100 / 100.0, 20 + s %% 50, "
            "'ok', 'ok', false FROM grading_monitor m CROSS JOIN generate_series(0, %s) s WHERE m.org_id = %s",
            [days * 24 * 12 - 1, org.pk],
        )
        cursor.execute("ANALYZE grading_monitorevaluation")


def _timed(run) -> tuple[float, float, float]:
    wall, cpu, db = time.perf_counter(), time.process_time(), backend_cpu()
    run()
    return time.perf_counter() - wall, time.process_time() - cpu, backend_cpu() - db


def _baseline() -> None:
    for monitor_id in Monitor.objects.order_by("pk").values_list("pk", flat=True):
        with transaction.atomic():
            Monitor.objects.select_for_update(skip_locked=True).filter(pk=monitor_id).first()


def _evaluation() -> None:
    started = timezone.now()
    monitors_evaluate(deliver=lambda *_: None)
    MonitorEvaluation.objects.filter(at__gte=started).delete()  # the run's own: the history stays its size


def _world(org, reviews: int) -> None:
    rng = random.Random(7)
    now = timezone.now()
    conversations = criteria_active(org=org, kind=ItemKind.CONVERSATION)
    drafts = criteria_active(org=org, kind=ItemKind.DRAFT)
    for start in range(0, reviews, BATCH):
        size = min(BATCH, reviews - start)
        moments = [now - timedelta(minutes=rng.uniform(0, 48 * 60)) for _ in range(size)]
        items = Conversation.objects.bulk_create(
            Conversation(
                org=org, external_id=f"c{start + n}", application=rng.choice(APPLICATIONS), started_at=moment,
                last_activity_at=moment, fingerprint=f"fp1:{start + n:064x}",
                metadata={"release": rng.choice(RELEASES)},
            )
            for n, moment in enumerate(moments)
        )  # fmt: skip
        _reviews(org, conversations, ItemKind.CONVERSATION, items, moments, rng, now)
    moments = [now - timedelta(minutes=rng.uniform(0, 48 * 60)) for _ in range(2_000)]
    items = Draft.objects.bulk_create(
        Draft(org=org, external_id=f"d{n}", title="t", slug=f"d{n}", body="b", fingerprint=f"fp1:d{n:063x}",
              metadata={"release": rng.choice(RELEASES)})
        for n in range(2_000)
    )  # fmt: skip
    _reviews(org, drafts, ItemKind.DRAFT, items, moments, rng, now)


def _reviews(org, version, kind, items, moments, rng, now) -> None:
    rows, decided = [], []
    for item, moment in zip(items, moments, strict=True):
        roll = rng.random()
        route = Route.HUMAN if roll < 0.15 else (Route.FAIL if roll < 0.3 else Route.PASS)
        state = ReviewState.CURRENT
        if route == Route.HUMAN:
            state = ReviewState.DECIDED if roll < 0.1 else ReviewState.WAITING
        verdicts = {key: {"verdict": rng.choice(["pass", "pass", "pass", "fail", "unknown"])}
                    for key in ("grounded", "complete", "usable")}  # fmt: skip
        rows.append(
            Review(
                org=org, kind=kind, conversation=item if kind == ItemKind.CONVERSATION else None,
                draft=item if kind == ItemKind.DRAFT else None, application=getattr(item, "application", ""),
                fingerprint=item.fingerprint, criteria_version=version, judge=JUDGE, judge_key="bench",
                started_at=moment, finished_at=moment, stages=1, route=route, checks=verdicts,
                usage={"prompt_tokens": 900, "completion_tokens": 90}, state=state, judge_passed=roll < 0.2,
                routed_at=moment if route == Route.HUMAN else None,
                due_at=moment + timedelta(hours=rng.choice([1, 100])) if route == Route.HUMAN else None,
            )
        )  # fmt: skip
    for review in Review.objects.bulk_create(rows):
        if review.state == ReviewState.DECIDED:
            decided.append(
                Decision(org=org, review=review, outcome=rng.choice(["pass", "fail"] if kind == ItemKind.CONVERSATION
                         else ["approve", "reject"]), checks={"grounded": rng.choice(["pass", "fail"])},
                         decided_at=min(now, review.finished_at + timedelta(minutes=30)))
            )  # fmt: skip
    Decision.objects.bulk_create(decided)


FIGURES = [
    ("check_pass", ItemKind.CONVERSATION, "grounded", 0.9, 0.8),
    ("unknown_share", ItemKind.CONVERSATION, "complete", 0.2, 0.3),
    ("item_pass", ItemKind.CONVERSATION, "", 0.7, 0.6),
    ("item_pass", ItemKind.DRAFT, "", 0.7, 0.6),
    ("agreement", ItemKind.CONVERSATION, "grounded", 0.8, 0.7),
    ("agreement", ItemKind.DRAFT, "", 0.8, 0.7),
    ("spend", ItemKind.CONVERSATION, "", 5_000_000, 10_000_000),
    ("errors", ItemKind.CONVERSATION, "", 0.01, 0.05),
    ("overdue", ItemKind.CONVERSATION, "", 10, 100),
]


def _monitors(org, count: int) -> None:
    rng = random.Random(11)
    for n in range(count):
        figure, kind, check, warning, alert = FIGURES[n % len(FIGURES)]
        on_application = kind == ItemKind.CONVERSATION and rng.random() < 0.5
        on_release = rng.random() < 0.6
        monitor_create(
            org=org,
            given={
                "name": f"m{n}", "figure": figure, "kind": kind, "check_key": check,
                "window_hours": rng.choice([1, 6, 24, 48]),
                "application": rng.choice(APPLICATIONS) if on_application else "",
                "metadata_name": "release" if on_release else "",
                "metadata_value": rng.choice(RELEASES) if on_release else "",
                "min_n": 20, "direction": "", "warning_level": warning, "alert_level": alert, "margin": 0,
                "mail_to": [], "webhook_url": "", "chat_url": "",
            },
        )  # fmt: skip

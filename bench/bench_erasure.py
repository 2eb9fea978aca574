# ruff: noqa: S608 - the bulk-insert SQL is assembled from this module's constants; values are parameters.
"""Erasure of 100,000 conversations with reviews while grading and the queue run (issue 25).

Seeded with INSERT ... SELECT generate_series: BENCH_ERASURE_ITEMS old conversations (default 100,000; 4 messages
each, one review: 70% machine passes, 20% waiting in the queue, 10% decided with a decision; thumbs on a tenth), past
a 30-day retention policy; and 1,000 live conversations filed in the same applications and weeks (so grading
writes book into the very counters the erasure takes from), each with a review waiting in the queue.

Then, for BASELINE_SECONDS, two grading threads write reviews of live conversations through the record's writer
(`review_record`: the item's row, its live review's, the counters, the spend ledger) and a queue thread claims the
next item (`claim_next`) and releases it; each times every write and claim. Then the daily retention pass asks for
the erasure and this process works it (`erasure_run`, the task's own function) while the threads go on. Reported:
items erased per second, CPU per item (this process and its database backend), the longest batch (how long its
locks are held), and the median, p99 and longest wait of a grading write and of a claim, beside the same measured
before the erasure started. Last, the counters are compared with a rebuild from the raw tables.
"""

import os
import statistics
import threading
import time
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone

from bench.common import backend_cpu, fresh_org
from grading.erasure import runs
from grading.models import Conversation, Erasure, ItemKind, RetentionPolicy
from grading.reviews.rollups import live_counters, rollups_rebuild, stored_counters
from grading.reviews.services import ReviewOutcome, ScoreIdentity, review_record
from grading.reviews.sql import subject_to_grade
from grading.reviews.versions import criteria_active
from reviewer.models import Claim, Membership, Role
from reviewer.queue.services import claim_next

LIVE = 1_000
BASELINE_SECONDS = 10
GRADERS = 2
MESSAGES = 4


def main() -> None:
    items = int(os.environ.get("BENCH_ERASURE_ITEMS", "100000"))
    org = fresh_org()
    started = time.perf_counter()
    _populate(org, items)
    rebuilt = rollups_rebuild(org_id=org.pk)
    print(f"seeded {items:,} old conversations and {LIVE:,} live ones ({items * MESSAGES:,} messages, "
          f"{rebuilt.rows:,} counters) in {time.perf_counter() - started:.0f} s")  # fmt: skip
    RetentionPolicy.objects.create(org=org, kind=ItemKind.CONVERSATION, days=30, updated_at=timezone.now())

    load = _Load(org)
    load.start()
    time.sleep(BASELINE_SECONDS)
    baseline = load.take()

    runs.enqueue.erasure_run = lambda **_: None  # this process works the erasure, as the task would; no broker
    [erasure_id] = runs.retention_pass()
    batches: list[float] = []
    wall, cpu, db_cpu = time.perf_counter(), time.thread_time(), backend_cpu()
    while True:
        batch_started = time.perf_counter()
        erasure = runs.erasure_batch(erasure_id=erasure_id)
        batches.append(time.perf_counter() - batch_started)
        if erasure.state == "done":
            break
    wall, cpu, db_cpu = time.perf_counter() - wall, time.thread_time() - cpu, backend_cpu() - db_cpu
    during = load.take()
    load.stop()

    erased = Erasure.objects.get(pk=erasure_id).erased
    print(f"erased {erased['conversation']:,} conversations ({erased['message']:,} messages, {erased['review']:,} "
          f"reviews, {erased.get('decision', 0):,} decisions, {erased.get('claim', 0):,} claims) in {wall:.1f} s: "
          f"{erased['conversation'] / wall:,.0f} items/s, {len(batches):,} batches of {runs.BATCH_SIZE}")  # fmt: skip
    print(f"CPU per item: {cpu / erased['conversation'] * 1e3:.2f} ms here, "
          f"{db_cpu / erased['conversation'] * 1e3:.2f} ms in the database backend")  # fmt: skip
    print(f"batch (locks held): median {statistics.median(batches) * 1e3:.0f} ms, "
          f"longest {max(batches) * 1e3:.0f} ms")  # fmt: skip
    print(f"{'wait of':<16} {'n before':>9} {'median':>8} {'p99':>8} {'max':>8} {'n during':>9} {'median':>8} "
          f"{'p99':>8} {'max':>8} {'max vs before':>14}")  # fmt: skip
    for name in ("grading write", "claim"):
        before, now = baseline[name], during[name]
        print(f"{name:<16} {_row(before)} {_row(now)} {max(now) / max(before):>13.1f}x")
    drifted = rollups_rebuild(org_id=org.pk).drifted
    equal = stored_counters(org_ids=[org.pk]) == live_counters(org_ids=[org.pk])
    print(f"counters equal to a rebuild: {equal} (drift found by the rebuild: {drifted}); "
          f"grading writes {len(during['grading write']) + len(baseline['grading write']):,}, "
          f"claims {len(during['claim']) + len(baseline['claim']):,}")  # fmt: skip


def _row(waits: list[float]) -> str:
    ms = sorted(w * 1e3 for w in waits)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    return f"{len(ms):>9,} {statistics.median(ms):>7.1f}ms {p99:>6.1f}ms {ms[-1]:>6.0f}ms"


class _Load:
    """Grading writes and queue claims in threads (a connection each), timing every one."""

    def __init__(self, org) -> None:
        self.org = org
        self.waits: dict[str, list[float]] = {"grading write": [], "claim": []}
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        live = Conversation.objects.filter(org=org, last_activity_at__gte=timezone.now() - timedelta(days=1))
        self.live = list(live.order_by("pk").values_list("pk", flat=True))
        self.criteria = criteria_active(org=org, kind=ItemKind.CONVERSATION)
        self.operator = get_user_model().objects.create_user(username="bench-claimer", password="unused-password")
        Membership.objects.create(user=self.operator, org=org, role=Role.OPERATOR)
        self.threads = [threading.Thread(target=self._grade, args=(n,), daemon=True) for n in range(GRADERS)]
        self.threads.append(threading.Thread(target=self._claim, daemon=True))

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def take(self) -> dict[str, list[float]]:
        with self.lock:
            taken = {name: list(waits) for name, waits in self.waits.items()}
            for waits in self.waits.values():
                waits.clear()
        return taken

    def stop(self) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join()

    def _timed(self, name: str, started: float) -> None:
        with self.lock:
            self.waits[name].append(time.perf_counter() - started)

    def _grade(self, n: int) -> None:
        written = 0
        try:
            while not self.stopping.is_set():
                pk = self.live[(written * GRADERS + n) % len(self.live)]
                subject = subject_to_grade(Conversation, pk)
                identity = ScoreIdentity(fingerprint=subject.fingerprint, criteria_version=self.criteria,
                                         judge={"backend": "bench"}, judge_key=f"bench-{n}-{written}")  # fmt: skip
                outcome = ReviewOutcome(route="pass", stages=1, usage={"prompt_tokens": 100, "completion_tokens": 10})
                started = time.perf_counter()
                review_record(subject=subject, identity=identity, outcome=outcome, started_at=timezone.now())
                self._timed("grading write", started)
                written += 1
        finally:
            connection.close()

    def _claim(self) -> None:
        try:
            while not self.stopping.is_set():
                started = time.perf_counter()
                claim = claim_next(user=self.operator)
                self._timed("claim", started)
                if claim is not None:
                    Claim.objects.filter(pk=claim.pk).update(ended_at=timezone.now(), end=Claim.End.RELEASED)
        finally:
            connection.close()


def _populate(org, items: int) -> None:
    operator = get_user_model().objects.create_user(username="bench-past-operator", password="unused-password")
    params = {
        "org": org.pk,
        "cc": criteria_active(org=org, kind=ItemKind.CONVERSATION).pk,
        "old": items,
        "live": LIVE,
        "operator": operator.pk,
        "messages": MESSAGES,
    }
    with connection.cursor() as cursor:
        for statement in _POPULATE_SQL:
            cursor.execute(statement, params)
        for table in ("grading_conversation", "grading_message", "grading_review", "grading_decision",
                      "grading_feedback"):  # fmt: skip
            cursor.execute(f"VACUUM ANALYZE {table}")


# Old item n and live item n start in the same weeks and applications; only their last activity differs.
_STARTED = "(now() - interval '60 days' - (n %% 70) * interval '1 day')"
_POPULATE_SQL = [
    f"""INSERT INTO grading_conversation (org_id, external_id, application, closed, started_at, last_activity_at,
            fingerprint, active_path_ids, branch_count, message_count, grading_task_id, end_user, updated_at, metadata)
        SELECT %(org)s, grp || '-' || n, 'app-' || (n %% 5), true, {_STARTED},
            CASE grp WHEN 'old' THEN {_STARTED} + interval '1 hour' ELSE now() END,
            'fp:' || grp || n, '["m1", "m2", "m3", "m4"]'::jsonb, 1, %(messages)s, '', '', now(), '{{}}'::jsonb
        FROM (SELECT 'old' AS grp, g AS n FROM generate_series(1, %(old)s) g
              UNION ALL SELECT 'live', g FROM generate_series(1, %(live)s) g) items""",
    """INSERT INTO grading_message (conversation_id, external_id, parent_external_id, role, content, hidden, truncated,
            twin)
        SELECT c.id, 'm' || m, CASE WHEN m > 1 THEN 'm' || (m - 1) END,
            CASE WHEN m %% 2 = 1 THEN 'user' ELSE 'assistant' END,
            to_jsonb('Message ' || m || ' of a support conversation about an order that arrived broken.'), false,
            false, 0
        FROM grading_conversation c CROSS JOIN generate_series(1, %(messages)s) m WHERE c.org_id = %(org)s""",
    """INSERT INTO grading_review (org_id, kind, conversation_id, fingerprint, criteria_version_id, judge, judge_key,
            memory_snapshot, criteria_fingerprint, started_at, finished_at, stages, route, reason, detail, checks,
            sub_scores, findings, judge_issues, memory_used, usage, state, audit, application, week, submitted_at,
            routed_at, confidences, confidence_source, slice, sent)
        SELECT c.org_id, 'conversation', c.id, c.fingerprint, %(cc)s, '{"backend": "bench"}'::jsonb, 'bench', '',
            '', c.last_activity_at, c.last_activity_at + interval '5 seconds', 1,
            CASE WHEN c.external_id LIKE 'live%%' OR c.id %% 10 IN (1, 2) THEN 'human'
                 WHEN c.id %% 10 = 3 THEN 'human' ELSE 'pass' END,
            CASE WHEN c.external_id LIKE 'live%%' OR c.id %% 10 IN (1, 2, 3) THEN 'unknown_check' ELSE '' END, '',
            '{"grounded": {"verdict": "pass"}, "complete": {"verdict": "unknown"}, "usable": {"verdict": "pass"}}',
            '{}', '[]', '[]', '{}', '{"prompt_tokens": 900, "completion_tokens": 80}',
            CASE WHEN c.external_id LIKE 'live%%' OR c.id %% 10 IN (1, 2) THEN 'waiting'
                 WHEN c.id %% 10 = 3 THEN 'decided' ELSE 'current' END,
            false, c.application, date_trunc('week', c.started_at)::date, c.last_activity_at,
            c.last_activity_at + interval '5 seconds', '{}', '', '{}', ''
        FROM grading_conversation c WHERE c.org_id = %(org)s""",
    """INSERT INTO grading_decision (org_id, review_id, basis, outcome, checks, note, decided_by_id, decided_at)
        SELECT r.org_id, r.id, 'one', 'pass',
            '{"grounded": "pass", "complete": "pass", "usable": "pass"}', 'Checked against the order.',
            %(operator)s, r.finished_at + interval '1 hour'
        FROM grading_review r WHERE r.org_id = %(org)s AND r.state = 'decided'""",
    """INSERT INTO grading_feedback (conversation_id, message_external_id, value, created_at)
        SELECT c.id, 'm2', CASE WHEN c.id %% 20 = 0 THEN 'down' ELSE 'up' END, now()
        FROM grading_conversation c WHERE c.org_id = %(org)s AND c.id %% 10 = 0""",
]

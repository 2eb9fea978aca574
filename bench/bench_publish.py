# ruff: noqa: S608 - the bulk-insert SQL is assembled from this module's constants; values are parameters.
"""Publishing a criteria version that makes 1,000,000 counting reviews stale, with ingestion running beside it.

ReviewState is stored on each review, except whether its criteria version is still active, which is read when
asked (grading/models/reviews.py). This benchmark measures why: it times

1. the publication as built (one transaction: the new version active, the old one not, an AuditEvent), and
2. the alternative, a stored state kept true by publishing: the same transaction plus an UPDATE of every counting
   review of the kind to `stale` (rolled back afterwards),

and for each, the latency of appends through the API to conversations whose review is among those made stale,
sent from another thread with its own connection while the publication runs. An append must update its review's
state in its own transaction, so under (2) it waits for the publication's row locks.

BENCH_PUBLISH_REVIEWS (default 1000000) scales it; BENCH_PUBLISH_APPENDS (default 200) appends per run.
"""

import json
import os
import statistics
import threading
import time

from django.db import connection, connections, transaction
from django.test import Client

from bench.common import fresh_org
from grading.api.keys import api_key_create
from grading.models import ItemKind, ReviewState
from grading.reviews.versions import criteria_active, criteria_new_version, criteria_publish

_POPULATE = [
    """INSERT INTO grading_conversation (org_id, external_id, application, closed, started_at, last_activity_at,
            fingerprint, active_path_ids, branch_count, message_count, updated_at, grading_task_id, end_user)
        SELECT %(org)s, 'c-' || g, 'app-' || (g %% 5), true, now() - interval '2 days', now() - interval '2 days',
            'fp1:c-' || g, '["m1"]'::jsonb, 0, 1, now(), '', ''
        FROM generate_series(1, %(n)s) g""",
    """INSERT INTO grading_message (conversation_id, external_id, role, content, created_at, hidden, truncated, twin)
        SELECT c.id, 'm1', 'user', to_jsonb('Where is order ' || c.id || '?'::text), c.started_at, false, false, 0
        FROM grading_conversation c WHERE c.org_id = %(org)s AND c.id <= (SELECT min(id) FROM grading_conversation)
            + %(appended)s""",
    """INSERT INTO grading_review (org_id, kind, conversation_id, fingerprint, criteria_version_id, judge, judge_key,
            memory_snapshot, started_at, finished_at, stages, route, reason, detail, checks, sub_scores, findings,
            judge_issues, memory_used, usage, state, audit, criteria_fingerprint, confidences, confidence_source,
            application)
        SELECT %(org)s, 'conversation', c.id, c.fingerprint, %(criteria)s, '{"backend": "bench"}'::jsonb, 'bench', '',
            now() - interval '1 day', now() - interval '1 day', 1, 'pass', '', '', '{}'::jsonb, '{}'::jsonb,
            '[]'::jsonb, '[]'::jsonb, '{}'::jsonb, '{}'::jsonb, 'current', false, '', '{}'::jsonb, '',
            c.application
        FROM grading_conversation c WHERE c.org_id = %(org)s""",
]


def main() -> None:
    reviews = int(os.environ.get("BENCH_PUBLISH_REVIEWS", "1000000"))
    appends = int(os.environ.get("BENCH_PUBLISH_APPENDS", "200"))
    org = fresh_org()
    criteria = criteria_active(org=org, kind=ItemKind.CONVERSATION)
    started = time.perf_counter()
    with connection.cursor() as cursor:
        for statement in _POPULATE:
            cursor.execute(statement, {"org": org.pk, "n": reviews, "criteria": criteria.pk, "appended": 4 * appends})
        for table in ("grading_conversation", "grading_message", "grading_review"):
            cursor.execute(f"VACUUM ANALYZE {table}")
    print(f"populated {reviews:,} conversations, each with a counting review, in {time.perf_counter() - started:.0f} s")
    key = api_key_create(org=org, name="bench").plaintext

    quiet = _appends_beside(lambda: time.sleep(2.0), key, appends, first=0)
    print(f"appends with nothing else running: p50 {quiet.p50:.1f} ms, max {quiet.max:.1f} ms")

    built = _appends_beside(lambda: _publish(org), key, appends, first=appends)
    print(
        f"publish as built (one row's change): {built.task_seconds * 1000:.1f} ms; appends meanwhile: "
        f"p50 {built.p50:.1f} ms, max {built.max:.1f} ms"
    )

    stored = _appends_beside(lambda: _publish_rewriting_states(org, criteria.pk), key, appends, first=2 * appends)
    print(
        f"publish rewriting {reviews:,} stored states (rolled back): {stored.task_seconds:.1f} s; appends meanwhile: "
        f"p50 {stored.p50:.1f} ms, max {stored.max:.1f} ms (longest {stored.max / quiet.p50:.0f}x a quiet append)"
    )


class Run:
    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.task_seconds = 0.0

    @property
    def p50(self) -> float:
        return statistics.median(self.latencies)

    @property
    def max(self) -> float:
        return max(self.latencies)


def _appends_beside(task, key: str, count: int, *, first: int) -> Run:
    """Run `task` in this thread while another thread appends one message to each of `count` graded
    conversations through the API, and time each append."""
    run = Run()
    done = threading.Event()

    def append() -> None:
        client = Client(SERVER_NAME="localhost", HTTP_AUTHORIZATION=f"Bearer {key}")
        try:
            for n in range(first, first + count):
                body = {
                    "messages": [{"id": "m2", "parent_id": "m1", "role": "assistant", "content": f"On its way ({n})."}]
                }
                started = time.perf_counter()
                response = client.post(
                    f"/api/v1/conversations/c-{n + 1}/messages", json.dumps(body), content_type="application/json"
                )
                run.latencies.append((time.perf_counter() - started) * 1000)
                assert response.status_code == 200, response.content[:200]
                time.sleep(0.005)
        finally:
            connections.close_all()
            done.set()

    appender = threading.Thread(target=append)
    appender.start()
    time.sleep(0.2)  # the appends are under way when the publication starts
    started = time.perf_counter()
    task()
    run.task_seconds = time.perf_counter() - started
    appender.join()
    return run


def _publish(org) -> None:
    criteria_publish(version=criteria_new_version(org=org, kind=ItemKind.CONVERSATION))


class _RolledBack(Exception):
    pass


def _publish_rewriting_states(org, graded_under: int) -> None:
    """Publish, then mark stale every counting review graded under `graded_under` (the version all the
    populated reviews name), in the publication's transaction."""
    try:
        with transaction.atomic():
            criteria_publish(version=criteria_new_version(org=org, kind=ItemKind.CONVERSATION))
            with connection.cursor() as cursor:
                cursor.execute(
                    "UPDATE grading_review SET state = %s WHERE criteria_version_id = %s AND state = ANY(%s)",
                    [ReviewState.STALE, graded_under, ["current", "waiting", "decided"]],
                )
            raise _RolledBack
    except _RolledBack:
        pass

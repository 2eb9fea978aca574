# ruff: noqa: S608 - the changes' SQL is assembled from this module's constants; values are parameters.
"""The hourly rollup rebuild as the beat runs it (`grading.tasks.rebuild_rollups`, one org) over bench_dashboard's
data: after nothing changed since the last rebuild, after 1% of the reviews changed, and a full rebuild; wall, CPU
here and the database backend's CPU.

The 1% is booked as the upkeep books every write (`rollups_tracking` around an UPDATE that turns each one's route
from pass to fail or back, so every run changes them again), chosen among the reviews filed in the last two weeks,
where an hour's grading, decisions and answers land (`BENCH_REBUILD_SPREAD=1`: among every week's, the worst case of
an incremental rebuild). The counters are compared with a live GROUP BY over the raw tables after the first change
and at the end: different counters stop the benchmark.

BENCH_REBUILD_REVIEWS (default 100000) scales it; `phases()` offers the three to bench.compare.
"""

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from django.db import connection, transaction

from bench.bench_dashboard import _populate
from bench.common import backend_cpu, fresh_org
from grading.reviews.rollups import live_counters, rollups_rebuild, rollups_tracking, stored_counters
from grading.tasks import rebuild_rollups

CHANGED = 0.01

# The counting conversation reviews the machine passed or failed, filed in the last two weeks (or in every week), in
# an order that mixes them, of which the first 1% of all reviews change.
_CHANGEABLE = """SELECT id FROM grading_review
    WHERE org_id = %(org)s AND kind = 'conversation' AND state = 'current' AND route IN ('pass', 'fail')
        AND (%(spread)s OR week >= date_trunc('week', now() AT TIME ZONE 'UTC')::date - 7)
    ORDER BY md5(id::text) LIMIT %(n)s"""
_FLIP = """UPDATE grading_review SET route = CASE route WHEN 'pass' THEN 'fail' ELSE 'pass' END
    WHERE id = ANY(%(ids)s)"""


def _changeable(org_id: int, share: float, *, spread: bool) -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM grading_review WHERE org_id = %s", [org_id])
        n = int(cursor.fetchone()[0] * share)
        cursor.execute(_CHANGEABLE, {"org": org_id, "spread": spread, "n": n})
        return [row[0] for row in cursor.fetchall()]


def _change(review_ids: list[int]) -> None:
    with transaction.atomic(), rollups_tracking(review_ids), connection.cursor() as cursor:
        cursor.execute(_FLIP, {"ids": review_ids})


def _check(org_id: int) -> None:
    if stored_counters(org_ids=[org_id]) != live_counters(org_ids=[org_id]):
        raise SystemExit("the counters after the rebuilds differ from a live GROUP BY over the raw tables")


def _world() -> tuple[int, list[int], str]:
    """The org, the reviews that change, and what they are; rebuilt twice: the first books every counter (the
    populate writes straight to the tables), so an incremental rebuild after it would recount every week."""
    total = int(os.environ.get("BENCH_REBUILD_REVIEWS", "100000"))
    spread = os.environ.get("BENCH_REBUILD_SPREAD", "") == "1"
    org = fresh_org()
    _populate(org, total)
    rollups_rebuild(org_id=org.pk)
    changed = _changeable(org.pk, CHANGED, spread=spread)
    where = "across every week" if spread else "in the last two weeks"
    return org.pk, changed, f"{len(changed):,} of {total:,} reviews changed {where}"


@contextmanager
def phases() -> Iterator[dict[str, Callable | tuple[Callable, Callable]]]:
    org_id, changed, what = _world()
    rollups_rebuild(org_id=org_id)
    _change(changed)
    rebuild_rollups(org_id)
    _check(org_id)
    yield {
        "rebuild, nothing changed": lambda: rebuild_rollups(org_id),
        f"rebuild, {what}": (lambda: _change(changed), lambda: rebuild_rollups(org_id)),
        "rebuild, full": lambda: rollups_rebuild(org_id=org_id),
    }
    _check(org_id)


def main() -> None:
    """Each phase BENCH_REBUILD_ROUNDS times (default 5), the full one first (it leaves nothing to recount), then
    the counters checked against a live GROUP BY once."""
    rounds = int(os.environ.get("BENCH_REBUILD_ROUNDS", "5"))
    org_id, changed, what = _world()
    named = {
        "rebuild, full": (None, lambda: rollups_rebuild(org_id=org_id)),
        "rebuild, nothing changed": (None, lambda: rebuild_rollups(org_id)),
        f"rebuild, {what}": (lambda: _change(changed), lambda: rebuild_rollups(org_id)),
    }
    for name, (prepare, run) in named.items():
        samples = []
        for _ in range(rounds):
            if prepare is not None:
                prepare()
            wall, cpu, db = time.perf_counter(), time.process_time(), backend_cpu()
            run()
            samples.append((time.perf_counter() - wall, time.process_time() - cpu, backend_cpu() - db))
        wall, cpu, db = (sorted(column)[len(column) // 2] for column in zip(*samples, strict=True))
        print(f"{name}: median of {rounds}: {wall:.2f} s wall, {cpu:.2f} s CPU here, {db:.2f} s database CPU")
    _check(org_id)
    print("the counters equal a live GROUP BY over the raw tables")

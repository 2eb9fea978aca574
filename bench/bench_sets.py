"""A 10,000-item regression set run against the judge's concurrency bound.

The set's items are frozen conversations of four messages (bulk rows, as a set built from decisions holds them);
the run is started by `set_run_start` and its batches (`run_batches`: GRADING_CONCURRENCY of them at a time at most)
are graded by `set_run_batch`, each batch on a thread of a pool of GRADING_CONCURRENCY threads, as the judge
worker's thread pool runs the tasks, against FakeLLM answering every call after a fixed latency. Reported: the
run's wall time, items/s, and the ratio of the wall time to the bound (items x latency / concurrency: what a judge
answering at that latency allows at that concurrency, with nothing else costing anything), in the same run; and the
time to read the finished run's figures. The machine is shared: the load average is printed.

BENCH_SETS_ITEMS, BENCH_SETS_LATENCY (seconds) and BENCH_SETS_CONCURRENCY scale it.
"""

import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from django.conf import settings
from django.db import connection

from bench.common import fresh_org, purge_queues
from grading.core.evidence import EvidenceMessage, fingerprint
from grading.models import ItemKind, RegressionItem, RegressionSet, SetSource
from grading.reviews.versions import criteria_active
from grading.sets.runs import run_batches, run_figures, set_run_batch, set_run_start
from tests.builders.conversations import PATH_IDS, verdicts_reply
from tests.builders.judges import judge_config
from tests.fakes.openai_server import FakeLLM

CHUNK = 2_000


def main() -> None:
    total = int(os.environ.get("BENCH_SETS_ITEMS", "10000"))
    latency = float(os.environ.get("BENCH_SETS_LATENCY", "0.05"))
    concurrency = int(os.environ.get("BENCH_SETS_CONCURRENCY", "32"))
    settings.GRADING_CONCURRENCY = concurrency
    org = fresh_org("bench-sets")
    version = criteria_active(org=org, kind=ItemKind.CONVERSATION)
    regression_set = _populate(org, total)
    with FakeLLM(keep_alive=True, record=False) as judge:
        reply = replace(verdicts_reply(PATH_IDS, grounded="pass", complete="pass", usable="pass"), latency=latency)
        judge.set_default(lambda body: reply)
        settings.JUDGES = {**settings.JUDGES, version.judge: judge_config(judge)}
        run = set_run_start(regression_set=regression_set, version=version, min_agreement=0.9)
        purge_queues()  # the tasks it sent: this process grades the batches itself, below
        batches = run_batches(list(regression_set.items.order_by("pk").values_list("pk", flat=True)))
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            list(pool.map(_graded, [(run.pk, batch) for batch in batches]))
        seconds = time.perf_counter() - started
    run.refresh_from_db()
    bound = total * latency / concurrency
    print(f"load average {os.getloadavg()[0]:.1f}; {total:,} items, judge latency {latency * 1000:.0f} ms, "
          f"concurrency {concurrency}, {len(batches)} batches")  # fmt: skip
    print(f"run: {seconds:.1f} s, {total / seconds:.0f} items/s; the bound: {bound:.1f} s; "
          f"ratio to the bound {seconds / bound:.2f}; state {run.state}, passed {run.figures['passed']}")  # fmt: skip
    started = time.perf_counter()
    run_figures(run)
    print(f"figures of the finished run: {(time.perf_counter() - started) * 1000:.0f} ms")


def _graded(args: tuple[int, list[int]]) -> int:
    run_id, batch = args
    try:
        return set_run_batch(run_id=run_id, item_ids=batch)
    finally:
        connection.close()


def _populate(org, total: int) -> RegressionSet:
    regression_set = RegressionSet.objects.create(org=org, name="bench", kind=ItemKind.CONVERSATION)
    for start in range(0, total, CHUNK):
        items = []
        for n in range(start, min(start + CHUNK, total)):
            path = [
                EvidenceMessage(id="m1", parent_id=None, role="user", content=f"Please refund order {n}."),
                EvidenceMessage(id="m2", parent_id="m1", role="assistant", content="Which order?"),
                EvidenceMessage(id="m3", parent_id="m2", role="user", content=f"Order {n}, it arrived broken."),
                EvidenceMessage(id="m4", parent_id="m3", role="assistant", content="Refunded within five days."),
            ]
            evidence = [{**m.__dict__, "created_at": None} for m in path]
            items.append(
                RegressionItem(
                    regression_set=regression_set,
                    org=org,
                    kind=ItemKind.CONVERSATION,
                    item_id=n + 1,
                    external_id=f"cv-{n}",
                    fingerprint=fingerprint(path),
                    evidence=evidence,
                    source=SetSource.DECISIONS,
                    expected={"grounded": "pass", "complete": "pass", "usable": "pass"},
                    expected_verdict="pass",
                )  # fmt: skip
            )
        RegressionItem.objects.bulk_create(items)
    return regression_set

"""What certified decisions cost where they run on the database: routing a draft under a certificate, and a
certificate computed from 100,000 labelled drafts.

1. Routing. Drafts graded through the gate by the production judge against the loopback OpenAI-compatible server
   (answering at once, with log-probabilities), in interleaved blocks of 20: the active version without a target
   (the fixed bands route: no certificate read), then with a target and a certificate (one more indexed read per
   review). Per review: wall time and this thread's CPU, medians over the blocks, and the ratio of the two settings.
2. Recomputation. 100,000 drafts each with a review that recorded its confidence and a label on the evidence it
   read; `certificate_compute` (read the labels and the audit decisions, the labelled reviews, certify, store)
   against the least any computation must do: reading the 100,000 labels' rows (`values_list`). Wall, CPU of this
   process and of PostgreSQL's backend, and the peak of Python memory (tracemalloc, a run of its own).

Run: `make bench BENCH=certified`.
"""

from __future__ import annotations

import logging
import random
import statistics
import time
import tracemalloc
from collections.abc import Callable

from django.conf import settings

from bench.common import backend_cpu, fresh_org
from grading.certify.services import certificate_compute, certify_target_set, version_judge_key
from grading.drafts.gate import draft_grade
from grading.models import ItemKind, Label
from grading.reviews.versions import criteria_active
from tests.builders.certified import Graded, graded_drafts
from tests.builders.drafts import draft_verdict, save_draft, setup_org_memory
from tests.builders.judges import configure_judges, judge_config
from tests.fakes.openai_server import FakeLLM, json_reply

BLOCKS = 10  # per setting, interleaved
PER_BLOCK = 20
LABELLED = 100_000
BATCH = 10_000


def _routing(org, fake: FakeLLM) -> None:
    version = criteria_active(org=org, kind=ItemKind.DRAFT)
    judge_key = version_judge_key(version)
    sure = [Graded(0.95 + random.random() / 20, True, True) for _ in range(400)]
    graded_drafts(org, sure, judge_key=judge_key)
    fake.set_default(json_reply(draft_verdict(8), top_logprobs={"8": 0.97, "6": 0.03}, logprob_field="overall"))
    samples: dict[str, list[tuple[float, float]]] = {"no target": [], "certified": []}
    drafted = 0
    for _ in range(BLOCKS):
        for setting in samples:
            agreement = None if setting == "no target" else 0.9
            version = certify_target_set(version=version, actor=None, agreement=agreement, confidence=agreement)
            if agreement is not None:
                certificate_compute(version, judge_key=judge_key)
            for _ in range(PER_BLOCK):
                draft = save_draft(org, external_id=f"routed-{drafted}")
                drafted += 1
                started, started_cpu = time.perf_counter(), time.thread_time()
                review = draft_grade(draft_id=draft.pk)
                samples[setting].append((time.perf_counter() - started, time.thread_time() - started_cpu))
                assert (review.certificate_id is not None) == (setting == "certified")
    medians = {}
    for setting, runs in samples.items():
        wall, cpu = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
        spread = statistics.quantiles([r[1] for r in runs], n=4)
        medians[setting] = cpu
        print(f"routing, {setting:9}: {wall * 1000:6.2f} ms wall, {cpu * 1000:6.2f} ms CPU per review "
              f"(CPU quartiles {spread[0] * 1000:.2f} to {spread[2] * 1000:.2f}; {len(runs)} reviews)")  # fmt: skip
    print(f"routing under a certificate costs {medians['certified'] / medians['no target']:.3f}x the CPU per review")


def _timed(work: Callable[[], object]) -> tuple[float, float, float]:
    started, started_cpu, started_db = time.perf_counter(), time.process_time(), backend_cpu()
    work()
    return time.perf_counter() - started, time.process_time() - started_cpu, backend_cpu() - started_db


def _peak_mb(work: Callable[[], object]) -> float:
    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


def _recomputation(org) -> None:
    version = certify_target_set(
        version=criteria_active(org=org, kind=ItemKind.DRAFT), actor=None, agreement=0.9, confidence=0.9
    )
    judge_key = "bench-judge"
    rng = random.Random(40)
    for _ in range(LABELLED // BATCH):
        batch = []
        for _ in range(BATCH):
            confidence = rng.random()
            passed = rng.random() < 0.7
            agrees = rng.random() < 0.5 + confidence / 2
            batch.append(Graded(round(confidence, 4), passed, passed if agrees else not passed))
        graded_drafts(org, batch, version=version, judge_key=judge_key)
    labels = Label.objects.filter(org=org, kind=ItemKind.DRAFT)

    def read_labels() -> None:
        list(labels.values_list("draft_id", "fingerprint", "check_name", "verdict", "labelled_at"))

    def compute() -> None:
        Label.objects.filter(pk=-1).exists()  # nothing cached between runs but PostgreSQL's own buffers
        certificate_compute(version, judge_key=judge_key)

    read_labels()  # warm PostgreSQL's buffers for both
    baseline = [_timed(read_labels) for _ in range(3)]
    computed = [_timed(compute) for _ in range(3)]
    for name, runs in (("reading the labels", baseline), ("certificate_compute", computed)):
        wall, cpu, db = (statistics.median(run[i] for run in runs) for i in range(3))
        print(f"{name:20} at {LABELLED:,} labelled drafts: {wall:6.2f} s wall, {cpu:6.2f} s CPU here, "
              f"{db:5.2f} s CPU in PostgreSQL (median of 3)")  # fmt: skip
    ratio = statistics.median(r[0] for r in computed) / statistics.median(r[0] for r in baseline)
    print(f"certificate_compute takes {ratio:.1f}x reading the labels' rows")
    print(f"peak Python memory: reading the labels {_peak_mb(read_labels):.0f} MB, "
          f"certificate_compute {_peak_mb(compute):.0f} MB")  # fmt: skip


def main() -> None:
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    org = fresh_org()
    setup_org_memory(org)
    with FakeLLM() as fake:
        configure_judges(settings, default=judge_config(fake))
        _routing(org, fake)
    _recomputation(org)

"""A certificate's recomputation at 100,000 labelled items, and the quality interval at 100,000 items.

Certifying reads every calibration point of a check once: one sort, two cumulative sums and one `beta.ppf` over the
candidates. It is timed here (median of 7 runs: wall, CPU of this process; peak memory traced by tracemalloc in a run
of its own) against sorting the same 100,000 confidences with numpy in the same run, the least any threshold search
over them must do, and reported as a ratio to it. Two kinds of calibration set: 100,000 distinct confidences (the
worst case: 100,000 candidates, each bounded), and confidences tied at three decimals (at most 501 candidates, as
confidences recorded to a few digits are). `certify` on a list of points is timed beside `certify_arrays` on two
columns: the difference is building the points, which a reader of the database can skip.

Then `quality_interval` over 100,000 items of which 1,000 audited (PPI++ through ppi-python), and what importing
ppi_py costs a fresh process against numpy and scipy.stats alone (numba: why `quality.py` imports it inside the
function).

Last, the simulator's two tables at 1,000 draws per setting (`python -m grading.certify.simulator` prints the same).

Run: `make bench BENCH=certify`.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable

import numpy as np

from grading.certify.quality import quality_interval
from grading.certify.simulator import calibrated_population, print_tables
from grading.certify.thresholds import CalibrationPoint, certify, certify_arrays

LABELS = 100_000
RUNS = 7
ALPHA = DELTA = 0.1


def _timed(work: Callable[[], object]) -> tuple[float, float]:
    """Median wall and CPU seconds of `work` over RUNS runs, after one run to warm caches."""
    work()
    walls, cpus = [], []
    for _ in range(RUNS):
        started, started_cpu = time.perf_counter(), time.process_time()
        work()
        walls.append(time.perf_counter() - started)
        cpus.append(time.process_time() - started_cpu)
    return statistics.median(walls), statistics.median(cpus)


def _peak_bytes(work: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _report(name: str, work: Callable[[], object], baseline: tuple[float, float, int] | None = None) -> None:
    wall, cpu = _timed(work)
    peak = _peak_bytes(work)
    ratios = f"{wall / baseline[0]:8.1f}x {cpu / baseline[1]:8.1f}x {peak / baseline[2]:7.1f}x" if baseline else ""
    print(f"{name:44s} {wall * 1000:9.1f} {cpu * 1000:9.1f} {peak / 1e6:8.1f} {ratios}")


def main() -> None:
    population = calibrated_population()
    rng = np.random.default_rng(40)
    drawn = rng.integers(0, len(population.confidences), LABELS)  # in no useful order, as a database hands them
    confidences, agrees = population.confidences[drawn], population.agrees[drawn]
    tied = np.round(confidences, 3)
    points = [CalibrationPoint(float(c), bool(a)) for c, a in zip(confidences, agrees, strict=True)]

    def sort_only() -> object:
        return np.sort(confidences)

    wall, cpu = _timed(sort_only)
    baseline = (wall, cpu, _peak_bytes(sort_only))
    print(f"{LABELS:,} labelled items, alpha {ALPHA}, delta {DELTA}; median of {RUNS} runs")
    print(f"{'':44s} {'wall ms':>9s} {'CPU ms':>9s} {'peak MB':>8s} {'wall':>9s} {'CPU':>9s} {'peak':>8s}")
    print(f"{'baseline: np.sort of the confidences':44s} {wall * 1000:9.1f} {cpu * 1000:9.1f} {baseline[2] / 1e6:8.1f}")
    _report(
        "certify_arrays, 100,000 distinct confidences",
        lambda: certify_arrays(confidences, agrees, alpha=ALPHA, delta=DELTA),
        baseline,
    )
    _report(
        "certify_arrays, tied at 3 decimals",
        lambda: certify_arrays(tied, agrees, alpha=ALPHA, delta=DELTA),
        baseline,
    )
    _report("certify on 100,000 CalibrationPoint", lambda: certify(points, alpha=ALPHA, delta=DELTA), baseline)
    _report(
        "building the 100,000 points alone",
        lambda: [CalibrationPoint(float(c), bool(a)) for c, a in zip(confidences, agrees, strict=True)],
        baseline,
    )
    result = certify_arrays(confidences, agrees, alpha=ALPHA, delta=DELTA)
    print(
        f"certificate: threshold {result.threshold:.4f}, coverage {result.coverage:.3f}, bound {result.bound:.4f}, "
        f"{result.disagreements:,} disagreements, more labels {result.more_labels}"
    )

    judge = rng.beta(1.4, 0.6, LABELS)
    passes = (rng.random(LABELS) < np.clip(judge - 0.1, 0.0, 1.0)).astype(float)
    audited = np.zeros(LABELS, dtype=bool)
    audited[rng.choice(LABELS, 1_000, replace=False)] = True

    print()
    _report(
        "quality_interval, 1,000 of 100,000 audited",
        lambda: quality_interval(
            people=passes[audited], judge_labelled=judge[audited], judge_unlabelled=judge[~audited]
        ),
    )
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import ppi_py"], check=True)
    with_ppi = time.perf_counter() - started
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import numpy, scipy.stats"], check=True)
    without = time.perf_counter() - started
    print(
        f"a fresh process importing ppi_py: {with_ppi:.2f} s; numpy and scipy.stats alone: {without:.2f} s "
        f"(ppi_py adds {with_ppi - without:.2f} s)"
    )

    print()
    print_tables(draws=1_000)


if __name__ == "__main__":
    main()

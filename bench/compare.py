"""Two commits, or two settings of one, compared in one run: a benchmark's phases from each, interleaved and repeated.

A benchmark run twice on the same code moved by up to 2x between runs on the shared machine, so two runs at different
times cannot show a change smaller than that. Here both sides run side by side instead:

1. Each commit is checked out in a temporary git worktree (the shared virtualenv), with this checkout's `bench/`
   laid over it, so both sides run the same benchmark and only the code under it differs.
2. One process per side sets the benchmark's data up once (`phases()`, below), on the same PostgreSQL and Redis
   (`TOLLGATE_DATA_DIR`), each side in a database of its own, then waits to be told which phase to run.
3. Rounds: every phase once on each side, the order of the sides alternating from round to round (base first, then
   head first), so a load that rises or falls during the run falls on both. The first round warms up and is dropped.
   15 rounds by default: at fewer than 11 a verdict is a hint (`TRUSTED_ROUNDS`, below).
4. Per phase and side: wall time, CPU of the process and PostgreSQL's CPU for it (its backend and the parallel
   workers its queries started: bench.common.backend_cpu), each as the median of the rounds with the interquartile
   range beside it (and the least and most). A verdict ("head faster", "head slower") is stated only when the two
   interquartile ranges do not overlap; otherwise "no difference claimed".

A benchmark opts in with a module-level `phases()`, a context manager (`contextlib.contextmanager`) that sets up its
data, yields a dict of named callables (each one run of a phase, measured whole; or a pair of callables, the first
run untimed before each run of the second), and tears down after. Run as
`python -m bench.compare --base main~20 --head main certified` (`make bench-compare BASE=main~20 HEAD=main
BENCH=certified`); `--setting NAME=VALUE` sets an environment variable on the head side only, so one commit against
itself under two settings is a comparison too.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit, urlunsplit

METRICS = (("wall", "wall ms"), ("cpu", "CPU ms here"), ("db_cpu", "CPU ms PostgreSQL"))
SIDES = ("base", "head")
MIN_ROUNDS = 5
# Two samples of the same code, drawn apart: their interquartile ranges miss each other by chance in about one
# comparison of five at 5 rounds, one of twelve at 7, one of forty-five at 11 and one of two hundred at 15 (normal
# samples, simulated); a shift of 1.5 standard deviations is caught about three times in four at any of them.
DEFAULT_ROUNDS = 15
TRUSTED_ROUNDS = 11
WARMUP_ROUNDS = 1
BENCH_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Spread:
    """A phase's samples on one side: the median, the interquartile range (low, high) and the least and most."""

    median: float
    low: float
    high: float
    least: float
    most: float


def spread_of(samples: Sequence[float]) -> Spread:
    """The median and quartiles by the inclusive method (the quartiles of five samples are the second and fourth)."""
    if len(samples) < 2:
        raise ValueError("a spread needs at least two samples")
    low, median, high = statistics.quantiles(samples, n=4, method="inclusive")
    return Spread(median=median, low=low, high=high, least=min(samples), most=max(samples))


def verdict(base: Spread, head: Spread) -> str:
    """Faster or slower only when the interquartile ranges do not overlap (NaN, an unreadable figure, claims none)."""
    if head.high < base.low:
        return "head faster"
    if head.low > base.high:
        return "head slower"
    return "no difference claimed"


def order_of(round_number: int) -> tuple[str, str]:
    """Base first in even rounds, head first in odd ones."""
    return SIDES if round_number % 2 == 0 else SIDES[::-1]


def report(samples: dict[str, dict[str, dict[str, list[float]]]]) -> list[str]:
    """Lines of the comparison: per phase, each metric's median [interquartile range] (least-most) in ms on both
    sides, head's median as a ratio of base's, and the verdict. `samples[side][phase][metric]` are seconds."""
    lines = []
    for phase in samples["base"]:
        rows = [("", "base: median [IQR] (min-max)", "head: median [IQR] (min-max)", "head/base", "verdict")]
        for metric, label in METRICS:
            spreads = [spread_of([s * 1000 for s in samples[side][phase][metric]]) for side in SIDES]
            ratio = f"{spreads[1].median / spreads[0].median:.3f}x" if spreads[0].median else "n/a"
            cells = [f"{s.median:.1f} [{s.low:.1f}-{s.high:.1f}] ({s.least:.1f}-{s.most:.1f})" for s in spreads]
            rows.append((label, *cells, ratio, verdict(*spreads)))
        widths = [max(len(row[column]) for row in rows) for column in range(4)]
        lines.append(phase)
        lines += ["  " + "  ".join(cell.ljust(width) for cell, width in zip(row[:4], widths, strict=True))
                  + "  " + row[4] for row in rows]  # fmt: skip
    return lines


# The side: one process per commit, serving phases on demand.


def serve(bench: str) -> None:
    """Set `bench`'s data up, say which phases it has, then run each phase named on stdin and answer its figures.
    The answers go to the original stdout; everything the benchmark prints goes to stderr (the side's log)."""
    import django

    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "reviewer.settings")
    django.setup()
    module = importlib.import_module(f"bench.{bench}")
    if not hasattr(module, "phases"):
        raise SystemExit(f"bench.{bench} has no phases(): it cannot be compared (bench/README.md)")
    with module.phases() as phases:
        answers.write(json.dumps({"phases": list(phases)}) + "\n")
        for line in sys.stdin:
            phase = phases[json.loads(line)["phase"]]
            prepare, run = phase if isinstance(phase, tuple) else (None, phase)
            if prepare is not None:
                prepare()  # untimed: what the phase needs done before each run (writes a rebuild then reads)
            answers.write(json.dumps(_measured(run)) + "\n")


def _measured(run: Callable[[], object]) -> dict[str, float]:
    from bench.common import backend_cpu

    started_db = backend_cpu()
    started, started_cpu = time.perf_counter(), time.process_time()
    run()
    wall, cpu = time.perf_counter() - started, time.process_time() - started_cpu
    return {"wall": wall, "cpu": cpu, "db_cpu": backend_cpu() - started_db}


class Side:
    """A running side: its process, the phases it offers and its log."""

    def __init__(self, *, name: str, checkout: Path, bench: str, env: dict[str, str], log: Path) -> None:
        self.name, self.log = name, log
        with open(log, "w") as log_file:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "bench.compare", "--serve", bench],
                cwd=checkout,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log_file,
                text=True,
            )
        self.phases: list[str] = []

    def ready(self) -> list[str]:
        self.phases = self._answer()["phases"]
        return self.phases

    def run(self, phase: str) -> dict[str, float]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"phase": phase}) + "\n")
        self.process.stdin.flush()
        return self._answer()

    def _answer(self) -> dict:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            self.process.wait()
            tail = "".join(self.log.read_text().splitlines(keepends=True)[-30:])
            raise RuntimeError(f"the {self.name} side stopped (exit {self.process.returncode}); its log ends:\n{tail}")
        return json.loads(line)

    def stop(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()  # the side leaves its loop and tears its phases down
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


# The harness.


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def _checkout(commit: str, *, repository: Path, into: Path) -> Path:
    """A detached worktree of `commit` with this checkout's bench/ in place of the commit's own."""
    _git("worktree", "add", "--detach", str(into), commit, cwd=repository)
    shutil.rmtree(into / "bench", ignore_errors=True)
    shutil.copytree(BENCH_DIR, into / "bench", ignore=shutil.ignore_patterns("__pycache__"))
    return into


def _servers(data_dir: Path) -> tuple[str, str]:
    """The URLs of the private PostgreSQL and Redis under `data_dir`, started if need be (reviewer/embedded.py)."""
    from reviewer import embedded

    return embedded.postgres_url(data_dir), embedded.redis_url(data_dir)


def _database_of(side: str, postgres: str) -> str:
    """A database of the side's own on the shared server, created empty if missing (the bench migrates it)."""
    import psycopg

    name = f"compare_{side}"
    with psycopg.connect(postgres, autocommit=True) as connection:
        if not connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            connection.execute(f'CREATE DATABASE "{name}"')
    parts = urlsplit(postgres)
    return urlunsplit(parts._replace(path=f"/{name}"))


def _settings(pairs: list[str]) -> dict[str, str]:
    settings = {}
    for pair in pairs:
        name, equals, value = pair.partition("=")
        if not equals or not name:
            raise SystemExit(f"--setting wants NAME=VALUE, got {pair!r}")
        settings[name] = value
    return settings


def _bench_module(word: str) -> str:
    for name in (f"bench_{word}", word):
        if (BENCH_DIR / f"{name}.py").exists():
            return name
    raise SystemExit(f"no benchmark named {word!r} under bench/ (try one of: bench_certified, bench_queue)")


def compare(args: argparse.Namespace, out: IO[str]) -> None:
    repository = Path(_git("rev-parse", "--show-toplevel", cwd=BENCH_DIR))
    commits = {side: _git("rev-parse", "--verify", f"{getattr(args, side)}^{{commit}}", cwd=repository)
               for side in SIDES}  # fmt: skip
    settings = {"base": _settings(args.base_setting), "head": _settings(args.setting)}
    if commits["base"] == commits["head"] and settings["base"] == settings["head"]:
        raise SystemExit("base and head are the same commit with the same settings: nothing to compare")
    bench = _bench_module(args.bench)
    data_dir = Path(os.environ.get("TOLLGATE_DATA_DIR", ".data/bench")).resolve()
    postgres, redis = _servers(data_dir)
    scratch = Path(tempfile.mkdtemp(prefix="tollgate-compare-"))
    checkouts: dict[str, Path] = {}
    sides: dict[str, Side] = {}
    try:
        for number, side in enumerate(SIDES, start=1):
            commit = commits[side]
            if commit not in checkouts:
                checkouts[commit] = _checkout(commit, repository=repository, into=scratch / side)
            env = os.environ | settings[side] | {
                "TOLLGATE_DATA_DIR": str(data_dir),
                "DATABASE_URL": _database_of(side, postgres),
                "REDIS_URL": f"{redis.rsplit('/', 1)[0]}/{number}",
            }  # fmt: skip
            sides[side] = Side(name=side, checkout=checkouts[commit], bench=bench, env=env, log=scratch / f"{side}.log")
        for side in SIDES:
            print(f"{side}: {getattr(args, side)} ({commits[side][:10]}) {settings[side] or ''}", file=out)
        print(f"{bench}" + (f"; the sides' logs (the benchmark's own output) in {scratch}" if args.keep_logs else ""),
              file=out)  # fmt: skip
        print("setting up both sides (once each)...", file=out, flush=True)
        offered = [sides[side].ready() for side in SIDES]
        phases = [phase for phase in offered[0] if phase in offered[1] and any(w in phase for w in args.phase or [""])]
        if not phases:
            raise SystemExit(f"no phase to compare: base offers {offered[0]}, head {offered[1]}")
        samples = {side: {phase: {metric: [] for metric, _ in METRICS} for phase in phases} for side in SIDES}
        load_before = os.getloadavg()
        for round_number in range(WARMUP_ROUNDS + args.rounds):
            for phase in phases:
                for side in order_of(round_number):
                    figures = sides[side].run(phase)
                    if round_number >= WARMUP_ROUNDS:
                        for metric, _ in METRICS:
                            samples[side][phase][metric].append(figures[metric])
            print(f"round {round_number + 1 - WARMUP_ROUNDS} of {args.rounds} done"
                  if round_number >= WARMUP_ROUNDS else "warm-up round done", file=out, flush=True)  # fmt: skip
        load_after = os.getloadavg()
        print(f"\n{args.rounds} rounds, sides alternating; load average (1, 5, 15 min) "
              f"{' '.join(f'{x:.2f}' for x in load_before)} before, {' '.join(f'{x:.2f}' for x in load_after)} after",
              file=out)  # fmt: skip
        for line in report(samples):
            print(line, file=out)
        if args.rounds < TRUSTED_ROUNDS:
            print(f"(at {args.rounds} rounds the quartiles of identical code miss each other by chance often: "
                  f"read a verdict as a hint, and confirm it with {DEFAULT_ROUNDS})", file=out)  # fmt: skip
    finally:
        for side in sides.values():
            side.stop()
        for checkout in checkouts.values():
            subprocess.run(["git", "worktree", "remove", "--force", str(checkout)], cwd=repository, check=False)
        if not args.keep_logs:
            shutil.rmtree(scratch, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__.split("\n\n")[0])
    parser.add_argument("bench", help="the benchmark, e.g. certified or bench_queue")
    parser.add_argument("--base", default="HEAD", help="the commit measured against (default HEAD)")
    parser.add_argument("--head", default="HEAD", help="the commit measured (default HEAD)")
    parser.add_argument("--setting", action="append", default=[], metavar="NAME=VALUE",
                        help="an environment variable for the head side (repeatable)")  # fmt: skip
    parser.add_argument("--base-setting", action="append", default=[], metavar="NAME=VALUE",
                        help="an environment variable for the base side (repeatable)")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS,
                        help=f"measured rounds, at least {MIN_ROUNDS} (default {DEFAULT_ROUNDS})")  # fmt: skip
    parser.add_argument("--phase", action="append", help="only the phases whose names contain this (repeatable)")
    parser.add_argument("--keep-logs", action="store_true", help="keep the sides' logs (the benchmark's own output)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.bench)
        return
    if args.rounds < MIN_ROUNDS:
        parser.error(f"--rounds must be at least {MIN_ROUNDS}: fewer make no interquartile range worth reading")
    compare(args, sys.stdout)


if __name__ == "__main__":
    main()

"""Run every benchmark under bench/ (`make bench`). Each module `bench/bench_*.py` has a `main()`.

`python -m bench throughput checks` runs only the benchmarks whose names contain one of the words given
(`make bench BENCH=throughput`)."""

import importlib
import os
import pkgutil
import sys
from pathlib import Path

import django


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "reviewer.settings")
    django.setup()
    names = sorted(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)]) if m.name.startswith("bench_"))
    if wanted := sys.argv[1:]:
        names = [name for name in names if any(word in name for word in wanted)]
    if not names:
        print("no benchmarks yet")
    for name in names:
        print(f"\n== {name} ==", flush=True)
        importlib.import_module(f"bench.{name}").main()


if __name__ == "__main__":
    sys.exit(main())

"""The checks of one draft on hostile input at the sizes a pipeline may send: each family of
tests/builders/hostile_drafts.py at 100,000 and 200,000 characters (MAX_DRAFT_BYTES is 200,000 bytes), CPU time of
the checking thread per check, and the ratio of the two (linear work: 2; quadratic: 4). The baseline in the same run
is a plain prose draft of the same sizes. A family whose check at 200,000 characters costs more than the checks'
CPU budget (CHECKS_CPU_BUDGET_SECONDS) ends as an error with reason checks_budget in grading.

Run: `make bench BENCH=hostile`.
"""

from __future__ import annotations

import time

from django.conf import settings

from grading.checks.checks import check_draft
from grading.checks.rules import default_rules
from tests.builders.hostile_drafts import HOSTILE

SIZES = (100_000, 200_000)
PLAIN = "Teams that write down their pricing questions answer them faster. "


def _cpu_seconds(body: str) -> float:
    started = time.thread_time()
    check_draft(body=body, rules=default_rules(), source_urls=["https://example.com/a"], proof_terms=["x"])
    return time.thread_time() - started


def main() -> None:
    families = {"plain prose (baseline)": lambda n: (PLAIN * (n // len(PLAIN) + 1))[:n], **HOSTILE}
    print(f"{'family':48s} {'100k ms':>9s} {'200k ms':>9s} {'ratio':>6s} {'x plain':>8s}")
    _cpu_seconds(PLAIN * 100)  # the first check builds the rules' matcher and the prose reading's tables
    plain_at_max = None
    for name, make in families.items():
        at_n, at_2n = (_cpu_seconds(make(size)) for size in SIZES)
        plain_at_max = plain_at_max or at_2n
        print(f"{name:48s} {at_n * 1000:9.1f} {at_2n * 1000:9.1f} {at_2n / at_n:6.2f} {at_2n / plain_at_max:8.1f}")
    print(f"budget per draft: {settings.CHECKS_CPU_BUDGET_SECONDS:g} s of CPU")

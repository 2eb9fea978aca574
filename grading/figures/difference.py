"""How far two pass rates differ, from counts: the difference with Newcombe's hybrid score interval and a
two-proportion z-test of it. What the comparison of two slices reads (grading/dashboard/compare.py).

Pure arithmetic over counts, as grading/figures/agreement.py is. Each rate has its Wilson 95% interval; the
difference's interval is built from the two (Newcombe 1998, method 10), so like them it stays inside [-1, 1] and
does not collapse at 0 or n successes, where the Wald interval d ± z·se does both. The test is the usual pooled
two-proportion z-test, two-sided; it needs both sides to have answers and the pooled rate to be neither 0 nor 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from grading.figures.agreement import Z95, interval_json, wilson_interval

INTERVAL_METHOD = "Newcombe's hybrid score interval (1998, method 10), from the two Wilson 95% intervals"
TEST_METHOD = "two-proportion z-test, pooled, two-sided"


@dataclass(frozen=True)
class Difference:
    """Rate b minus rate a (None when either side has no answers)."""

    difference: float | None
    interval: tuple[float, float] | None
    z: float | None
    p_value: float | None

    def as_json(self) -> dict:
        return {
            "difference": self.difference,
            "interval": interval_json(self.interval),
            "interval_method": INTERVAL_METHOD,
            "z": self.z,
            "p_value": self.p_value,
            "test": TEST_METHOD,
        }


def newcombe_interval(passed_a: int, n_a: int, passed_b: int, n_b: int, z: float = Z95) -> tuple[float, float] | None:
    """The hybrid score interval for p_b - p_a; None when either n is 0."""
    interval_a, interval_b = wilson_interval(passed_a, n_a, z), wilson_interval(passed_b, n_b, z)
    if interval_a is None or interval_b is None:
        return None
    (low_a, high_a), (low_b, high_b) = interval_a, interval_b
    p_a, p_b = passed_a / n_a, passed_b / n_b
    d = p_b - p_a
    low = d - math.sqrt((p_b - low_b) ** 2 + (high_a - p_a) ** 2)
    high = d + math.sqrt((high_b - p_b) ** 2 + (p_a - low_a) ** 2)
    return max(-1.0, low), min(1.0, high)


def two_proportion_test(passed_a: int, n_a: int, passed_b: int, n_b: int) -> tuple[float, float] | None:
    """(z, two-sided p) of the pooled z-test of p_b = p_a; None when it is undefined (a side without answers, or
    every answer alike on both sides: no spread to test against)."""
    if n_a <= 0 or n_b <= 0:
        return None
    pooled = (passed_a + passed_b) / (n_a + n_b)
    se = math.sqrt(pooled * (1 - pooled) * (1 / n_a + 1 / n_b))
    if se == 0:
        return None
    z = (passed_b / n_b - passed_a / n_a) / se
    return z, math.erfc(abs(z) / math.sqrt(2))


def difference_of(passed_a: int, n_a: int, passed_b: int, n_b: int) -> Difference:
    """Every figure of p_b - p_a at once."""
    if n_a <= 0 or n_b <= 0:
        return Difference(None, None, None, None)
    test = two_proportion_test(passed_a, n_a, passed_b, n_b)
    return Difference(
        passed_b / n_b - passed_a / n_a,
        newcombe_interval(passed_a, n_a, passed_b, n_b),
        test[0] if test else None,
        test[1] if test else None,
    )

"""How far the judge agrees with people, from a confusion table: percent agreement with a Wilson 95% interval, and
Cohen's kappa with the large-sample standard error of Fleiss, Cohen and Everitt (1969) and a normal 95% interval.

Pure arithmetic over counts (the rollups keep the counts). Degenerate tables say so instead of inventing a number:
no pairs give no agreement; when both sides put every item in one and the same class, kappa is 0/0 and undefined;
an interval needs at least two pairs and some spread.

For a score check, beside exact agreement (which counts 4 against 5 as wrong as 1 against 5): Cohen's weighted
kappa with quadratic weights, and Krippendorff's alpha at the ordinal level (grading/figures/raters.py), each
with a jackknife interval.
"""

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

Z95 = 1.959963984540054  # the 97.5th percentile of the standard normal
K = TypeVar("K")


@dataclass(frozen=True)
class Agreement:
    categories: tuple[str, ...]
    table: tuple[tuple[int, ...], ...]  # rows: the machine's verdict; columns: the person's
    n: int
    agreed: int
    percent: float | None  # 0..1
    percent_interval: tuple[float, float] | None
    kappa: float | None
    kappa_se: float | None
    kappa_interval: tuple[float, float] | None
    note: str  # why a figure is missing, in words

    def as_json(self) -> dict:
        return {
            "categories": list(self.categories),
            "confusion": [list(row) for row in self.table],
            "n": self.n,
            "agreed": self.agreed,
            "percent": self.percent,
            "percent_interval": interval_json(self.percent_interval),
            "percent_interval_method": "wilson",
            "kappa": self.kappa,
            "kappa_se": self.kappa_se,
            "kappa_interval": interval_json(self.kappa_interval),
            "kappa_interval_method": "large-sample SE (Fleiss, Cohen & Everitt 1969), normal 95%",
            "note": self.note,
        }


def interval_json(interval: tuple[float, float] | None) -> list[float] | None:
    """An interval as the figures' JSON gives it: [low, high], or null where there is none."""
    return list(interval) if interval else None


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval for a proportion; None for n = 0. Unlike p ± z·se it stays inside [0, 1] and
    does not collapse to a point at 0 or n successes."""
    if n <= 0:
        return None
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def agreement_of(categories: Sequence[str], pairs: Mapping[tuple[str, str], int]) -> Agreement:
    """Agreement figures from counts of (machine verdict, human verdict) pairs over `categories`."""
    index = {c: i for i, c in enumerate(categories)}
    k = len(categories)
    table = [[0] * k for _ in range(k)]
    for (machine, human), count in pairs.items():
        if machine in index and human in index:
            table[index[machine]][index[human]] += count
    n = sum(map(sum, table))
    agreed = sum(table[i][i] for i in range(k))
    frozen = tuple(tuple(row) for row in table)
    if n == 0:
        return Agreement(tuple(categories), frozen, 0, 0, None, None, None, None, None, "no pairs yet")
    po = agreed / n
    rows = [sum(table[i]) / n for i in range(k)]
    cols = [sum(table[i][j] for i in range(k)) / n for j in range(k)]
    pe = sum(rows[i] * cols[i] for i in range(k))
    percent_interval = wilson_interval(agreed, n)
    if math.isclose(pe, 1.0):
        return Agreement(
            tuple(categories), frozen, n, agreed, po, percent_interval, None, None, None,
            "kappa undefined: the machine and the people put every item in the same single class",
        )  # fmt: skip
    kappa = (po - pe) / (1 - pe)
    p = [[table[i][j] / n for j in range(k)] for i in range(k)]
    diagonal = sum(p[i][i] * ((1 - pe) - (rows[i] + cols[i]) * (1 - po)) ** 2 for i in range(k))
    off = (1 - po) ** 2 * sum(p[i][j] * (cols[i] + rows[j]) ** 2 for i in range(k) for j in range(k) if i != j)
    variance = (diagonal + off - (po * pe - 2 * pe + po) ** 2) / (n * (1 - pe) ** 4)
    se = math.sqrt(max(variance, 0.0))
    if n < 2 or se == 0.0:
        note = "too few pairs for an interval" if n < 2 else "no spread: the interval would be a point"
        return Agreement(tuple(categories), frozen, n, agreed, po, percent_interval, kappa, se, None, note)
    interval = (max(-1.0, kappa - Z95 * se), min(1.0, kappa + Z95 * se))
    return Agreement(tuple(categories), frozen, n, agreed, po, percent_interval, kappa, se, interval, "")


def jackknife_interval(
    counts: Mapping[K, int], statistic: Callable[[Mapping[K, int]], float | None]
) -> tuple[float, float] | None:
    """A normal 95% interval from the jackknife standard error over units (items, or pairs): each unit left out once.
    Units of one kind (a pattern, a cell) leave the same value, so it costs the square of the kinds, not the units."""
    counts = {unit: count for unit, count in counts.items() if count > 0}
    units = sum(counts.values())
    estimate = statistic(counts)
    if estimate is None or units < 2:
        return None
    left_out = {}
    for unit, count in counts.items():
        value = statistic({**counts, unit: count - 1})
        if value is None:
            return None
        left_out[unit] = value
    mean = sum(counts[u] * value for u, value in left_out.items()) / units
    variance = (units - 1) / units * sum(counts[u] * (value - mean) ** 2 for u, value in left_out.items())
    se = math.sqrt(variance)
    if se == 0.0:
        return None
    return max(-1.0, estimate - Z95 * se), min(1.0, estimate + Z95 * se)


def weighted_kappa(cells: Mapping[tuple[int, int], int]) -> float | None:
    """Cohen's kappa with quadratic weights over (machine score, person's score) counts: a disagreement costs the
    square of the distance between the scores (1 - observed / expected weighted disagreement); None when no
    disagreement is expected (every score on both sides the same)."""
    n = sum(cells.values())
    if n == 0:
        return None
    rows: dict[int, int] = {}
    cols: dict[int, int] = {}
    for (machine, human), count in cells.items():
        rows[machine] = rows.get(machine, 0) + count
        cols[human] = cols.get(human, 0) + count
    observed = sum(count * (machine - human) ** 2 for (machine, human), count in cells.items()) / n
    expected = sum(r * c * (i - j) ** 2 for i, r in rows.items() for j, c in cols.items()) / (n * n)
    if expected == 0:
        return None
    return 1 - observed / expected

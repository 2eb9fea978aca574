"""How far people agree with each other: the ceiling against which the judge's agreement with them is read.

From the items several people gave a verdict on, each reduced to its pattern (how many people gave each verdict):
the share of items everyone agreed on, with a Wilson 95% interval; Fleiss' kappa (1971), in its form for items
rated by different numbers of people (each item's agreement over its own pairs, the verdicts' shares over every
answer); and Krippendorff's alpha for nominal data, which takes any number of answers per item. Both coefficients
carry a jackknife standard error over items (leave one item out; items of one pattern leave the same value, so it
costs the square of the distinct patterns, not of the items) and a normal 95% interval.

Pure arithmetic over a histogram of patterns, which is what the rollups keep (grading/figures/definitions.py,
`people_label`). Degenerate inputs say so instead of inventing a number, as grading/figures/agreement.py does.
"""

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from grading.figures.agreement import Z95, wilson_interval

Pattern = tuple[int, ...]  # per category, how many people gave that verdict on one item
Histogram = Mapping[Pattern, int]  # pattern -> how many items have it


@dataclass(frozen=True)
class PeopleAgreement:
    categories: tuple[str, ...]
    items: int  # items with at least two answers
    answers: int
    unanimous: int  # items on which every answer was the same
    percent: float | None
    percent_interval: tuple[float, float] | None
    fleiss_kappa: float | None
    fleiss_interval: tuple[float, float] | None
    alpha: float | None
    alpha_interval: tuple[float, float] | None
    note: str  # why a figure is missing, in words

    def as_json(self) -> dict:
        return {
            "categories": list(self.categories),
            "items": self.items,
            "answers": self.answers,
            "unanimous": self.unanimous,
            "percent": self.percent,
            "percent_interval": _listed(self.percent_interval),
            "percent_interval_method": "wilson, over items",
            "fleiss_kappa": self.fleiss_kappa,
            "fleiss_kappa_interval": _listed(self.fleiss_interval),
            "krippendorff_alpha": self.alpha,
            "krippendorff_alpha_level": "nominal",
            "krippendorff_alpha_interval": _listed(self.alpha_interval),
            "interval_method": "jackknife standard error over items, normal 95%",
            "note": self.note,
        }


def _listed(interval: tuple[float, float] | None) -> list[float] | None:
    return list(interval) if interval else None


def fleiss_kappa(histogram: Histogram) -> float | None:
    """Fleiss' kappa over items with two or more answers; None when it is 0/0 (every answer in one class)."""
    items = answers = 0
    observed = 0.0
    totals: list[float] = []
    for pattern, count in histogram.items():
        rated = sum(pattern)
        if rated < 2 or count <= 0:
            continue
        items += count
        answers += count * rated
        observed += count * sum(n * (n - 1) for n in pattern) / (rated * (rated - 1))
        totals = [a + count * b for a, b in zip(totals or [0.0] * len(pattern), pattern, strict=True)]
    if items == 0:
        return None
    expected = sum((total / answers) ** 2 for total in totals)
    if math.isclose(expected, 1.0):
        return None
    return (observed / items - expected) / (1 - expected)


def krippendorff_alpha(histogram: Histogram) -> float | None:
    """Krippendorff's alpha for nominal data, from the coincidence of values within items (Krippendorff 2011,
    "Computing Krippendorff's alpha-reliability"); None when every pairable answer is in one class."""
    size = len(next(iter(histogram), ()))
    coincidence = [[0.0] * size for _ in range(size)]
    for pattern, count in histogram.items():
        rated = sum(pattern)
        if rated < 2 or count <= 0:
            continue
        for c in range(size):
            for k in range(size):
                pairs = pattern[c] * (pattern[k] - (1 if c == k else 0))
                coincidence[c][k] += count * pairs / (rated - 1)
    margins = [sum(row) for row in coincidence]
    n = sum(margins)
    expected = sum(margins[c] * margins[k] for c in range(size) for k in range(size) if c != k)
    if n <= 1 or expected == 0:
        return None
    observed = sum(coincidence[c][k] for c in range(size) for k in range(size) if c != k)
    return 1 - (n - 1) * observed / expected


def jackknife_interval(
    histogram: Histogram, statistic: Callable[[Histogram], float | None]
) -> tuple[float, float] | None:
    """A normal 95% interval from the jackknife standard error over items: each item left out once."""
    counts = {pattern: count for pattern, count in histogram.items() if count > 0 and sum(pattern) >= 2}
    items = sum(counts.values())
    estimate = statistic(counts)
    if estimate is None or items < 2:
        return None
    left_out = {}
    for pattern, count in counts.items():
        value = statistic({**counts, pattern: count - 1})
        if value is None:
            return None
        left_out[pattern] = value
    mean = sum(counts[p] * value for p, value in left_out.items()) / items
    variance = (items - 1) / items * sum(counts[p] * (value - mean) ** 2 for p, value in left_out.items())
    se = math.sqrt(variance)
    if se == 0.0:
        return None
    return max(-1.0, estimate - Z95 * se), min(1.0, estimate + Z95 * se)


def people_agreement(categories: Sequence[str], histogram: Histogram) -> PeopleAgreement:
    """The figures of how far people agreed, from the patterns of the items several people answered."""
    counts = {tuple(p): n for p, n in histogram.items() if n > 0 and sum(p) >= 2 and len(p) == len(categories)}
    items = sum(counts.values())
    answers = sum(sum(p) * n for p, n in counts.items())
    unanimous = sum(n for p, n in counts.items() if max(p) == sum(p))
    if items == 0:
        note = "no item has answers from two people yet"
        return PeopleAgreement(tuple(categories), 0, 0, 0, None, None, None, None, None, None, note)
    kappa, alpha = fleiss_kappa(counts), krippendorff_alpha(counts)
    note = ""
    if kappa is None:
        note = "kappa and alpha undefined: every answer was the same verdict"
    elif items < 2:
        note = "too few items for an interval"
    return PeopleAgreement(
        tuple(categories),
        items,
        answers,
        unanimous,
        unanimous / items,
        wilson_interval(unanimous, items),
        kappa,
        jackknife_interval(counts, fleiss_kappa),
        alpha,
        jackknife_interval(counts, krippendorff_alpha),
        note,
    )

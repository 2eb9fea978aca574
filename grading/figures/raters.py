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

from grading.figures.agreement import interval_json, weighted_kappa, wilson_interval
from grading.figures.agreement import jackknife_interval as _jackknife

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
            "percent_interval": interval_json(self.percent_interval),
            "percent_interval_method": "wilson, over items",
            "fleiss_kappa": self.fleiss_kappa,
            "fleiss_kappa_interval": interval_json(self.fleiss_interval),
            "krippendorff_alpha": self.alpha,
            "krippendorff_alpha_level": "nominal",
            "krippendorff_alpha_interval": interval_json(self.alpha_interval),
            "interval_method": "jackknife standard error over items, normal 95%",
            "note": self.note,
        }


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


def krippendorff_alpha(histogram: Histogram, level: str = "nominal") -> float | None:
    """Krippendorff's alpha from the coincidence of values within items (Krippendorff 2011, "Computing
    Krippendorff's alpha-reliability"); None when every pairable answer is in one class. `level`: nominal (any
    two different values differ alike), or ordinal (the values in the patterns' order, as scores 1 to n: two
    values differ by the squared count of the values between them, halves of their own included)."""
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
    distance = [[float(c != k) for k in range(size)] for c in range(size)]
    if level == "ordinal":
        for c in range(size):
            for k in range(size):
                low, high = min(c, k), max(c, k)
                distance[c][k] = (sum(margins[low : high + 1]) - (margins[c] + margins[k]) / 2) ** 2
    expected = sum(margins[c] * margins[k] * distance[c][k] for c in range(size) for k in range(size))
    if n <= 1 or expected == 0:
        return None
    observed = sum(coincidence[c][k] * distance[c][k] for c in range(size) for k in range(size))
    return 1 - (n - 1) * observed / expected


def jackknife_interval(
    histogram: Histogram, statistic: Callable[[Histogram], float | None]
) -> tuple[float, float] | None:
    """A normal 95% interval from the jackknife standard error over items (grading/figures/agreement.py), over the
    items two or more people answered."""
    return _jackknife({p: n for p, n in histogram.items() if sum(p) >= 2}, statistic)


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


@dataclass(frozen=True)
class ScoreAgreement:
    """Beside exact agreement on a score check: how near the scores are, on the pairs where both gave a score."""

    scale: int
    n: int  # pairs where both sides gave a score (not unknown)
    weighted_kappa: float | None
    weighted_kappa_interval: tuple[float, float] | None
    alpha: float | None  # Krippendorff's alpha, ordinal
    alpha_interval: tuple[float, float] | None
    note: str

    def as_json(self) -> dict:
        return {
            "scale": self.scale,
            "n": self.n,
            "weighted_kappa": self.weighted_kappa,
            "weighted_kappa_weights": "quadratic",
            "weighted_kappa_interval": interval_json(self.weighted_kappa_interval),
            "krippendorff_alpha": self.alpha,
            "krippendorff_alpha_level": "ordinal",
            "krippendorff_alpha_interval": interval_json(self.alpha_interval),
            "interval_method": "jackknife standard error over pairs, normal 95%",
            "note": self.note,
        }


def score_agreement(scale: int, pairs: Mapping[tuple[str, str], int]) -> ScoreAgreement:
    """Weighted kappa and ordinal alpha from counts of (machine answer, person's answer) on a score check of
    `scale`; pairs where either side is unknown (or not a score of the scale) are left out, as the note says."""
    scores = {str(n): n for n in range(1, scale + 1)}
    cells: dict[tuple[int, int], int] = {}
    for (machine, human), count in pairs.items():
        if machine in scores and human in scores and count > 0:
            cell = (scores[machine], scores[human])
            cells[cell] = cells.get(cell, 0) + count
    n = sum(cells.values())

    def alpha(counts: Mapping[tuple[int, int], int]) -> float | None:
        return krippendorff_alpha(_as_patterns(scale, counts), level="ordinal")

    kappa, ordinal = weighted_kappa(cells), alpha(cells)
    note = ""
    if n == 0:
        note = "no pairs where both gave a score yet"
    elif kappa is None:
        note = "weighted kappa and alpha undefined: every score was the same"
    elif n < 2:
        note = "too few pairs for an interval"
    return ScoreAgreement(
        scale,
        n,
        kappa,
        jackknife_interval(cells, weighted_kappa),
        ordinal,
        jackknife_interval(cells, alpha),
        note,
    )


def _as_patterns(scale: int, cells: Mapping[tuple[int, int], int]) -> dict[tuple[int, ...], int]:
    """Pairs of scores as items rated twice: per item, how many gave each score (raters.py's patterns)."""
    patterns: dict[tuple[int, ...], int] = {}
    for (first, second), count in cells.items():
        pattern = [0] * scale
        pattern[first - 1] += 1
        pattern[second - 1] += 1
        patterns[tuple(pattern)] = patterns.get(tuple(pattern), 0) + count
    return patterns

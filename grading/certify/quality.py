"""The quality rate's intervals: the judge's own count beside what people's audited verdicts say it really is.

The dashboard's quality rate counted by the judge carries the judge's bias, and nothing bounds it. The blind audit
sample is a uniform random sample of items with people's verdicts, so it alone gives a valid interval (the
people-only one), but a wide one. Prediction-powered inference (PPI++: Angelopoulos, Duchi and Zrnic, 2023, through
the maintained `ppi-python`) uses the judge's answers on every item as well and corrects them with the audit: the
interval stays valid however biased the judge is, and narrows as far as the judge predicts people.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class QualityInterval:
    """The pass rate as the judge counts it, the PPI++ estimate and interval, and people's interval alone."""

    judge_rate: float  # mean of the judge over every item, audited or not
    estimate: float  # PPI++ point estimate
    low: float
    high: float
    people_low: float  # the audited items' verdicts alone (central-limit interval, ppi_py.classical_mean_ci)
    people_high: float
    labels: int  # audited items
    effective_gain: float | None  # (people width / PPI++ width)^2; None when the PPI++ interval has no width


def quality_interval(
    *,
    people: Sequence[float],
    judge_labelled: Sequence[float],
    judge_unlabelled: Sequence[float],
    alpha: float = 0.05,
    weights: Sequence[float] | None = None,
    unlabelled_weights: Sequence[float] | None = None,
) -> QualityInterval | None:
    """The pass rate's PPI++ interval at level 1-alpha, or None with fewer than 2 audited items (an interval's width
    comes from the spread of the audited verdicts, which one verdict does not have).

    `people`: 1.0 or 0.0 per audited item, whether people passed it. `judge_labelled`: the judge's probability of a
    pass (or its 0/1 verdict) on the same items, in the same order. `judge_unlabelled`: on every other item.
    The audited items must be a uniform random sample of the items (the blind audit), never the ones the judge sent
    to people: the correction learns the judge's error from them.

    `weights`, `unlabelled_weights`: per audited item and per other item, how many items it stands for, where the
    sample gave items unequal chances (a fixed number drawn per week: an item of a quiet week stands for fewer than
    one of a busy week). ppi_py's sample weights, which it scales to a mean of 1; None: all equal.

    1. PPI++ (`ppi_mean_ci`, `ppi_mean_pointestimate` with lam=None): the power-tuning weight lam is estimated from
       the data, so a judge that predicts people badly is weighted down to nothing and the interval falls back to
       about the people-only one instead of getting wider.
    2. The people-only interval is ppi_py's `classical_mean_ci`, the same central-limit interval PPI++ reduces to at
       lam=0, so their widths compare like for like: `effective_gain` is how many times the audit's labels the
       judge's answers are worth.
    3. Both intervals are clipped to [0, 1], a rate's range; the gain is computed from the unclipped widths.
    4. With no unaudited item, or a judge that gave every item the same answer, the judge has nothing to add (and
       PPI++'s weight, a covariance over the judge's variance, is undefined): the estimate and interval are people's.
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be between 0 and 1 (exclusive), not {alpha!r}")
    verdicts = _rates("people", people)
    labelled = _rates("judge_labelled", judge_labelled)
    unlabelled = _rates("judge_unlabelled", judge_unlabelled)
    if len(verdicts) != len(labelled):
        raise ValueError("people and judge_labelled must have one value per audited item, in the same order")
    w = _weights("weights", weights, len(verdicts))
    w_unlabelled = _weights("unlabelled_weights", unlabelled_weights, len(unlabelled))
    if len(verdicts) < 2:
        return None
    # ppi_py imports numba, which takes about two seconds; importing it here keeps that off every process that
    # imports grading (web workers, the graders) until one of them asks for an interval.
    from ppi_py import classical_mean_ci, ppi_mean_ci, ppi_mean_pointestimate

    people_low, people_high = (float(bound) for bound in np.ravel(classical_mean_ci(verdicts, w=w, alpha=alpha)))
    judge = np.concatenate([labelled, unlabelled])
    if len(unlabelled) and np.ptp(judge) > 0:
        weighted = {"w": w, "w_unlabeled": w_unlabelled}
        estimate = float(np.ravel(ppi_mean_pointestimate(verdicts, labelled, unlabelled, lam=None, **weighted))[0])
        low, high = (
            float(np.ravel(bound)[0]) for bound in ppi_mean_ci(verdicts, labelled, unlabelled, alpha=alpha, **weighted)
        )
    else:
        estimate, low, high = float(np.average(verdicts, weights=w)), people_low, people_high
    width = high - low
    return QualityInterval(
        judge_rate=float(judge.mean()),
        estimate=estimate,
        low=max(0.0, low),
        high=min(1.0, high),
        people_low=max(0.0, people_low),
        people_high=min(1.0, people_high),
        labels=len(verdicts),
        effective_gain=((people_high - people_low) / width) ** 2 if width > 0 else None,
    )


def _rates(name: str, values: Sequence[float]) -> np.ndarray:
    array = np.asarray(values, dtype=float).reshape(-1)
    if not np.all((array >= 0.0) & (array <= 1.0)):  # NaN fails too
        raise ValueError(f"{name} must hold probabilities between 0 and 1")
    return array


def _weights(name: str, values: Sequence[float] | None, count: int) -> np.ndarray | None:
    if values is None:
        return None
    array = np.asarray(values, dtype=float).reshape(-1)
    if len(array) != count or not np.all(array > 0):  # NaN fails too
        raise ValueError(f"{name} must hold one positive weight per item, in the same order")
    return array


@dataclass(frozen=True)
class CellSums:
    """One cell of a sample drawn cell by cell (the audit's: a week, or a week of one application), as sums over its
    items: all that PPI++ for a mean reads of them (`quality_interval_of_cells`). y is 1.0 or 0.0 per audited item,
    whether people passed it; p the judge's probability of a pass, on every item."""

    audited: int  # items with people's verdict
    people: float  # Σy over them
    people_squares: float  # Σy²
    judge_audited: float  # Σp over the same items
    judge_audited_squares: float  # Σp²
    people_judge: float  # Σy·p
    others: int  # the cell's other items
    judge_others: float  # Σp over them
    judge_others_squares: float  # Σp²
    # The least p of the cell's items, audited or not, and the greatest; or bounds on them, below and above, that
    # are equal only where every p of the cell is that value: the interval asks only whether the judge said the same
    # of every item (the dashboard's counters hold sums, not extremes: grading/dashboard/certified.py).
    lowest: float
    highest: float

    @property
    def size(self) -> int:
        return self.audited + self.others


def quality_interval_of_cells(cells: Sequence[CellSums], *, alpha: float = 0.05) -> QualityInterval | None:
    """`quality_interval` over the items of `cells`, each audited item weighted by how many items of its cell it
    stands for (size / audited) and each other item likewise (size / others), from the cells' sums alone: a page over
    a million items reads a few hundred rows. None with fewer than 2 audited items.

    For a mean, every figure ppi_py computes from the per-item arrays is a function of these sums: the weights are
    constant within a cell, so each mean of ppi_py's (of w·(y - p), of the gradients, their covariance, the
    judge's variance over both samples, each standard error) is a sum over cells of a weight, or its square, times
    a cell's sum. This follows ppi_py's `ppi_mean_ci` and `ppi_mean_pointestimate` (lam=None: estimated at the
    lam=1 point estimate, clipped to [0, 1]) and `classical_mean_ci` term by term, its weights scaled to a mean of 1
    as ppi_py scales them, and the z from the same function (`scipy.special.ndtri`, behind scipy's `norm.ppf`):
    equal to `quality_interval` on the arrays but for the order of summation (held within 1e-9 by
    tests/grading/certify/test_quality.py). A variance computed as E[x²] - E[x]² can come out a hair below 0 where
    every value is the same: it is taken as 0."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be between 0 and 1 (exclusive), not {alpha!r}")
    if any(cell.audited < 1 or cell.others < 0 for cell in cells):
        raise ValueError("each cell must hold at least one audited item, and no fewer than no other item")
    if any(not (0.0 <= cell.lowest <= cell.highest <= 1.0) for cell in cells):  # NaN fails too
        raise ValueError("the judge's values must be probabilities between 0 and 1")
    n = sum(cell.audited for cell in cells)
    if n < 2:
        return None
    others = sum(cell.others for cell in cells)
    size = sum(cell.size for cell in cells)
    # ppi_py scales each sample's weights to a mean of 1: an audited item's raw weight is size / audited, and they
    # sum to the cells' sizes; the other items' likewise over the cells that have any.
    size_with_others = sum(cell.size for cell in cells if cell.others)
    w = [cell.size / cell.audited / size * n for cell in cells]
    u = [cell.size / cell.others / size_with_others * others if cell.others else 0.0 for cell in cells]
    from scipy.special import ndtri  # scipy's norm.ppf; imported when an interval is asked for, as ppi_py was

    z = float(ndtri(1 - alpha / 2))

    def weighted(values: Callable[[CellSums], float], power: int = 1) -> float:
        return sum(weight**power * values(cell) for cell, weight in zip(cells, w, strict=True))

    people_mean = weighted(lambda c: c.people) / n
    people_se = _se(people_mean, weighted(lambda c: c.people_squares, 2) / n, n)
    people_low, people_high = people_mean - z * people_se, people_mean + z * people_se
    lowest, highest = min(cell.lowest for cell in cells), max(cell.highest for cell in cells)
    if others and highest > lowest:
        estimate, se = _ppi_mean(cells, w, u, n=n, others=others)
        low, high = estimate - z * se, estimate + z * se
    else:
        estimate, low, high = weighted(lambda c: c.people) / weighted(lambda c: c.audited), people_low, people_high
    width = high - low
    return QualityInterval(
        judge_rate=sum(cell.judge_audited + cell.judge_others for cell in cells) / size,
        estimate=estimate,
        low=max(0.0, low),
        high=min(1.0, high),
        people_low=max(0.0, people_low),
        people_high=min(1.0, people_high),
        labels=n,
        effective_gain=((people_high - people_low) / width) ** 2 if width > 0 else None,
    )


def _ppi_mean(cells: Sequence[CellSums], w: list[float], u: list[float], *, n: int, others: int) -> tuple[float, float]:
    """PPI++'s point estimate of the mean and its standard error, ppi_py's steps over the cells' sums: the lam=1
    estimate theta; the gradients w(y - theta), w(p - theta) on the audited items and u(p - theta) on the others;
    lam = their covariance over 2(1 + n/N) times the judge's gradients' variance (ddof 1, both samples), clipped to
    [0, 1]; then the estimate at lam and the two standard errors (ddof 0) added in quadrature."""
    pairs = list(zip(cells, w, u, strict=True))
    theta = (
        sum(b * c.judge_others for c, _, b in pairs) / others
        + sum(a * (c.people - c.judge_audited) for c, a, _ in pairs) / n
    )
    grads = sum(a * (c.people - c.audited * theta) for c, a, _ in pairs) / n
    grads_hat = sum(a * (c.judge_audited - c.audited * theta) for c, a, _ in pairs) / n
    products = (
        sum(
            a * a * (c.people_judge - theta * (c.people + c.judge_audited) + c.audited * theta * theta)
            for c, a, _ in pairs
        )
        / n
    )
    covariance = 2 * (products - grads * grads_hat)
    total = sum(
        a * (c.judge_audited - c.audited * theta) + b * (c.judge_others - c.others * theta) for c, a, b in pairs
    )
    squares = sum(
        a * a * (c.judge_audited_squares - 2 * theta * c.judge_audited + c.audited * theta * theta)
        + b * b * (c.judge_others_squares - 2 * theta * c.judge_others + c.others * theta * theta)
        for c, a, b in pairs
    )
    count = n + others
    variance = (squares - total * total / count) / (count - 1)
    lam = min(max(covariance / (2 * (1 + n / others) * variance), 0.0), 1.0) if variance > 0 else 0.0
    imputed = lam * sum(b * c.judge_others for c, _, b in pairs) / others
    imputed_squares = lam * lam * sum(b * b * c.judge_others_squares for c, _, b in pairs) / others
    rectifier = sum(a * (c.people - lam * c.judge_audited) for c, a, _ in pairs) / n
    rectifier_squares = (
        sum(
            a * a * (c.people_squares - 2 * lam * c.people_judge + lam * lam * c.judge_audited_squares)
            for c, a, _ in pairs
        )
        / n
    )
    se = math.sqrt(_se(imputed, imputed_squares, others) ** 2 + _se(rectifier, rectifier_squares, n) ** 2)
    return imputed + rectifier, se


def _se(mean: float, squares: float, count: int) -> float:
    """The standard error of a mean of `count` values from their mean and the mean of their squares (ddof 0)."""
    return math.sqrt(max(squares - mean * mean, 0.0)) / math.sqrt(count)

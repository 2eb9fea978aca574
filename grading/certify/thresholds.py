"""The certified threshold of one check: the confidence above which the judge may decide alone.

From people's verdicts on items drawn without regard to what the judge said (the blind audit sample, imported
labels), find the lowest confidence t such that, with probability at least 1-delta, the items whose judge confidence
is at or above t agree with people at least 1-alpha of the time. The method is fixed-sequence testing with an exact
binomial bound (Jung, Brahman and Choi, "Trust or Escalate", ICLR 2025), in its strict form: when no threshold
passes, there is no certificate and everything goes to people; the machine is never handed everything by default.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MOST_POINTS = 10**8  # beyond this many labelled items above a candidate, `more_labels` says none would do


@dataclass(frozen=True)
class CalibrationPoint:
    """One item a person also judged: the judge's confidence in its answer, and whether the person's answer agreed."""

    confidence: float
    agrees: bool


@dataclass(frozen=True)
class CheckCertificate:
    """What one check's calibration found; the shape of one entry of `Certificate.checks`.

    `threshold` None: no certificate, every item goes to people (`disagreements` 0, `bound` None, `coverage` 0).
    """

    labels: int  # every calibration point, above the threshold or not
    threshold: float | None
    disagreements: int  # among the points at or above the threshold
    bound: float | None  # Clopper-Pearson upper bound (level 1-delta) of the disagreement rate at or above it
    coverage: float  # share of the calibration points at or above the threshold
    more_labels: int | None  # estimated labels to add before the threshold can move down; see `certify`

    def as_json(self) -> dict[str, int | float | None]:
        return {
            "labels": self.labels,
            "disagreements": self.disagreements,
            "threshold": self.threshold,
            "bound": self.bound,
            "coverage": self.coverage,
            "more_labels": self.more_labels,
        }


def fewest_labels(*, alpha: float, delta: float) -> int:
    """The fewest points that can pass a bound at all, all of them agreeing: the Clopper-Pearson upper bound with no
    disagreement is 1 - delta^(1/n), which is at most alpha from n >= ln(delta) / ln(1-alpha) on (22 at 0.1 and 0.1).
    """
    _check_level("alpha", alpha)
    _check_level("delta", delta)
    return math.ceil(math.log(delta) / math.log1p(-alpha) - 1e-9)


def certify(points: Sequence[CalibrationPoint], *, alpha: float, delta: float) -> CheckCertificate:
    """The lowest confidence at which the judge's agreement with people is certified at 1-alpha with probability
    at least 1-delta, or no certificate.

    1. The candidate thresholds are the distinct confidences, from the highest down; the points at or above one give
       its n and its k disagreements (points of equal confidence enter together: a threshold cannot split them).
    2. Each candidate's bound is the exact one-sided Clopper-Pearson upper bound of its disagreement rate at level
       1-delta: `beta.ppf(1-delta, k+1, n-k)`, 1.0 when k == n.
    3. The walk starts at the highest candidate with at least `fewest_labels(alpha, delta)` points at or above it.
       A candidate with fewer fails whatever people said (its bound exceeds alpha even with no disagreement), so
       starting above it would abstain on every calibration set whose confidences are not tied at the top, which
       logprob confidences seldom are. Where the walk starts depends on the confidences only, never on the
       verdicts, so the sequence of tests is still fixed before any verdict is read. (Given the confidence a
       candidate stands at, the points above it are a random sample of the items above it, so their disagreements
       are binomial at those items' rate; the candidate's own point, at the lowest confidence of them, errs on the
       safe side when agreement rises with confidence.) The simulator (grading/certify/simulator.py) measures the
       guarantee of this walk.
    4. Walking down, a candidate is accepted while its bound is at most alpha; the certified threshold is the lowest
       accepted before the first failure (fixed-sequence testing: each test spends the whole delta because a later
       one is reached only when every earlier one passed). If the first candidate fails, or no candidate has
       enough points, there is no certificate: abstain.

    `more_labels` estimates how many more labelled items, drawn as these were, would let the next candidate below
    the threshold pass (with no certificate: the first candidate the walk tests; with fewer points than any
    candidate needs: all of them taken together). The estimate keeps that candidate's share of the points and its
    disagreement rate, and finds the smallest total whose Clopper-Pearson bound at that rate is at most alpha.
    None when no number of labels would (its rate is at or above alpha, or so near it that even MOST_POINTS labels
    above it would not do) and when no candidate lies below the threshold (every calibration point is covered).
    """
    _check_level("alpha", alpha)
    _check_level("delta", delta)
    confidences = np.fromiter((point.confidence for point in points), dtype=float, count=len(points))
    agrees = np.fromiter((point.agrees for point in points), dtype=bool, count=len(points))
    return certify_arrays(confidences, agrees, alpha=alpha, delta=delta)


def certify_arrays(confidences: np.ndarray, agrees: np.ndarray, *, alpha: float, delta: float) -> CheckCertificate:
    """`certify` on two parallel arrays: what a reader that pulls the calibration points as columns from the
    database (or the simulator, 9,000 times) hands over without building a point per row."""
    _check_level("alpha", alpha)
    _check_level("delta", delta)
    confidences = np.asarray(confidences, dtype=float)
    agrees = np.asarray(agrees, dtype=bool)
    if confidences.shape != agrees.shape or confidences.ndim != 1:
        raise ValueError("confidences and agrees must be one-dimensional and of the same length")
    if not np.all((confidences >= 0.0) & (confidences <= 1.0)):  # NaN fails too
        raise ValueError("confidence must be a probability between 0 and 1")
    labels = len(confidences)
    values, n, k = _candidates(confidences, agrees)
    needed = fewest_labels(alpha=alpha, delta=delta)
    testable = n >= needed
    if not testable.any():
        # all the points taken together stand for the first candidate that more labels would bring
        more = _more_labels(n=labels, k=int(k[-1]), total=labels, alpha=alpha, delta=delta) if labels else needed
        return _abstained(labels, more_labels=more)
    first = int(np.argmax(testable))  # n only grows down the candidates, so the testable ones are a suffix
    bounds = _upper_bounds(n[first:], k[first:], delta=delta)
    failed = bounds > alpha
    accepted = int(np.argmax(failed)) if failed.any() else len(bounds)  # candidates accepted before the first failure
    if accepted == 0:
        more = _more_labels(n=int(n[first]), k=int(k[first]), total=labels, alpha=alpha, delta=delta)
        return _abstained(labels, more_labels=more)
    at = first + accepted - 1
    below = at + 1
    return CheckCertificate(
        labels=labels,
        threshold=float(values[at]),
        disagreements=int(k[at]),
        bound=float(bounds[accepted - 1]),
        coverage=float(n[at]) / labels,
        more_labels=(
            _more_labels(n=int(n[below]), k=int(k[below]), total=labels, alpha=alpha, delta=delta)
            if below < len(values)
            else None
        ),
    )


def _abstained(labels: int, *, more_labels: int | None) -> CheckCertificate:
    """No certificate: the machine decides nothing alone on the check."""
    return CheckCertificate(
        labels=labels, threshold=None, disagreements=0, bound=None, coverage=0.0, more_labels=more_labels
    )


def agreement_curve(points: Sequence[CalibrationPoint], *, steps: int = 20) -> list[tuple[float, float]]:
    """(coverage, agreement among the points covered) at `steps` evenly spaced coverage levels, highest confidence
    first: the chart on the criteria page of what each threshold would buy.

    A level's threshold is the confidence of the point at that rank, and every point tied with it is covered too,
    so the coverage shown is the one a threshold can really give (it may pass the level; repeats are dropped).
    """
    if steps < 1:
        raise ValueError("steps must be at least 1")
    if not points:
        return []
    confidences = np.fromiter((point.confidence for point in points), dtype=float, count=len(points))
    agrees = np.fromiter((point.agrees for point in points), dtype=bool, count=len(points))
    values, n, k = _candidates(confidences, agrees)
    total = len(confidences)
    curve: list[tuple[float, float]] = []
    for step in range(1, steps + 1):
        rank = math.ceil(step * total / steps)  # points wanted at this level, at least one
        at = int(np.searchsorted(n, rank))  # the first candidate covering that many
        point = (float(n[at]) / total, 1.0 - float(k[at]) / float(n[at]))
        if not curve or curve[-1] != point:
            curve.append(point)
    return curve


def split_delta(delta: float, parts: int) -> float:
    """The delta each of `parts` certificates is computed at so that all of them hold at once with probability at
    least 1-delta (Bonferroni: the chance that any fails is at most the sum of theirs). An item is decided by the
    machine only when every required check is certified, so the item's guarantee needs them all."""
    _check_level("delta", delta)
    if parts < 1:
        raise ValueError("parts must be at least 1")
    return delta / parts


def _candidates(confidences: np.ndarray, agrees: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct confidences, highest first, with the number of points (n) and of disagreements (k) at or
    above each: one sort and two cumulative sums."""
    order = np.argsort(-confidences, kind="stable")
    ordered = confidences[order]
    disagreements = np.cumsum(~agrees[order])
    last_of_value = np.flatnonzero(np.r_[ordered[1:] != ordered[:-1], ordered.size > 0])  # each tied run's last
    return ordered[last_of_value], last_of_value + 1, disagreements[last_of_value]


def _upper_bounds(n: np.ndarray, k: np.ndarray, *, delta: float) -> np.ndarray:
    """Exact one-sided Clopper-Pearson upper bounds of k disagreements in n, at level 1-delta."""
    all_disagree = k >= n
    bounds = _beta_quantile(1.0 - delta, k + 1, np.where(all_disagree, 1, n - k))
    return np.where(all_disagree, 1.0, bounds)


def _beta_quantile(q: float, a: np.ndarray | float, b: np.ndarray | float) -> np.ndarray:
    """`scipy.stats.beta.ppf`, by the function behind it (`scipy.special.betaincinv`, the same values): scipy.stats
    imports much more than scipy.special does. Imported when a bound is first asked for, not at start, which every
    process that imports grading (web workers, graders, each `manage.py` command) would otherwise pay."""
    from scipy.special import betaincinv

    return betaincinv(a, b, q)


def _more_labels(*, n: int, k: int, total: int, alpha: float, delta: float) -> int | None:
    """Labels to add to `total` so that a candidate holding n of them with k disagreements would pass, if new
    labels fall above it in the same share (n/total) and disagree at the same rate (k/n).

    At a fixed rate the bound shrinks as n grows, so the smallest passing n is bracketed on a doubling grid, then
    narrowed on an even grid within the bracket: each step one vectorised `beta.ppf`. None when even MOST_POINTS
    at or above the candidate would not pass.
    """
    rate = k / n
    if rate >= alpha:
        return None

    def passing(points: np.ndarray) -> np.ndarray:
        return _beta_quantile(1.0 - delta, rate * points + 1.0, (1.0 - rate) * points) <= alpha

    # a rate just under alpha needs about z^2 rate (1 - rate) / (alpha - rate)^2 points; past MOST_POINTS the
    # answer is "none that any audit will reach" (and a rate within rounding of alpha would never end the search)
    grid = n * 2.0 ** np.arange(math.ceil(math.log2(MOST_POINTS / n)) + 1)
    passes = passing(grid)
    if not passes.any():
        return None
    first = int(np.argmax(passes))
    low = int(grid[first - 1]) if first else int(grid[0] / 2)  # fails (or is below n)
    high = math.ceil(grid[first])
    while high - low > 1:
        inside = np.unique(np.linspace(low, high, min(high - low + 1, 1024)).round().astype(np.int64))
        passes = passing(inside.astype(float))
        at = int(np.argmax(passes))
        low, high = int(inside[at - 1]), int(inside[at])
    return max(1, math.ceil(high * total / n) - total)


def _check_level(name: str, value: float) -> None:
    if not 0.0 < value < 1.0:
        raise ValueError(f"{name} must be between 0 and 1 (exclusive), not {value!r}")

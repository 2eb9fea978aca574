"""The quality rate's intervals: the judge's own count beside what people's audited verdicts say it really is.

The dashboard's quality rate counted by the judge carries the judge's bias, and nothing bounds it. The blind audit
sample is a uniform random sample of items with people's verdicts, so it alone gives a valid interval (the
people-only one), but a wide one. Prediction-powered inference (PPI++: Angelopoulos, Duchi and Zrnic, 2023, through
the maintained `ppi-python`) uses the judge's answers on every item as well and corrects them with the audit: the
interval stays valid however biased the judge is, and narrows as far as the judge predicts people.
"""

from __future__ import annotations

from collections.abc import Sequence
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

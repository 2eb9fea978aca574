"""The quality rate's interval: PPI++ through ppi-python, beside people's interval alone."""

from dataclasses import replace

import numpy as np
import pytest
from ppi_py import classical_mean_ci, ppi_mean_ci, ppi_mean_pointestimate

from grading.certify.quality import CellSums, quality_interval, quality_interval_of_cells


def _audit(*, items: int, audited: int, bias: float, seed: int) -> dict[str, np.ndarray]:
    """Judge probabilities of a pass for `items` items, people passing each with probability `bias` lower, and a
    uniform random audit sample of `audited` of them."""
    rng = np.random.default_rng(seed)
    judge = rng.beta(1.4, 0.6, items)
    people = (rng.random(items) < np.clip(judge - bias, 0.0, 1.0)).astype(float)
    sample = np.zeros(items, dtype=bool)
    sample[rng.choice(items, audited, replace=False)] = True
    return {"people": people[sample], "judge_labelled": judge[sample], "judge_unlabelled": judge[~sample]}


def test_it_is_ppi_python_s_interval_and_estimate_with_power_tuning():
    audit = _audit(items=5_000, audited=300, bias=0.0, seed=1)
    Y, Yhat, unlabelled = audit["people"], audit["judge_labelled"], audit["judge_unlabelled"]

    interval = quality_interval(**audit, alpha=0.1)

    low, high = ppi_mean_ci(Y, Yhat, unlabelled, alpha=0.1, lam=None)
    people_low, people_high = classical_mean_ci(Y, alpha=0.1)
    assert interval.low == pytest.approx(float(low[0]))
    assert interval.high == pytest.approx(float(high[0]))
    assert interval.estimate == pytest.approx(float(ppi_mean_pointestimate(Y, Yhat, unlabelled, lam=None)[0]))
    assert interval.low < interval.estimate < interval.high
    assert (interval.people_low, interval.people_high) == pytest.approx((people_low, people_high))
    assert interval.labels == 300
    assert interval.judge_rate == pytest.approx(np.concatenate([Yhat, unlabelled]).mean())
    people_width, ppi_width = people_high - people_low, float(high[0] - low[0])
    assert interval.effective_gain == pytest.approx((people_width / ppi_width) ** 2)
    assert interval.effective_gain > 1.0  # a judge that predicts people narrows the interval


def test_it_follows_people_not_a_biased_judge():
    audit = _audit(items=20_000, audited=500, bias=0.2, seed=2)
    everyone = np.concatenate([audit["judge_labelled"], audit["judge_unlabelled"]])

    interval = quality_interval(**audit)

    people_mean = audit["people"].mean()
    assert interval.judge_rate == pytest.approx(everyone.mean())
    assert interval.judge_rate - people_mean > 0.15  # the judge's own count overrates by about the bias
    assert abs(interval.estimate - people_mean) < 0.03
    assert interval.low < people_mean < interval.high
    assert not interval.low < interval.judge_rate < interval.high


def test_it_gives_no_interval_with_fewer_than_two_audited_items():
    assert quality_interval(people=[], judge_labelled=[], judge_unlabelled=[0.9, 0.8]) is None
    assert quality_interval(people=[1.0], judge_labelled=[0.9], judge_unlabelled=[0.9, 0.8]) is None


def test_it_is_people_s_interval_when_every_item_was_audited():
    interval = quality_interval(people=[1.0, 0.0, 1.0, 1.0], judge_labelled=[0.9, 0.2, 0.8, 0.7], judge_unlabelled=[])

    assert interval.estimate == 0.75
    assert (interval.low, interval.high) == (interval.people_low, interval.people_high)
    assert interval.effective_gain == 1.0


def test_it_is_people_s_interval_when_the_judge_gave_every_item_the_same_answer():
    interval = quality_interval(people=[1.0, 0.0, 1.0, 1.0], judge_labelled=[1.0] * 4, judge_unlabelled=[1.0] * 10)

    assert interval.estimate == 0.75
    assert (interval.low, interval.high) == (interval.people_low, interval.people_high)
    assert interval.judge_rate == 1.0


def test_its_intervals_stay_within_a_rate_s_range():
    interval = quality_interval(
        people=[1.0, 1.0, 1.0, 0.0], judge_labelled=[1.0, 1.0, 1.0, 0.0], judge_unlabelled=[1.0] * 5
    )

    assert 0.0 <= interval.low <= interval.high <= 1.0
    assert 0.0 <= interval.people_low <= interval.people_high <= 1.0


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"people": [1.0, 0.0], "judge_labelled": [0.5], "judge_unlabelled": [0.5]}, "same order"),
        ({"people": [1.0, 2.0], "judge_labelled": [0.5, 0.5], "judge_unlabelled": [0.5]}, "people"),
        ({"people": [1.0, 0.0], "judge_labelled": [0.5, float("nan")], "judge_unlabelled": []}, "judge_labelled"),
        ({"people": [1.0, 0.0], "judge_labelled": [0.5, 0.5], "judge_unlabelled": [-0.1]}, "judge_unlabelled"),
        ({"people": [1.0, 0.0], "judge_labelled": [0.5, 0.5], "judge_unlabelled": [], "alpha": 0}, "alpha"),
    ],
)
def test_it_refuses_values_that_are_not_rates(arguments, message):
    with pytest.raises(ValueError, match=message):
        quality_interval(**arguments)


def test_sample_weights_are_ppi_python_s_and_a_weight_per_item_is_required():
    audit = _audit(items=2_000, audited=200, bias=0.1, seed=3)
    Y, Yhat, unlabelled = audit["people"], audit["judge_labelled"], audit["judge_unlabelled"]
    w, w_unlabelled = np.linspace(1, 5, len(Y)), np.linspace(2, 1, len(unlabelled))

    interval = quality_interval(**audit, weights=w, unlabelled_weights=w_unlabelled)

    low, high = ppi_mean_ci(Y, Yhat, unlabelled, alpha=0.05, w=w, w_unlabeled=w_unlabelled)
    people_low, people_high = classical_mean_ci(Y, w=w, alpha=0.05)
    assert (interval.low, interval.high) == pytest.approx((float(low[0]), float(high[0])))
    assert (interval.people_low, interval.people_high) == pytest.approx((people_low, people_high))
    with pytest.raises(ValueError, match="one positive weight per item"):
        quality_interval(**audit, weights=w[:-1])
    with pytest.raises(ValueError, match="one positive weight per item"):
        quality_interval(**audit, unlabelled_weights=-w_unlabelled)


def _cells(seed: int) -> tuple[list[CellSums], dict]:
    """Cells of items drawn apart (a fixed number audited from each, as the audit sample draws weeks), as sums and as
    the per-item arrays and weights the dashboard gave `quality_interval` (each item weighted by how many items of
    its cell it stands for). Some cells are audited whole; with seed 0 the judge says the same of every item."""
    rng = np.random.default_rng(seed)
    cells, items = [], {"people": [], "judge_labelled": [], "judge_unlabelled": [], "weights": [],
                        "unlabelled_weights": []}  # fmt: skip
    for _ in range(int(rng.integers(1, 12))):
        audited, others = int(rng.integers(1, 6)), int(rng.integers(0, 60)) * int(rng.random() < 0.85)
        y = (rng.random(audited) < 0.7).astype(float)
        p, q = rng.beta(1.4, 0.6, audited), rng.beta(1.4, 0.6, others)
        if seed == 0:
            p, q = np.full(audited, 0.9), np.full(others, 0.9)
        judge = np.concatenate([p, q])
        cells.append(CellSums(
            audited=audited, people=y.sum(), people_squares=(y * y).sum(), judge_audited=p.sum(),
            judge_audited_squares=(p * p).sum(), people_judge=(y * p).sum(), others=others, judge_others=q.sum(),
            judge_others_squares=(q * q).sum(), lowest=float(judge.min()), highest=float(judge.max()),
        ))  # fmt: skip
        items["people"] += list(y)
        items["judge_labelled"] += list(p)
        items["judge_unlabelled"] += list(q)
        items["weights"] += [(audited + others) / audited] * audited
        items["unlabelled_weights"] += [(audited + others) / others] * others if others else []
    return cells, items


@pytest.mark.parametrize("seed", range(12))
def test_the_interval_from_cells_sums_is_ppi_python_s_from_their_items(seed):
    cells, items = _cells(seed)

    from_sums = quality_interval_of_cells(cells, alpha=0.05)

    from_items = quality_interval(**items, alpha=0.05)
    if from_items is None:
        assert from_sums is None
        return
    for name in ("judge_rate", "estimate", "low", "high", "people_low", "people_high", "effective_gain"):
        expected = getattr(from_items, name)
        assert getattr(from_sums, name) == (None if expected is None else pytest.approx(expected, rel=0, abs=1e-9))
    assert from_sums.labels == from_items.labels


def test_the_interval_from_cells_sums_refuses_what_is_not_a_rate_or_a_cell():
    cells, _ = _cells(3)
    with pytest.raises(ValueError, match="probabilities between 0 and 1"):
        quality_interval_of_cells([*cells, replace(cells[0], highest=1.2)])
    with pytest.raises(ValueError, match="at least one audited item"):
        quality_interval_of_cells([*cells, replace(cells[0], audited=0)])
    with pytest.raises(ValueError, match="alpha"):
        quality_interval_of_cells(cells, alpha=1.0)

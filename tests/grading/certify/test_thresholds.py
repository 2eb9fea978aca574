"""The certified threshold: strict fixed-sequence testing with exact Clopper-Pearson bounds, held against a plain
loop that walks the candidates one at a time as the method reads."""

import json
import math
import random

import pytest
from scipy.stats import beta

from grading.certify.thresholds import (
    CalibrationPoint,
    CheckCertificate,
    agreement_curve,
    certify,
    fewest_labels,
    split_delta,
)

P = CalibrationPoint


def _bound(n: int, k: int, delta: float) -> float:
    return 1.0 if k == n else float(beta.ppf(1.0 - delta, k + 1, n - k))


def _walked_one_at_a_time(points: list[CalibrationPoint], alpha: float, delta: float) -> tuple:
    """The method read literally: each distinct confidence from the highest, its n and k counted afresh; those
    with too few points to pass at all skipped; accept while the bound is at most alpha; stop at the first failure."""
    needed = next(n for n in range(1, 10_000) if _bound(n, 0, delta) <= alpha)
    found = None
    for value in sorted({p.confidence for p in points}, reverse=True):
        above = [p for p in points if p.confidence >= value]
        n, k = len(above), sum(not p.agrees for p in above)
        if n < needed:
            continue
        if _bound(n, k, delta) > alpha:
            break
        found = (value, k, _bound(n, k, delta), n / len(points))
    return found or (None, 0, None, 0.0)


def _fewest_passing(rate: float, alpha: float, delta: float) -> int:
    """The smallest n whose bound at this disagreement rate is at most alpha, counted up one at a time."""
    n = 1
    while beta.ppf(1.0 - delta, rate * n + 1, (1.0 - rate) * n) > alpha:
        n += 1
    return n


# 25 at 0.95 and 10 at 0.90 all agreeing, 10 at 0.85 with one disagreement, 5 at 0.80 with three, 60 at 0.70 all
# agreeing: n, k and the bound (alpha = delta = 0.1) at each candidate are 25, 0, 0.088; 35, 0, 0.064; 45, 1,
# 0.084; 50, 4, 0.154 (fails); 110, 4, 0.071 (would pass, never reached).
STAIRS = (
    [P(0.95, True)] * 25
    + [P(0.90, True)] * 10
    + [P(0.85, True)] * 9
    + [P(0.85, False)]
    + [P(0.80, True)] * 2
    + [P(0.80, False)] * 3
    + [P(0.70, True)] * 60
)


def test_it_certifies_the_lowest_threshold_accepted_before_the_first_failure():
    certificate = certify(STAIRS, alpha=0.1, delta=0.1)

    assert certificate.threshold == 0.85
    assert certificate.labels == 110
    assert certificate.disagreements == 1
    assert certificate.bound == pytest.approx(beta.ppf(0.9, 2, 44), abs=1e-12)
    assert certificate.bound == pytest.approx(0.0837, abs=1e-4)
    assert certificate.coverage == pytest.approx(45 / 110)


def test_it_never_reaches_a_threshold_below_a_failure_even_one_that_would_pass_alone():
    below_only = [p for p in STAIRS if p.confidence <= 0.80] + [P(0.95, True)] * 22

    assert certify(below_only, alpha=0.1, delta=0.1).threshold is not None  # alone, the bottom candidates pass
    assert certify(STAIRS, alpha=0.1, delta=0.1).threshold == 0.85


@pytest.mark.parametrize("seed", range(40))
def test_it_equals_the_method_walked_one_candidate_at_a_time(seed):
    rng = random.Random(seed)
    alpha, delta = rng.choice([0.05, 0.1, 0.15, 0.2]), rng.choice([0.05, 0.1, 0.2])
    points = []
    for _ in range(rng.randint(0, 160)):
        confidence = round(rng.uniform(0.5, 1.0), rng.choice([1, 2, 3]))  # ties at every rounding
        points.append(P(confidence, rng.random() < 0.6 + 0.4 * confidence))

    certificate = certify(points, alpha=alpha, delta=delta)
    threshold, disagreements, bound, coverage = _walked_one_at_a_time(points, alpha, delta)

    assert certificate.labels == len(points)
    assert certificate.threshold == threshold
    assert certificate.disagreements == disagreements
    assert certificate.bound == (None if bound is None else pytest.approx(bound, abs=1e-12))
    assert certificate.coverage == pytest.approx(coverage)


def test_it_abstains_when_the_top_candidate_fails():
    # the top 30 have 2 disagreements (bound 0.17); the 100 below all agree and would carry the rate to 1.5%
    points = [P(0.99, True)] * 28 + [P(0.99, False)] * 2 + [P(0.90, True)] * 100

    certificate = certify(points, alpha=0.1, delta=0.1)

    assert certificate == CheckCertificate(
        labels=130, threshold=None, disagreements=0, bound=None, coverage=0.0, more_labels=certificate.more_labels
    )
    assert certificate.more_labels is not None  # 2 in 30 is under alpha: more labels would let it pass


def test_it_abstains_with_too_few_labels_even_when_every_one_agrees():
    assert fewest_labels(alpha=0.1, delta=0.1) == 22 == math.ceil(math.log(0.1) / math.log(0.9))

    too_few = certify([P(0.97, True)] * 21, alpha=0.1, delta=0.1)
    enough = certify([P(0.97, True)] * 22, alpha=0.1, delta=0.1)

    assert too_few.threshold is None
    assert too_few.more_labels == 1
    assert enough.threshold == 0.97
    assert enough.bound == pytest.approx(1 - 0.1 ** (1 / 22))
    assert enough.coverage == 1.0


def test_it_abstains_with_no_labels_and_says_how_many_could_certify():
    certificate = certify([], alpha=0.1, delta=0.1)

    assert certificate == CheckCertificate(
        labels=0, threshold=None, disagreements=0, bound=None, coverage=0.0, more_labels=22
    )


def test_it_lets_tied_confidences_enter_together():
    # 22 agreeing points would pass alone, but three disagreeing points share their confidence: the threshold
    # cannot take the 22 without the three, and 3 in 25 fails
    points = [P(0.9, True)] * 22 + [P(0.9, False)] * 3 + [P(0.8, True)] * 50

    certificate = certify(points, alpha=0.1, delta=0.1)

    assert certificate.threshold is None
    assert _walked_one_at_a_time(points, 0.1, 0.1)[0] is None


def test_its_coverage_counts_every_point_at_or_above_the_threshold():
    points = [P(0.9, True)] * 30 + [P(0.6, False)] * 10 + [P(0.6, True)] * 10

    certificate = certify(points, alpha=0.1, delta=0.1)

    assert certificate.threshold == 0.9
    assert certificate.coverage == 30 / 50
    assert certificate.more_labels is None  # the next candidate disagrees a fifth of the time: no labels would do


def test_it_estimates_the_labels_that_would_let_the_next_candidate_pass_at_its_rate():
    certificate = certify(STAIRS, alpha=0.1, delta=0.1)

    # the next candidate, 0.80: 50 of the 110 points at or above it, 4 disagreeing (8%)
    needed = _fewest_passing(4 / 50, 0.1, 0.1)
    assert certificate.more_labels == math.ceil(needed * 110 / 50) - 110


def test_it_estimates_the_labels_that_would_let_the_first_candidate_pass_when_there_is_no_certificate():
    points = [P(0.99, True)] * 28 + [P(0.99, False)] * 2 + [P(0.90, True)] * 100

    certificate = certify(points, alpha=0.1, delta=0.1)

    assert certificate.more_labels == math.ceil(_fewest_passing(2 / 30, 0.1, 0.1) * 130 / 30) - 130


def test_it_gives_no_estimate_when_the_next_candidate_s_rate_is_alpha_to_within_rounding():
    # 1 - 0.85 is 0.15000000000000002 in floating point: 6 disagreements in 40 fall short of it by 2e-17, which
    # no number of labels can tell apart
    points = [P(0.9, True)] * 30 + [P(0.8, True)] * 4 + [P(0.8, False)] * 6

    certificate = certify(points, alpha=1 - 0.85, delta=0.1)

    assert certificate.threshold == 0.9
    assert certificate.more_labels is None


def test_it_gives_no_estimate_when_every_calibration_point_is_covered():
    assert certify([P(0.9, True)] * 40, alpha=0.1, delta=0.1).more_labels is None


def test_its_json_is_the_shape_certificates_store():
    stored = json.loads(json.dumps(certify(STAIRS, alpha=0.1, delta=0.1).as_json()))

    assert set(stored) == {"labels", "disagreements", "threshold", "bound", "coverage", "more_labels"}
    assert stored["threshold"] == 0.85
    assert stored["labels"] == 110
    assert json.loads(json.dumps(certify([], alpha=0.1, delta=0.1).as_json()))["threshold"] is None


@pytest.mark.parametrize(
    "points, alpha, delta, message",
    [
        ([P(0.9, True)], 0.0, 0.1, "alpha"),
        ([P(0.9, True)], 0.1, 1.0, "delta"),
        ([P(float("nan"), True)], 0.1, 0.1, "confidence"),
        ([P(1.2, True)], 0.1, 0.1, "confidence"),
    ],
)
def test_it_refuses_a_level_or_confidence_out_of_range(points, alpha, delta, message):
    with pytest.raises(ValueError, match=message):
        certify(points, alpha=alpha, delta=delta)


def test_the_agreement_curve_reads_agreement_among_the_points_covered_at_each_level():
    points = [P(c / 10, c != 7) for c in range(10, 0, -1)]  # ten distinct confidences, 0.7 disagreeing

    curve = agreement_curve(points, steps=5)

    assert curve == [(0.2, 1.0), (0.4, 0.75), (0.6, 5 / 6), (0.8, 7 / 8), (1.0, 0.9)]


def test_the_agreement_curve_covers_tied_points_together():
    points = [P(0.9, True)] * 3 + [P(0.5, False)] + [P(0.5, True)] * 6

    curve = agreement_curve(points, steps=10)

    assert curve == [(0.3, 1.0), (1.0, 0.9)]  # no threshold covers one or two of the three tied points
    assert agreement_curve([], steps=10) == []


def test_split_delta_shares_delta_among_the_required_checks():
    assert split_delta(0.1, 1) == 0.1
    assert split_delta(0.1, 4) == pytest.approx(0.025)
    with pytest.raises(ValueError, match="parts"):
        split_delta(0.1, 0)
    with pytest.raises(ValueError, match="delta"):
        split_delta(1.5, 2)

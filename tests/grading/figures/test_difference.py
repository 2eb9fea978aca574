"""The comparison's statistics against published values: Wilson intervals and Newcombe's hybrid score intervals
from Newcombe (1998), Statistics in Medicine 17, 857-872 and 873-890 (tables of worked examples), and the pooled
z-test against its textbook computation."""

import math

import pytest

from grading.figures.agreement import wilson_interval
from grading.figures.difference import difference_of, newcombe_interval, two_proportion_test


@pytest.mark.parametrize(
    ("passed", "n", "low", "high"),
    [(81, 263, 0.2553, 0.3662), (15, 148, 0.0624, 0.1605), (0, 20, 0.0, 0.1611), (1, 29, 0.0061, 0.1718)],
)
def test_it_gives_each_rate_the_wilson_interval_newcombe_tabulates(passed, n, low, high):
    assert wilson_interval(passed, n) == pytest.approx((low, high), abs=5e-5)


@pytest.mark.parametrize(
    ("first", "second", "low", "high"),
    [((56, 70), (48, 80), 0.0524, 0.3339), ((9, 10), (3, 10), 0.1705, 0.8090), ((5, 56), (0, 29), -0.0381, 0.1926)],
)
def test_it_gives_the_difference_newcombes_hybrid_score_interval(first, second, low, high):
    # Newcombe's examples are p1 - p2; a comparison's difference is b - a, so b is his first proportion.
    assert newcombe_interval(*second, *first) == pytest.approx((low, high), abs=5e-5)


def test_it_tests_the_difference_with_the_pooled_two_proportion_z_test():
    pooled = (48 + 56) / (80 + 70)
    z = (56 / 70 - 48 / 80) / math.sqrt(pooled * (1 - pooled) * (1 / 80 + 1 / 70))
    assert two_proportion_test(48, 80, 56, 70) == pytest.approx((z, math.erfc(z / math.sqrt(2))))
    assert two_proportion_test(48, 80, 56, 70)[1] == pytest.approx(0.00805, abs=5e-5)


def test_it_says_nothing_where_a_side_has_no_answers_or_there_is_no_spread():
    assert difference_of(0, 0, 3, 4).as_json()["difference"] is None
    assert newcombe_interval(3, 4, 0, 0) is None
    assert two_proportion_test(5, 5, 7, 7) is None  # every answer a pass on both sides: nothing to test
    same = difference_of(5, 5, 7, 7)
    assert same.difference == 0 and same.interval is not None and same.p_value is None

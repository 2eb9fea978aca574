"""The comparison harness's arithmetic (bench/compare.py): medians, spreads, when a verdict is stated, and the order
the sides take. No database and no timing: the samples are given."""

import math
import random

import pytest

from bench.compare import DEFAULT_ROUNDS, Spread, main, order_of, report, spread_of, verdict


def spread(low: float, high: float) -> Spread:
    return Spread(median=(low + high) / 2, low=low, high=high, least=low, most=high)


def test_it_reads_the_median_and_quartiles_of_five_samples_as_the_middle_ones():
    assert spread_of([5.0, 1.0, 4.0, 2.0, 3.0]) == Spread(median=3.0, low=2.0, high=4.0, least=1.0, most=5.0)


def test_it_interpolates_quartiles_between_samples():
    assert spread_of([1.0, 2.0, 3.0, 4.0]) == Spread(median=2.5, low=1.75, high=3.25, least=1.0, most=4.0)


def test_it_refuses_a_spread_of_one_sample():
    with pytest.raises(ValueError, match="at least two samples"):
        spread_of([1.0])


def test_it_claims_head_faster_only_when_heads_upper_quartile_is_below_bases_lower():
    assert verdict(spread(10.0, 12.0), spread(7.0, 9.0)) == "head faster"
    assert verdict(spread(10.0, 12.0), spread(7.0, 10.0)) == "no difference claimed"


def test_it_claims_head_slower_only_when_heads_lower_quartile_is_above_bases_upper():
    assert verdict(spread(10.0, 12.0), spread(12.5, 14.0)) == "head slower"
    assert verdict(spread(10.0, 12.0), spread(12.0, 14.0)) == "no difference claimed"


def test_it_claims_no_difference_when_the_ranges_overlap_however_far_apart_the_medians():
    base = Spread(median=10.0, low=9.0, high=20.0, least=9.0, most=20.0)
    head = Spread(median=19.0, low=18.0, high=21.0, least=18.0, most=21.0)
    assert verdict(base, head) == "no difference claimed"


def test_it_claims_no_difference_when_one_side_holds_the_other():
    assert verdict(spread(5.0, 15.0), spread(9.0, 11.0)) == "no difference claimed"


def test_it_still_states_a_verdict_when_one_sample_of_five_is_an_outlier():
    base, head = spread_of([10.0, 10.5, 11.0, 10.2, 90.0]), spread_of([5.0, 5.5, 6.0, 5.2, 5.1])
    assert verdict(base, head) == "head faster"


def test_it_claims_nothing_from_an_unreadable_figure():
    unreadable = Spread(median=math.nan, low=math.nan, high=math.nan, least=math.nan, most=math.nan)
    assert verdict(spread(10.0, 12.0), unreadable) == "no difference claimed"
    assert verdict(unreadable, spread(1.0, 2.0)) == "no difference claimed"


def test_it_rarely_claims_a_difference_between_two_runs_of_the_same_code_at_the_default_rounds():
    rng = random.Random(45)

    def run() -> Spread:
        return spread_of([rng.gauss(100.0, 10.0) for _ in range(DEFAULT_ROUNDS)])

    claims = sum(verdict(run(), run()) != "no difference claimed" for _ in range(2000))
    assert claims < 20


def test_it_mostly_catches_a_shift_of_one_and_a_half_spreads_at_the_default_rounds():
    rng = random.Random(45)

    def run(mean: float) -> Spread:
        return spread_of([rng.gauss(mean, 10.0) for _ in range(DEFAULT_ROUNDS)])

    caught = sum(verdict(run(100.0), run(85.0)) == "head faster" for _ in range(2000))
    assert caught > 1200


def test_it_alternates_which_side_runs_first_from_round_to_round():
    assert [order_of(n) for n in range(4)] == [("base", "head"), ("head", "base"), ("base", "head"), ("head", "base")]


def test_it_reports_each_metric_of_a_phase_in_ms_with_its_ratio_and_verdict():
    samples = {
        "base": {"routing": {"wall": [0.010, 0.011, 0.012, 0.011, 0.010], "cpu": [0.008] * 5, "db_cpu": [0.0] * 5}},
        "head": {"routing": {"wall": [0.005, 0.006, 0.005, 0.006, 0.005], "cpu": [0.008] * 5, "db_cpu": [0.0] * 5}},
    }
    lines = report(samples)
    assert lines[0] == "routing"
    wall, cpu, db_cpu = lines[2:]
    assert "wall ms" in wall and "11.0 [10.0-11.0] (10.0-12.0)" in wall and "0.455x" in wall
    assert wall.endswith("head faster")
    assert "1.000x" in cpu and cpu.endswith("no difference claimed")
    assert "n/a" in db_cpu and db_cpu.endswith("no difference claimed")


def test_it_refuses_fewer_than_five_rounds():
    with pytest.raises(SystemExit):
        main(["certified", "--base", "HEAD~1", "--rounds", "4"])

"""Percent agreement, Wilson intervals and Cohen's kappa against hand-computed examples, degenerate ones included."""

import pytest

from grading.figures.agreement import agreement_of, wilson_interval

PF = ("pass", "fail")
PFU = ("pass", "fail", "unknown")


def test_a_two_by_two_table_matches_the_hand_computation():
    # machine pass: 20 agreed, 5 the person failed; machine fail: 10 the person passed, 15 agreed.
    a = agreement_of(PF, {("pass", "pass"): 20, ("pass", "fail"): 5, ("fail", "pass"): 10, ("fail", "fail"): 15})
    assert (a.n, a.agreed, a.percent) == (50, 35, pytest.approx(0.7))
    # po = .7; rows .5/.5, columns .6/.4; pe = .5; kappa = (.7 - .5) / .5 = .4
    assert a.kappa == pytest.approx(0.4)
    # Fleiss-Cohen-Everitt: (.02743 + .02547 - .0025) / (50 * .5**4) = .016128; se = .1270
    assert a.kappa_se == pytest.approx(0.12700, abs=5e-5)
    assert a.kappa_interval == pytest.approx((0.4 - 1.959964 * 0.127, 0.4 + 1.959964 * 0.127), abs=2e-4)
    # Wilson for 35 of 50: centre .68573, half-width .12323
    assert a.percent_interval == pytest.approx((0.562496, 0.808964), abs=1e-5)
    assert a.table == ((20, 5), (10, 15))


def test_three_classes_use_every_marginal():
    table = {("pass", "pass"): 10, ("pass", "fail"): 2, ("pass", "unknown"): 1, ("fail", "pass"): 3,
             ("fail", "fail"): 8, ("fail", "unknown"): 1, ("unknown", "pass"): 1, ("unknown", "fail"): 1,
             ("unknown", "unknown"): 3}  # fmt: skip
    a = agreement_of(PFU, table)
    # po = 21/30 = .7; pe = (13*14 + 12*11 + 5*5) / 900 = 339/900; kappa = (.7 - .37667) / .62333
    assert a.kappa == pytest.approx(0.518717, abs=1e-6)
    assert a.kappa_interval is not None and a.kappa_interval[0] < a.kappa < a.kappa_interval[1]


def test_no_pairs_give_no_figures():
    a = agreement_of(PF, {})
    assert (a.n, a.percent, a.percent_interval, a.kappa, a.kappa_interval) == (0, None, None, None, None)
    assert a.note == "no pairs yet"


def test_one_agreeing_pair_has_an_agreement_interval_but_kappa_is_undefined():
    a = agreement_of(PF, {("pass", "pass"): 1})
    assert (a.n, a.percent) == (1, 1.0)
    # Wilson for 1 of 1: centre (1 + z²/2) / (1 + z²) = .60327, half-width (z²/2) / (1 + z²) = .39673
    assert a.percent_interval == pytest.approx((0.206549, 1.0), abs=1e-5)
    assert a.kappa is None and "undefined" in a.note


def test_one_disagreeing_pair_gives_kappa_zero_and_no_interval():
    a = agreement_of(PF, {("pass", "fail"): 1})
    assert (a.percent, a.kappa, a.kappa_interval) == (0.0, 0.0, None)
    assert a.percent_interval == pytest.approx((0.0, 0.793451), abs=1e-5)
    assert a.note == "too few pairs for an interval"


def test_both_sides_in_one_class_leave_kappa_undefined():
    a = agreement_of(PF, {("fail", "fail"): 12})
    assert (a.percent, a.kappa) == (1.0, None)
    assert a.percent_interval[1] == 1.0 and a.percent_interval[0] == pytest.approx(0.757506, abs=1e-5)


def test_a_machine_that_always_says_pass_earns_kappa_zero_however_often_it_is_right():
    a = agreement_of(PF, {("pass", "pass"): 7, ("pass", "fail"): 3})
    # po = .7 = pe: no better than chance; the asymptotic variance is exactly 0 here, so no interval is made up.
    assert (a.percent, a.kappa, a.kappa_interval) == (pytest.approx(0.7), pytest.approx(0.0), None)
    assert a.note.startswith("no spread")


def test_verdicts_outside_the_categories_are_not_counted():
    a = agreement_of(PF, {("pass", "pass"): 2, ("unknown", "pass"): 5})
    assert a.n == 2


def test_the_wilson_interval_of_nothing_is_none():
    assert wilson_interval(0, 0) is None
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.277533), abs=1e-5)

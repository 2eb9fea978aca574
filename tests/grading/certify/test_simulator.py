"""The simulator: the certificate's guarantee and the PPI++ interval's coverage against populations whose truth is
known. The certificate's full run (1,000 draws per setting, the table in bench/README.md) is marked slow; a run of
100 draws checks the same in every setting at each commit. The interval's full run takes about two seconds."""

import pytest

from grading.certify.simulator import guarantee_rows, quality_rows

DELTA = 0.1


def _short_of_the_guarantee(rows) -> list:
    """The settings whose share of draws meeting the target falls short of 1-delta by more than three of the
    simulation's standard errors."""
    return [row for row in rows if row.guarantee_share < 1.0 - DELTA - 3 * row.standard_error]


def test_the_certificate_s_guarantee_holds_in_every_setting_over_a_hundred_draws():
    rows = guarantee_rows(targets=(0.80, 0.85, 0.90), sizes=(100, 250, 500), delta=DELTA, draws=100)

    assert len(rows) == 9
    assert _short_of_the_guarantee(rows) == []
    # the guarantee is not bought by abstaining always: with more labels the machine decides more
    for target in (0.80, 0.85, 0.90):
        coverages = [row.coverage for row in rows if row.target == target]
        assert 0.0 < coverages[0] < coverages[-1] < rows[0].best_coverage


def test_the_simulator_prints_the_same_table_every_run():
    once = guarantee_rows(targets=(0.9,), sizes=(100,), draws=20) + quality_rows(sizes=(100,), draws=5)
    again = guarantee_rows(targets=(0.9,), sizes=(100,), draws=20) + quality_rows(sizes=(100,), draws=5)

    assert once == again


@pytest.mark.slow
def test_the_certificate_s_guarantee_holds_in_every_setting_over_a_thousand_draws():
    rows = guarantee_rows(targets=(0.80, 0.85, 0.90), sizes=(100, 250, 500), delta=DELTA, draws=1_000)

    assert _short_of_the_guarantee(rows) == []


def test_the_ppi_interval_covers_the_true_pass_rate_in_every_setting_over_a_thousand_draws():
    rows = quality_rows(sizes=(100, 250, 500), alpha=0.05, draws=1_000)

    assert [row for row in rows if row.ppi_coverage < 0.95 - 3 * row.standard_error] == []
    for row in rows:
        assert row.judge_misses > 0.05  # while the judge's own count is off by about its bias
        assert row.ppi_width < row.people_width

"""How far people agree with each other: the arithmetic against tables worked by hand and against published values."""

from collections import Counter

import pytest

from grading.figures.agreement import weighted_kappa
from grading.figures.raters import (
    fleiss_kappa,
    jackknife_interval,
    krippendorff_alpha,
    people_agreement,
    score_agreement,
)

VERDICTS = ("pass", "fail", "unknown")


def histogram(*items: tuple[int, ...]) -> Counter:
    return Counter(items)


def from_ratings(rows: list[list[int | None]], categories: int) -> Counter:
    """Items as each rater's category (1-based; None: not rated) -> the histogram of their patterns."""
    patterns = Counter()
    for row in rows:
        given = [value for value in row if value is not None]
        patterns[tuple(given.count(c) for c in range(1, categories + 1))] += 1
    return patterns


def test_a_small_table_worked_by_hand():
    # Two people on four items: they agree on two passes and a fail, and split on the fourth.
    table = histogram((2, 0, 0), (2, 0, 0), (0, 2, 0), (1, 1, 0))
    # P = (1 + 1 + 1 + 0) / 4; shares pass 5/8, fail 3/8: Pe = 34/64; kappa = (3/4 - 34/64) / (30/64) = 7/15.
    assert fleiss_kappa(table) == pytest.approx(7 / 15)
    # Coincidences: pass-pass 4, fail-fail 2, pass-fail 1 and fail-pass 1; n = 8; alpha = 1 - 7 * 2 / (2 * 5 * 3).
    assert krippendorff_alpha(table) == pytest.approx(8 / 15)
    figures = people_agreement(VERDICTS, table)
    assert (figures.items, figures.answers, figures.unanimous, figures.percent) == (4, 8, 3, 0.75)


def test_items_with_one_answer_are_left_out_and_unequal_numbers_of_people_are_read():
    three_and_two = histogram((3, 0, 0), (2, 1, 0), (0, 2, 0))
    assert people_agreement(VERDICTS, three_and_two + histogram((1, 0, 0))).items == 3
    # P: 1, (2*1 + 0) / 6 = 1/3, 1 -> 7/9; shares pass 5/8, fail 3/8 -> Pe 34/64.
    assert fleiss_kappa(three_and_two) == pytest.approx((7 / 9 - 34 / 64) / (1 - 34 / 64))


def test_fleiss_1971_psychiatric_diagnoses_give_the_published_kappa():
    """Fleiss (1971), "Measuring nominal scale agreement among many raters", Psychological Bulletin 76(5), Table 1:
    30 patients, 6 psychiatrists each, 5 diagnoses; kappa = .430 (P = .556, Pe = .220)."""
    rows = [
        [4, 4, 4, 4, 4, 4], [2, 2, 2, 5, 5, 5], [2, 3, 3, 3, 3, 5], [5, 5, 5, 5, 5, 5], [2, 2, 2, 4, 4, 4],
        [1, 1, 3, 3, 3, 3], [3, 3, 3, 3, 5, 5], [1, 1, 3, 3, 3, 4], [1, 1, 4, 4, 4, 4], [5, 5, 5, 5, 5, 5],
        [1, 4, 4, 4, 4, 4], [1, 2, 4, 4, 4, 4], [2, 2, 2, 3, 3, 3], [1, 4, 4, 4, 4, 4], [2, 2, 4, 4, 4, 5],
        [3, 3, 3, 3, 3, 5], [1, 1, 1, 4, 5, 5], [1, 1, 1, 1, 1, 2], [2, 2, 4, 4, 4, 4], [1, 3, 3, 5, 5, 5],
        [5, 5, 5, 5, 5, 5], [2, 4, 4, 4, 4, 4], [2, 2, 4, 5, 5, 5], [1, 1, 4, 4, 4, 4], [1, 4, 4, 4, 4, 5],
        [2, 2, 2, 2, 2, 4], [1, 1, 1, 1, 5, 5], [2, 2, 4, 4, 4, 4], [1, 3, 3, 3, 3, 3], [5, 5, 5, 5, 5, 5],
    ]  # fmt: skip
    assert fleiss_kappa(from_ratings(rows, 5)) == pytest.approx(0.430, abs=0.0005)


def test_the_fourteen_raters_example_gives_its_published_kappa():
    """The worked example of Fleiss' kappa in Wikipedia (also statsmodels' test table): 10 items, 14 raters,
    5 categories; kappa = 0.210."""
    table = histogram(
        (0, 0, 0, 0, 14), (0, 2, 6, 4, 2), (0, 0, 3, 5, 6), (0, 3, 9, 2, 0), (2, 2, 8, 1, 1),
        (7, 7, 0, 0, 0), (3, 2, 6, 3, 0), (2, 5, 3, 2, 2), (6, 5, 2, 1, 0), (0, 2, 2, 3, 7),
    )  # fmt: skip
    assert fleiss_kappa(table) == pytest.approx(0.210, abs=0.0005)


def test_krippendorffs_example_with_missing_answers_gives_the_published_nominal_alpha():
    """Krippendorff (2011), "Computing Krippendorff's alpha-reliability", example C: 4 observers, 12 units, values
    1-5, some missing; nominal alpha = 0.743 (unit 12, with one value, is not pairable)."""
    observers = [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
        [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
    ]
    units = [list(values) for values in zip(*observers, strict=True)]
    assert krippendorff_alpha(from_ratings(units, 5)) == pytest.approx(0.743, abs=0.0005)


def test_krippendorffs_example_gives_the_published_ordinal_alpha_for_scores():
    """The same example read as scores 1-5 (Krippendorff 2011 gives ordinal alpha = 0.815 for it): a score check's
    people-against-people figure."""
    observers = [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
        [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
    ]
    units = [list(values) for values in zip(*observers, strict=True)]
    assert krippendorff_alpha(from_ratings(units, 5), level="ordinal") == pytest.approx(0.815, abs=0.0005)


def test_weighted_kappa_on_a_small_table_worked_by_hand():
    # Machine 1..5 once each against people 1, 3, 3, 3, 5: observed squared distance (0+1+0+1+0)/5 = 0.4, expected
    # (28+13+8+13+28)/25 = 3.6, so 1 - 0.4/3.6 = 8/9; the unknown is no score and is left out.
    figures = score_agreement(5, {("1", "1"): 1, ("2", "3"): 1, ("3", "3"): 1, ("4", "3"): 1, ("5", "5"): 1,
                                  ("unknown", "2"): 3})  # fmt: skip
    assert figures.n == 5 and figures.weighted_kappa == pytest.approx(8 / 9)
    assert weighted_kappa({(3, 3): 4}) is None  # every score the same: no disagreement to expect


def test_perfect_agreement_on_one_verdict_says_why_kappa_is_missing():
    figures = people_agreement(VERDICTS, histogram((2, 0, 0), (3, 0, 0)))
    assert (figures.percent, figures.fleiss_kappa, figures.alpha) == (1.0, None, None)
    assert "every answer was the same verdict" in figures.note
    assert people_agreement(VERDICTS, {}).note == "no item has answers from two people yet"


def test_the_jackknife_interval_holds_the_estimate_and_narrows_with_more_items():
    small = histogram((2, 0, 0), (2, 0, 0), (0, 2, 0), (1, 1, 0))
    large = Counter({pattern: 25 * n for pattern, n in small.items()})
    for statistic in (fleiss_kappa, krippendorff_alpha):
        low, high = jackknife_interval(small, statistic)
        assert low < statistic(small) < high
        wide_low, wide_high = low, high
        low, high = jackknife_interval(large, statistic)
        assert high - low < (wide_high - wide_low) / 3

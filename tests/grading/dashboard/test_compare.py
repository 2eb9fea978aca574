"""The comparison of two slices: each number equals a count of the reviews filed under each value, each interval
and test is the one its method gives for those counts, and what cannot be compared is refused naming why."""

import pytest

from grading.dashboard.compare import comparison, slices_checked
from grading.dashboard.figures import InvalidScope, scope_for
from grading.figures.agreement import wilson_interval
from grading.figures.difference import newcombe_interval, two_proportion_test
from grading.models import Review
from tests.builders.releases import build_releases

pytestmark = pytest.mark.django_db


@pytest.fixture
def compared(org, fake_llm):
    build_releases(org, fake_llm)
    scope = scope_for(org, since="2026-W48", until="2026-W48")
    return comparison(scope, slices_checked(scope, dimension="release", a="2.3", b="2.4"))


def _direct(org, release: str, check: str) -> dict:
    """One side of one row, counted from the reviews' own rows."""
    reviews = Review.objects.counting().filter(org=org, slice__contains={"release": release})
    verdicts = [review.checks[check]["verdict"] for review in reviews]
    return {answer: verdicts.count(answer) for answer in ("pass", "fail", "unknown")}


def test_it_counts_each_checks_answers_per_release_as_the_reviews_say(compared, org):
    rows = {row["check"]: row for row in compared["rows"]}
    assert list(rows)[0] == "pass_fail"  # the item as a whole first
    for check in ("grounded", "complete", "usable"):
        for side, release in (("a", "2.3"), ("b", "2.4")):
            direct = _direct(org, release, check)
            got = rows[check][side]
            assert (got["passed"], got["failed"], got["unknown"]) == (direct["pass"], direct["fail"], direct["unknown"])
            assert got["n"] == direct["pass"] + direct["fail"]
    assert (compared["a"]["reviews"], compared["b"]["reviews"]) == (10, 10)
    assert compared["criteria_version"] == 1


def test_the_rates_intervals_difference_and_test_are_those_of_the_counts(compared):
    grounded = next(row for row in compared["rows"] if row["check"] == "grounded")
    assert (grounded["a"]["passed"], grounded["a"]["n"], grounded["b"]["passed"], grounded["b"]["n"]) == (9, 10, 4, 10)
    assert grounded["a"]["rate"] == 0.9 and grounded["b"]["rate"] == 0.4
    assert grounded["a"]["interval"] == pytest.approx(list(wilson_interval(9, 10)))
    assert grounded["difference"] == pytest.approx(-0.5)
    assert grounded["interval"] == pytest.approx(list(newcombe_interval(9, 10, 4, 10)))
    z, p = two_proportion_test(9, 10, 4, 10)
    assert (grounded["z"], grounded["p_value"]) == pytest.approx((z, p))
    assert grounded["significant"] and grounded["interval"][1] < 0  # worse in 2.4, and the interval says so
    usable = next(row for row in compared["rows"] if row["check"] == "usable")
    assert usable["difference"] == 0 and usable["p_value"] is None and not usable["significant"]


def test_the_item_as_a_whole_keeps_its_unknowns_beside_the_rate(compared):
    whole = compared["rows"][0]
    assert (whole["a"]["passed"], whole["a"]["failed"], whole["a"]["unknown"]) == (8, 1, 1)
    # 2.4's last conversation fails grounded with complete unknown: held for people as unknown, not failed.
    assert (whole["b"]["passed"], whole["b"]["failed"], whole["b"]["unknown"]) == (3, 5, 2)
    assert whole["a"]["rate"] == pytest.approx(8 / 9) and whole["a"]["unknown_share"] == pytest.approx(0.1)


@pytest.mark.parametrize(
    ("asked", "field"),
    [
        ({"dimension": "tier", "a": "1", "b": "2"}, "dimension"),
        ({"dimension": "release", "a": "", "b": "2.4"}, "a"),
        ({"dimension": "release", "a": "2.4", "b": "2.4"}, "b"),
        ({"dimension": "release", "a": "2.3", "b": "bad\x00value"}, "b"),
        ({"dimension": "release", "a": "x" * 201, "b": "2.4"}, "a"),
    ],
)
def test_a_comparison_that_cannot_be_made_is_refused_naming_the_parameter(org, asked, field):
    org.dimensions = ["release"]
    scope = scope_for(org)
    with pytest.raises(InvalidScope) as refused:
        slices_checked(scope, **asked)
    assert refused.value.field == field

"""Every dashboard figure is one row of grading/figures/definitions.py's table, read three ways: what a review adds in
Python (the upkeep of every write), the hourly rebuild's GROUP BY in SQL, and the reviews behind a number (the
dashboard's lists). On generated reviews the three agree, counter by counter; a form that drifts fails here,
naming the counter."""

from collections import defaultdict
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from grading.checks.definitions import CONVERSATION_DEFAULTS
from grading.figures.definitions import (
    PASS_FAIL,
    SCORED,
    counted_in,
    machine_said,
    machine_verdict,
    review_row,
)
from grading.figures.expressions import Lit
from grading.models import ItemKind, Review, ReviewState, Route
from grading.reviews.rollups import _FIELDS, ERASED, THUMBS, _contributions_of, live_counters, thumbs_of
from tests.builders.figure_reviews import edge_draft, reviews, write_reviews

CHECKS = CONVERSATION_DEFAULTS.keys  # what a version asks that names no checks of its own

# A draft two people approved alike, decided by their answers; and one whose decider's account is gone.
AGREED = edge_draft(decision=("approve", {}, timedelta(seconds=300), "agreed"), answers=(2, [("approve", {})] * 2))
FORMER = edge_draft(decision=("reject", {}, timedelta(seconds=300), "former"))

pytestmark = pytest.mark.django_db
EXAMPLES = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
# The counters whose reviews a number's link lists (every other metric is a sum or a histogram of them).
LISTED = (
    "check", "finding", "repaired_pass", "decision", "decided_by", "agree_audit", "agree_unsure", "agree_label",
    "people_label", "people_split", "agree_people", "people_audit", "people_unsure", "people_split_audit",
    "people_split_unsure", "agree_people_audit", "agree_people_unsure", "people_pair_audit", "people_pair_unsure",
    "decided_due",
)  # fmt: skip


def _differences(python: dict, sql: dict) -> list[str]:
    keys = sorted(set(python) | set(sql), key=repr)
    return [
        f"{key}: python {python.get(key, 0)}, sql {sql.get(key, 0)}"
        for key in keys
        if python.get(key, 0) != sql.get(key, 0)
    ]


def _in_example(org, specs, test) -> None:
    """Write the example's reviews, run `test` on them, and leave nothing behind for the next example."""
    person = get_user_model().objects.get_or_create(username="decider")[0]
    with transaction.atomic():
        written = write_reviews(org, specs, person)
        try:
            test(written)
        finally:
            transaction.set_rollback(True)


@EXAMPLES
@given(specs=st.lists(reviews, min_size=1, max_size=6))
@example(specs=[edge_draft(), edge_draft(kind=ItemKind.CONVERSATION, route=Route.PASS, audit=False)])
@example(
    specs=[edge_draft(labels=[("pass_fail", "fail", True), ("pass_fail", "pass", True), ("pass_fail", "fail", False)])]
)
@example(specs=[AGREED, FORMER])
def test_the_rebuilds_sql_counts_what_the_python_form_counts(org, specs):
    def check(written: list[Review]) -> None:
        # Every review of the example's items: an earlier one's decision counts too (`ReviewSpec.audited_before`).
        python = _contributions_of(list(Review.objects.filter(org=org).values_list("pk", flat=True)))
        for review in written:
            if review.conversation_id:
                python.update(thumbs_of(review.conversation_id))
        python = {key: value for key, value in python.items() if value}
        sql = live_counters(org_ids=[org.pk])
        assert not _differences(python, sql), "\n".join(_differences(python, sql))
        # An incremental rebuild's recount of a week: that week's counters, from the reviews filed, judged or
        # decided in it, and every week's thumbs and erased items.
        weeks = sorted({key[4] for key in sql})
        for week in {*weeks[:1], *weeks[-1:]}:  # none when the example counts nowhere (a review superseded)
            of_week = {key: value for key, value in sql.items() if key[4] == week or key[5] in (THUMBS, ERASED)}
            assert live_counters(org_ids=[org.pk], weeks=[week]) == of_week

    _in_example(org, specs, check)


@EXAMPLES
@given(specs=st.lists(reviews, min_size=1, max_size=4))
@example(specs=[edge_draft(labels=[("pass_fail", "fail", True), ("pass_fail", "pass", True)])])
@example(specs=[AGREED, FORMER])
def test_the_reviews_behind_a_counter_are_the_ones_that_add_to_it(org, specs):
    def check(written: list[Review]) -> None:
        behind: dict[tuple[str, str, str], set[int]] = defaultdict(set)
        for review in written:
            for key in _contributions_of([review.pk]):
                if key[5] in LISTED and not key[8]:  # the whole cell's (a slice's are its reviews filed so)
                    behind[key[5:8]].add(review.pk)
        mine = Review.objects.filter(pk__in=[review.pk for review in written])
        for (metric, key1, key2), expected in behind.items():
            listed = set(mine.filter(counted_in(metric, key1, key2)).values_list("pk", flat=True))
            assert listed == expected, (metric, key1, key2)
            if metric.startswith("agree_"):
                machine, _, human = key2.partition(">")
                for pair in ((machine, None), (None, human)):
                    wanted = {pk for (m, k1, k2), pks in behind.items() if (m, k1) == (metric, key1)
                              and all(s is None or s == got for s, got in zip(pair, k2.split(">"), strict=True))
                              for pk in pks}  # fmt: skip
                    assert set(mine.filter(counted_in(metric, key1, pair=pair)).values_list("pk", flat=True)) == wanted
        for metric in LISTED:  # and nothing is listed under a counter no review adds to
            listed = set(mine.filter(counted_in(metric)).values_list("pk", flat=True))
            assert listed == {pk for key, pks in behind.items() if key[0] == metric for pk in pks}, metric

    _in_example(org, specs, check)


@EXAMPLES
@given(specs=st.lists(reviews, min_size=1, max_size=4))
def test_what_the_machine_said_reads_the_same_in_both_forms(org, specs):
    def check(written: list[Review]) -> None:
        rows = {}
        for row in Review.objects.filter(pk__in=[r.pk for r in written]).values(*_FIELDS):
            rows[row["id"]] = review_row(row)
        for name in (*CHECKS, PASS_FAIL):
            verdicts = defaultdict(set)
            for pk, row in rows.items():
                if SCORED.py(row) and row["state"] != ReviewState.TRIAL:  # trial reviews are behind no number
                    verdicts[machine_verdict(Lit(name)).py(row)].add(pk)
            for verdict in ("pass", "fail", "unknown"):
                listed = set(
                    Review.objects.filter(pk__in=rows).filter(machine_said(name, verdict)).values_list("pk", flat=True)
                )
                assert listed == verdicts[verdict], (name, verdict)

    _in_example(org, specs, check)


def test_a_metric_no_figure_counts_is_an_error():
    with pytest.raises(ValueError, match="no figure counts"):
        counted_in("nonsense")

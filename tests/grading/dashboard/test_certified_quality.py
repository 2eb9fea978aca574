"""The dashboard's quality rate with an honest interval: the judge's pass probabilities on every item of the scope,
corrected by people's verdicts on the blind audit sample (PPI++), and what certificates decided in the latest week."""

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from ppi_py import classical_mean_ci, ppi_mean_ci, ppi_mean_pointestimate

from grading.core.outcomes import BAND, BELOW_CERTIFIED
from grading.core.weeks import monday, weeks_before
from grading.dashboard.certified import certified_figures
from grading.dashboard.figures import scope_for
from grading.figures.definitions import CERTIFIED, ITEMS, PASSED
from grading.figures.expressions import fixed_point
from grading.models import Certificate, ItemKind, Label, Review, ReviewState, Rollup, Route
from grading.reviews.rollups import live_counters, stored_counters
from grading.reviews.services import (
    PersonVerdict,
    ReviewOutcome,
    ScoreIdentity,
    decision_record,
    review_audit_mark,
    review_record,
)
from grading.reviews.versions import criteria_active
from tests.builders.certified import (
    JUDGE_KEY,
    Graded,
    audit_decided,
    counted,
    filed_in,
    graded_drafts,
    reviews_of,
)
from tests.builders.own_checks import answered, asking, decided
from tests.builders.queue_items import JUDGE

pytestmark = pytest.mark.django_db

THIS_WEEK = monday(timezone.now())


def drafts_in_scope(org, graded: list[Graded]) -> list[Review]:
    reviews = reviews_of(graded_drafts(org, graded))
    filed_in(reviews, THIS_WEEK)
    return reviews


def test_it_gives_the_ppi_interval_ppi_py_gives_on_the_same_rows(org, operator):
    judged = [Graded(0.9, True, None), Graded(0.7, True, None), Graded(0.8, False, None), Graded(None, True, None)]
    reviews = drafts_in_scope(org, judged * 10)
    people = [True, True, False, True, False, True, True, False, True, True, True, False]
    audit_decided(reviews[: len(people)], people, operator)

    counted(org)  # the grading write's pass probabilities and counters, for rows written straight
    figures = certified_figures(scope_for(org))[ItemKind.DRAFT]

    predicted = np.array([0.9, 0.7, 0.2, 1.0] * 10)  # a draft's pass probability: its confidence turned to a pass
    y = np.array(people, dtype=float)
    labelled, unlabelled = predicted[: len(people)], predicted[len(people) :]
    low, high = (float(np.ravel(b)[0]) for b in ppi_mean_ci(y, labelled, unlabelled, alpha=0.05))
    people_low, people_high = (float(b) for b in np.ravel(classical_mean_ci(y, alpha=0.05)))
    interval = figures["interval"]
    assert (figures["items"], figures["audited"]) == (40, 12)
    assert figures["judge_rate"] == pytest.approx(predicted.mean())
    assert (interval["low"], interval["high"]) == (pytest.approx(max(0, low)), pytest.approx(min(1, high)))
    assert (interval["people_low"], interval["people_high"]) == (
        pytest.approx(max(0, people_low)),
        pytest.approx(min(1, people_high)),
    )
    assert interval["effective_gain"] == pytest.approx(((people_high - people_low) / (high - low)) ** 2)


def test_a_conversation_passes_for_the_judge_by_the_product_of_its_required_checks(org, operator):
    asking(criteria_active(org=org, kind=ItemKind.CONVERSATION))  # grounded and cites_policy are required
    said = {
        "c1": ({"grounded": "pass", "cites_policy": "pass"}, {"grounded": 0.9, "cites_policy": 0.8}),
        "c2": ({"grounded": "fail", "cites_policy": "pass"}, {"grounded": 0.7, "cites_policy": 0.9}),
        "c3": ({"grounded": "unknown", "cites_policy": "pass"}, {}),
        "c4": ({"grounded": "pass", "cites_policy": "pass"}, {"grounded": 0.6, "cites_policy": 0.95}),
        "c5": ({"grounded": "pass", "cites_policy": "fail"}, {}),
    }
    reviews = {}
    for name, (answers, confidences) in said.items():
        reviews[name] = answered(org, name, answers)
        Review.objects.filter(pk=reviews[name].pk).update(confidences=confidences)
    filed_in(reviews.values(), THIS_WEEK)
    decided(reviews["c1"], operator, {"grounded": "pass", "cites_policy": "pass"})
    decided(reviews["c2"], operator, {"grounded": "fail", "cites_policy": "pass"})
    decided(reviews["c3"], operator, {"grounded": "pass", "cites_policy": "unknown"})  # unknown: not a pass

    counted(org)  # the grading write's pass probabilities and counters, for rows written straight
    figures = certified_figures(scope_for(org))[ItemKind.CONVERSATION]

    y, labelled, unlabelled = np.array([1.0, 0.0, 0.0]), np.array([0.72, 0.27, 0.5]), np.array([0.57, 0.0])
    low, high = (float(np.ravel(b)[0]) for b in ppi_mean_ci(y, labelled, unlabelled, alpha=0.05))
    assert figures["judge_rate"] == pytest.approx((0.72 + 0.27 + 0.5 + 0.57) / 5)
    assert (figures["interval"]["low"], figures["interval"]["high"]) == (
        pytest.approx(max(0, low)),
        pytest.approx(min(1, high)),
    )


def test_an_audited_item_stands_for_the_items_of_its_week_and_a_week_not_audited_is_left_out(org, operator):
    busy = drafts_in_scope(org, [Graded(0.9, True, None), Graded(0.8, True, None)] * 20)  # 4 audited of 40
    quiet = drafts_in_scope(org, [Graded(0.9, True, None), Graded(0.7, True, None)] * 4)  # 4 audited of 8
    unaudited = drafts_in_scope(org, [Graded(0.6, True, None)] * 6)
    filed_in(quiet, weeks_before(THIS_WEEK, 1))
    filed_in(unaudited, weeks_before(THIS_WEEK, 2))
    audit_decided(busy[:4], [True] * 4, operator)
    audit_decided(quiet[:4], [False] * 4, operator)  # people fail the quiet week's items the judge passed

    counted(org)  # the grading write's pass probabilities and counters, for rows written straight
    figures = certified_figures(scope_for(org))[ItemKind.DRAFT]

    y = np.array([1.0] * 4 + [0.0] * 4)
    labelled = np.array([0.9, 0.8] * 2 + [0.9, 0.7] * 2)
    unlabelled = np.array([0.9, 0.8] * 18 + [0.9, 0.7] * 2)
    weights = {"w": np.array([40 / 4] * 4 + [8 / 4] * 4), "w_unlabeled": np.array([40 / 36] * 36 + [8 / 4] * 4)}
    low, high = (float(np.ravel(b)[0]) for b in ppi_mean_ci(y, labelled, unlabelled, alpha=0.05, **weights))
    estimate = float(np.ravel(ppi_mean_pointestimate(y, labelled, unlabelled, **weights))[0])
    interval = figures["interval"]
    assert (figures["items"], figures["reached"], figures["audited"]) == (54, 48, 8)
    assert (interval["low"], interval["high"], interval["estimate"]) == (
        pytest.approx(max(0, low)),
        pytest.approx(min(1, high)),
        pytest.approx(estimate),
    )
    # Unweighted, the quiet week's 8 items would count as much as the busy week's 40.
    unweighted = float(np.ravel(ppi_mean_pointestimate(y, labelled, unlabelled))[0])
    assert unweighted < 0.6 < 0.75 < interval["estimate"]


def test_people_s_audit_verdict_is_on_the_evidence_a_re_grade_reads_as_the_rebuild_counts_it(org, operator):
    """An audit decision is about the evidence, not the one review decided: a re-grade of the same evidence carries
    it, and so does a decision written before its review was marked for the audit; a review of evidence the item
    moved on from counts nothing. The writes book each as the hourly rebuild recounts it."""
    drafts = graded_drafts(org, [Graded(0.9, True, None)] * 4, label=False)
    regraded, marked_late, *_ = reviews = reviews_of(drafts)
    filed_in(reviews, THIS_WEEK)
    Review.objects.filter(pk=marked_late.pk).update(route=Route.HUMAN, state=ReviewState.WAITING)
    counted(org)  # the grading write's pass probabilities and counters, for rows written straight

    review_audit_mark(review_ids=[regraded.pk])
    decision_record(
        review_id=regraded.pk, decided_by=operator, decided_at=timezone.now(), verdict=PersonVerdict(outcome="approve")
    )
    identity = ScoreIdentity(
        fingerprint=drafts[0].fingerprint, criteria_version=regraded.criteria_version, judge=JUDGE, judge_key="again"
    )
    again = review_record(
        subject=drafts[0],
        identity=identity,
        outcome=ReviewOutcome(route=Route.FAIL, judge_passed=False, confidences={Label.PASS_FAIL: 0.8}),
        started_at=timezone.now(),
    )
    decision_record(
        review_id=marked_late.pk,
        decided_by=operator,
        decided_at=timezone.now(),
        verdict=PersonVerdict(outcome="reject", note="no"),
    )
    review_audit_mark(review_ids=[marked_late.pk])

    assert stored_counters(org_ids=[org.pk]) == live_counters(org_ids=[org.pk])
    figures = certified_figures(scope_for(org))[ItemKind.DRAFT]
    assert (figures["items"], figures["audited"]) == (4, 2)
    passed = Rollup.objects.filter(org=org, metric=CERTIFIED, key2=PASSED, slice="")
    assert dict(passed.values_list("key1", "value")) == {ITEMS: 1, "q": fixed_point(again.pass_probability)}


def test_the_panel_reads_its_counters_only_however_many_items_were_audited(org, operator):
    reviews = drafts_in_scope(org, [Graded(0.9, True, None)] * 30)
    scope = scope_for(org)
    read = []
    for audited in (reviews[:2], reviews[2:20]):
        audit_decided(audited, [True, False] * (len(audited) // 2), operator)
        counted(org)  # the grading write's pass probabilities and counters, for rows written straight
        with CaptureQueriesContext(connection) as queries:
            figures = certified_figures(scope)[ItemKind.DRAFT]
        read.append((figures["audited"], [query["sql"] for query in queries]))
    (few, few_sql), (many, many_sql) = read
    assert (few, many) == (2, 20)
    assert len(few_sql) == len(many_sql) <= 2  # the active versions, the counters
    assert not [sql for sql in many_sql if "grading_decision" in sql or "grading_review" in sql]


def test_fewer_than_two_audited_items_give_no_interval(org, operator):
    reviews = drafts_in_scope(org, [Graded(0.9, True, None)] * 5)
    audit_decided(reviews[:1], [True], operator)
    counted(org)  # the grading write's pass probabilities and counters, for rows written straight
    figures = certified_figures(scope_for(org))[ItemKind.DRAFT]
    assert (figures["audited"], figures["interval"], figures["judge_rate"]) == (1, None, pytest.approx(0.9))


def test_it_counts_the_latest_weeks_items_decided_under_a_certificate_and_sent_to_people(org):
    version = criteria_active(org=org, kind=ItemKind.DRAFT)
    certificate = Certificate.objects.create(
        org=org, criteria_version=version, judge_key=JUDGE_KEY, agreement=0.9, confidence=0.9,
        checks={Label.PASS_FAIL: {"threshold": 0.9}}, labels=40, computed_at=timezone.now(),
    )  # fmt: skip
    reviews = drafts_in_scope(org, [Graded(0.95, n % 2 == 0, None) for n in range(12)])
    Review.objects.filter(pk__in=[r.pk for r in reviews[:5]]).update(certificate=certificate)
    Review.objects.filter(pk__in=[r.pk for r in reviews[5:8]]).update(route=Route.HUMAN, reason=BELOW_CERTIFIED)
    Review.objects.filter(pk=reviews[8].pk).update(route=Route.HUMAN, reason=BAND)
    earlier = weeks_before(THIS_WEEK, 1)
    filed_in(reviews[:2], earlier)  # decided under the certificate, in a week before the latest

    counted(org)  # the grading write's pass probabilities and counters, for rows written straight
    figures = certified_figures(scope_for(org))[ItemKind.DRAFT]

    latest = Review.objects.counting().filter(org=org, kind=ItemKind.DRAFT, week=THIS_WEEK)
    assert figures["decided_alone_under_certificate"] == latest.filter(certificate__isnull=False).count() == 3
    assert figures["to_people"] == latest.filter(route=Route.HUMAN).count() == 4
    assert figures["below_certified"] == latest.filter(reason=BELOW_CERTIFIED).count() == 3


def test_it_gives_what_ppi_py_gives_on_each_item_weighted_by_its_application_s_week(org, operator):
    asking(criteria_active(org=org, kind=ItemKind.CONVERSATION))  # grounded and cites_policy are required
    said = [("pass", "pass"), ("fail", "pass"), ("pass", "unknown"), ("pass", "fail"), ("pass", "pass")]
    confidences = [{"grounded": 0.9, "cites_policy": 0.8}, {"grounded": 0.7}, {}, {"cites_policy": 0.65}]
    cells: dict[tuple[str, int], list[tuple[float, float | None]]] = {}  # per cell: (p, y or None) of each item
    for n in range(24):
        application, weeks_back = ("billing", "onboarding")[n % 2], n // 12
        grounded, cites = said[n % 5]
        conf = confidences[n % 4]
        review = answered(org, f"c{n}", {"grounded": grounded, "cites_policy": cites})
        Review.objects.filter(pk=review.pk).update(
            confidences=conf, application=application, week=weeks_before(THIS_WEEK, weeks_back)
        )
        p = 1.0
        for key, answer in (("grounded", grounded), ("cites_policy", cites)):
            sure = conf.get(key, 1.0)
            p *= {"pass": sure, "fail": 1.0 - sure}.get(answer, 0.5)
        y = None
        if n % 12 < 2 + 2 * (n % 2) + weeks_back:  # audited: 2 to 5 of each cell's 6, so the weights differ
            people = ("pass", "pass") if n % 3 else ("fail", "pass")
            decided(review, operator, dict(zip(("grounded", "cites_policy"), people, strict=True)))
            y = 1.0 if people == ("pass", "pass") else 0.0
        cells.setdefault((application, weeks_back), []).append((p, y))

    counted(org)  # the grading write's pass probabilities and counters, for rows written straight
    figures = certified_figures(scope_for(org))[ItemKind.CONVERSATION]

    labelled = [(p, y, len(items) / sum(y is not None for _, y in items)) for items in cells.values()
                for p, y in items if y is not None]  # fmt: skip
    unlabelled = [(p, len(items) / sum(y is None for _, y in items)) for items in cells.values()
                  for p, y in items if y is None]  # fmt: skip
    y, yhat, w = (np.array(column) for column in zip(*[(y, p, w) for p, y, w in labelled], strict=True))
    unlabelled_p, unlabelled_w = (np.array(column) for column in zip(*unlabelled, strict=True))
    weights = {"w": w, "w_unlabeled": unlabelled_w}
    low, high = (float(np.ravel(b)[0]) for b in ppi_mean_ci(y, yhat, unlabelled_p, alpha=0.05, **weights))
    estimate = float(np.ravel(ppi_mean_pointestimate(y, yhat, unlabelled_p, **weights))[0])
    people_low, people_high = (float(b) for b in np.ravel(classical_mean_ci(y, w=w, alpha=0.05)))
    every = [p for items in cells.values() for p, _ in items]
    exactly = {"rel": 0, "abs": 1e-9}
    interval = figures["interval"]
    assert (figures["items"], figures["reached"], figures["audited"]) == (24, 24, len(y))
    assert (figures["judge_rate"], interval["judge_rate"]) == pytest.approx((np.mean(every),) * 2, **exactly)
    assert (interval["low"], interval["high"], interval["estimate"]) == (
        pytest.approx(max(0.0, low), **exactly),
        pytest.approx(min(1.0, high), **exactly),
        pytest.approx(estimate, **exactly),
    )
    assert (interval["people_low"], interval["people_high"]) == (
        pytest.approx(max(0.0, people_low), **exactly),
        pytest.approx(min(1.0, people_high), **exactly),
    )
    gain = ((people_high - people_low) / (high - low)) ** 2
    assert interval["effective_gain"] == pytest.approx(gain, **exactly)

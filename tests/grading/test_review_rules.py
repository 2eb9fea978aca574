"""The review rules grading/models/reviews.py keeps in two forms, one for a review in hand and one for a query, read the
same on every combination: the state a review reads as now. Whether a person may be asked about a review has one form,
asked of the row in hand. The ISO week (grading/core/weeks.py) likewise, in Python and in SQL, a second either side of
a week's end. And the one rule of when a review is overdue, on every combination."""

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.db import connection
from django.utils import timezone

from grading.core.weeks import monday, monday_sql
from grading.models import CriteriaVersion, ItemKind, Review, ReviewState, Route, for_people, state_now
from grading.models.reach import Reach
from grading.reviews.versions import criteria_active
from reviewer.queue.reads import review_for_operator
from tests.builders.figure_reviews import WEEK_END

pytestmark = pytest.mark.django_db


def _reviews(org) -> list[Review]:
    active = criteria_active(org=org, kind=ItemKind.DRAFT)
    retired = CriteriaVersion.objects.create(
        org=org, kind=ItemKind.DRAFT, number=active.number + 1, rubric="r", published_at=timezone.now()
    )
    made = []
    combinations = itertools.product(ReviewState.values, Route.values, (False, True), (active, retired))
    for n, (state, route, audit, version) in enumerate(combinations):
        draft = org.drafts.create(external_id=f"d{n}", title="t", slug=f"d{n}", body="b", fingerprint=f"fp1:{n}")
        made.append(
            Review.objects.create(
                org=org,
                kind=ItemKind.DRAFT,
                draft=draft,
                fingerprint=f"fp1:{n}",
                criteria_version=version,
                judge={},
                judge_key="j",
                started_at=WEEK_END,
                finished_at=WEEK_END,
                route=route,
                state=state,
                audit=audit,
            )  # fmt: skip
        )
    return made


def test_the_state_a_review_reads_as_now_is_the_same_in_python_and_in_the_query(org):
    made = _reviews(org)
    read = {review.pk: review.state_now for review in Review.objects.with_state().filter(org=org)}
    for review in made:
        expected = state_now(review.state, criteria_active=review.criteria_version.is_active)
        assert read[review.pk] == expected, (review.state, review.criteria_version.is_active)
        assert Review.objects.filter(pk=review.pk).in_state(ReviewState(expected)).exists()


def test_a_person_is_asked_only_about_reviews_routed_to_people_or_in_the_audit_sample(org):
    """`for_people`, the one form: every reader looks a review up by its id and asks it of the row in hand."""
    made = _reviews(org)
    opened = {review.pk for review in made if review_for_operator(reaches=[Reach(org.pk)], review_id=review.pk)}
    assert opened == {review.pk for review in made if review.route == Route.HUMAN or review.audit}
    assert opened == {
        review.pk for review in made if for_people(route=review.route, audit=review.audit, sent=review.sent)
    }


def test_a_review_is_overdue_from_its_due_time_only_while_it_waits_under_the_active_criteria(org):
    made = _reviews(org)
    for review in made[::3]:  # of every state, route and version
        review.due_at = WEEK_END
    Review.objects.bulk_update(made, ["due_at"])
    for at in (WEEK_END - timedelta(microseconds=1), WEEK_END):
        expected = {
            review.pk
            for review in made
            if review.due_at is not None
            and review.due_at <= at
            and state_now(review.state, criteria_active=review.criteria_version.is_active) == ReviewState.WAITING
        }
        assert set(Review.objects.filter(org=org).overdue(at).values_list("pk", flat=True)) == expected
    assert expected  # at the due time: the waiting ones of the active version, stale and decided ones never


def test_a_week_is_the_same_iso_week_in_python_and_in_sql():
    moments = [WEEK_END + timedelta(seconds=s) for s in (-86400 * 6, -1, 0, 1, 86400 * 3)]
    moments.append(datetime(2026, 11, 23, 0, 30, tzinfo=ZoneInfo("Europe/Berlin")))  # still Sunday in UTC
    moments.append(datetime(2027, 1, 1, 12, tzinfo=UTC))  # ISO week 53 of 2026
    with connection.cursor() as cursor:
        for moment in moments:
            cursor.execute(f"SELECT {monday_sql('%s::timestamptz')}", [moment])  # noqa: S608 - our SQL
            assert cursor.fetchone()[0] == monday(moment), moment

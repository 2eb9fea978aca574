"""The judge's probability that an item passes is stored on its review when the review is written, as the certified
panel computed it on every review of its scope before (the expression the migration fills older reviews with), and
the panel's counters of it are booked by the write as the hourly rebuild recounts them, and by the migration after
for the reviews graded before it."""

from collections.abc import Callable, Iterator
from functools import partial
from importlib import import_module

import psycopg
import pytest
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.migrations.recorder import MigrationRecorder
from django.db.models import F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grading import tasks
from grading.conversations.grader import conversation_grade
from grading.dashboard.certified import certified_figures
from grading.dashboard.figures import scope_for
from grading.figures.definitions import CERTIFIED, ITEMS
from grading.judge.pass_probability import review_pass_probability
from grading.models import CriteriaVersion, ItemKind, Review, Rollup, RollupRebuild
from grading.reviews.rollups import live_counters, rollup_last_rebuild, rollups_rebuild, stored_counters
from grading.reviews.services import pass_probabilities_backfill
from tests.builders.conversations import PATH_IDS, support_conversation, upsert, verdicts
from tests.builders.database import (
    migration_recorded,
    someone_waits_for_a_lock,
    started_on_a_connection_of_its_own,
)
from tests.builders.figure_reviews import WEEK_END, reviews, write_reviews
from tests.builders.judges import configure_judges, judge_config
from tests.builders.processes import wait_until
from tests.builders.rebuilds import while_a_rebuild_counts
from tests.fakes.openai_server import json_reply

pytestmark = pytest.mark.django_db
FILL = import_module("grading.migrations.0044_review_pass_probability").pass_probabilities_fill
# 0045's recount of the certified metric as it stood; 0046 recounts it with people's audit verdicts, as it stands.
COUNTERS = import_module("grading.migrations.0046_certified_audit_counters").CERTIFIED_COUNTERS


def _filled_by_the_migration(review_ids: list[int]) -> dict[int, float | None]:
    Review.objects.filter(pk__in=review_ids).update(pass_probability=None)
    FILL(CriteriaVersion, Review)
    return dict(Review.objects.filter(pk__in=review_ids).values_list("pk", "pass_probability"))


def _counted_by_the_migration() -> None:
    with transaction.atomic(), connection.cursor() as cursor:  # as the migration runs: in one transaction
        for statement in COUNTERS:
            cursor.execute(statement)


def _certified(counters: dict) -> dict:
    return {key: value for key, value in counters.items() if key[5] == CERTIFIED}


def test_a_graded_conversation_stores_what_the_panel_computed_and_books_its_counters(org, settings, fake_llm):
    configure_judges(settings, default=judge_config(fake_llm))
    alternatives = {"grounded": {"pass": 0.8, "fail": 0.2}, "complete": {"fail": 0.7, "pass": 0.3}}
    fake_llm.script(json_reply(verdicts(PATH_IDS, complete="fail"), verdict_logprobs=alternatives))

    review = conversation_grade(conversation_id=upsert(org, support_conversation()).conversation.pk)

    stored = Review.objects.get(pk=review.pk).pass_probability
    assert stored == pytest.approx(0.8 * (1 - 0.7))  # grounded passes at 0.8, complete fails at 0.7, usable sure
    counters = _certified(stored_counters(org_ids=[org.pk]))
    assert counters and counters == _certified(live_counters(org_ids=[org.pk]))
    assert _filled_by_the_migration([review.pk]) == {review.pk: stored}


def test_the_migration_fills_a_product_too_small_for_a_float_as_the_grading_does(org, settings, fake_llm):
    """Two answers the judge gave at the smallest float's confidence: their product rounds to zero. PostgreSQL
    refuses such a product where Python gives 0.0, and the upgrade failed on it."""
    configure_judges(settings, default=judge_config(fake_llm))
    fake_llm.script(json_reply(verdicts(PATH_IDS)))
    review = conversation_grade(conversation_id=upsert(org, support_conversation()).conversation.pk)
    Review.objects.filter(pk=review.pk).update(confidences={"grounded": 5e-324, "complete": 5e-324})

    assert _filled_by_the_migration([review.pk]) == {review.pk: 0.0}


@pytest.mark.django_db(transaction=True)  # the hourly rebuild reads what was committed since the last one
def test_after_the_upgrade_the_panel_counts_the_reviews_graded_before_it_and_the_hourly_rebuild_finds_no_drift(
    org, settings, fake_llm
):
    configure_judges(settings, default=judge_config(fake_llm))
    fake_llm.script(json_reply(verdicts(PATH_IDS)))
    review = conversation_grade(conversation_id=upsert(org, support_conversation()).conversation.pk)
    rollups_rebuild(org_id=org.pk)  # a full rebuild on record, as on every install an hour old
    last_check = rollup_last_rebuild(org)
    Rollup.objects.filter(org=org, metric=CERTIFIED).delete()  # as before the upgrade: no such counters
    Review.objects.filter(pk=review.pk).update(pass_probability=None)

    FILL(CriteriaVersion, Review)
    _counted_by_the_migration()

    counters = _certified(stored_counters(org_ids=[org.pk]))
    assert counters and counters == _certified(live_counters(org_ids=[org.pk]))
    assert certified_figures(scope_for(org))[ItemKind.CONVERSATION]["items"] == 1
    assert rollup_last_rebuild(org) == last_check  # the staleness card's last check stays
    hourly = rollups_rebuild(org_id=org.pk, incremental=True)
    assert Review.objects.get(pk=review.pk).week.isoformat() in hourly.weeks  # it recounted the migrated week
    assert hourly.drifted == 0
    assert rollups_rebuild(org_id=org.pk).drifted == 0  # nor the daily full one


@pytest.fixture
def graded_before_the_upgrade(org, settings, fake_llm) -> None:
    """A graded conversation, its counters booked but the certified panel's, which the migration recounts."""
    configure_judges(settings, default=judge_config(fake_llm))
    fake_llm.script(json_reply(verdicts(PATH_IDS)))
    conversation_grade(conversation_id=upsert(org, support_conversation()).conversation.pk)
    rollups_rebuild(org_id=org.pk)
    Rollup.objects.filter(org=org, metric=CERTIFIED).delete()


@pytest.fixture
def migration_recorded_again() -> Iterator[Callable[..., None]]:
    """Record 0046 as applied once more, as `migrate` does in the migration's transaction (on the connection given,
    else the test's); the record is taken out after the test, since the suite's database outlives it."""
    recorded = MigrationRecorder.Migration.objects.latest("pk").pk
    yield partial(migration_recorded, "grading", "0046_certified_audit_counters")
    MigrationRecorder.Migration.objects.filter(pk__gt=recorded).delete()


@pytest.mark.django_db(transaction=True)  # the migration runs on a connection of its own
def test_a_rebuild_that_counted_before_the_migration_replaced_the_counters_books_nothing(
    org, graded_before_the_upgrade, migration_recorded_again, monkeypatch
):
    """It would add the drift it saw on top of the recount: the recount replaces counters, a rebuild books
    increments. A worker restarted on the new release before the migration ran could do that."""

    def applied_by_migrate() -> None:  # its statements and its record, in one transaction
        with transaction.atomic():
            _counted_by_the_migration()
            migration_recorded_again()

    while_a_rebuild_counts(monkeypatch, applied_by_migrate)

    assert rollups_rebuild(org_id=org.pk) is None
    counters = _certified(stored_counters(org_ids=[org.pk]))
    assert counters and counters == _certified(live_counters(org_ids=[org.pk]))


@pytest.mark.django_db(transaction=True)  # the migration and the rebuild run on connections of their own
def test_a_rebuild_that_books_while_the_migration_runs_waits_for_it_then_books_nothing(
    org, graded_before_the_upgrade, migration_recorded_again
):
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    with psycopg.connect(**params) as migration:  # one transaction, committed as the block ends
        for statement in COUNTERS:
            migration.execute(statement)
        migration_recorded_again(on=migration)
        rebuild = started_on_a_connection_of_its_own(lambda: rollups_rebuild(org_id=org.pk))
        wait_until(someone_waits_for_a_lock, message="the rebuild to wait for the migration")

    assert rebuild.result(timeout=30) is None
    counters = _certified(stored_counters(org_ids=[org.pk]))
    assert counters and counters == _certified(live_counters(org_ids=[org.pk]))


@pytest.mark.django_db(transaction=True)  # the hourly rebuild reads what was committed since the last one
def test_a_review_a_worker_on_the_older_code_wrote_is_weighed_from_the_next_hourly_rebuild(org, settings, fake_llm):
    """During an upgrade, the workers run the code from before 0044 until they are restarted: a review they write
    then has no pass probability, and no certified counter. The panel weighed none of them, ever, and the rebuild,
    counting from the same rows, found no drift."""
    configure_judges(settings, default=judge_config(fake_llm))
    alternatives = {"grounded": {"pass": 0.8, "fail": 0.2}, "complete": {"fail": 0.7, "pass": 0.3}}
    fake_llm.script(json_reply(verdicts(PATH_IDS, complete="fail"), verdict_logprobs=alternatives))
    review = conversation_grade(conversation_id=upsert(org, support_conversation()).conversation.pk)
    weighed = Review.objects.get(pk=review.pk).pass_probability
    Review.objects.filter(pk=review.pk).update(pass_probability=None)  # as the older code wrote it
    assert rollups_rebuild(org_id=org.pk).drifted  # and booked its counters: none of the panel's
    assert certified_figures(scope_for(org))[ItemKind.CONVERSATION]["items"] == 0

    assert tasks.rebuild_rollups(org.pk) == 0  # the beat's hourly task

    assert Review.objects.get(pk=review.pk).pass_probability == weighed
    assert _certified(stored_counters(org_ids=[org.pk])) == _certified(live_counters(org_ids=[org.pk]))
    assert certified_figures(scope_for(org))[ItemKind.CONVERSATION]["items"] == 1
    assert pass_probabilities_backfill(org_id=org.pk) == 0  # nothing left to fill
    assert rollups_rebuild(org_id=org.pk).drifted == 0  # filled and booked together: nothing drifted


def test_a_backfill_that_fails_does_not_hold_up_the_hourly_rebuild(org, monkeypatch):
    def refused(*, org_id: int) -> int:
        raise ValueError("a review the rule cannot read")

    monkeypatch.setattr(tasks, "pass_probabilities_backfill", refused)
    with pytest.raises(ValueError):
        tasks.rebuild_rollups(org.pk)
    assert RollupRebuild.objects.filter(org=org).exists()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(specs=st.lists(reviews, min_size=1, max_size=6))
def test_the_migration_replaces_the_certified_counters_with_the_rebuilds_recount(org, specs):
    """Written straight to the tables, the reviews have no counters: the migration books them, and replaces any it
    finds (booked since 0044 by a write or a rebuild, here put wrong), leaving those already right as they were."""
    person = get_user_model().objects.get_or_create(username="decider")[0]
    with transaction.atomic():
        write_reviews(org, specs, person)
        Rollup.objects.create(
            org=org, kind=ItemKind.DRAFT, criteria_id=0, application="", week=WEEK_END.date(), metric=CERTIFIED,
            key1=ITEMS, key2="", value=3, updated_at=WEEK_END,
        )  # fmt: skip
        _counted_by_the_migration()
        assert _certified(stored_counters(org_ids=[org.pk])) == _certified(live_counters(org_ids=[org.pk]))

        Rollup.objects.filter(org=org, metric=CERTIFIED).update(updated_at=WEEK_END)  # booked before this moment
        Rollup.objects.filter(org=org, metric=CERTIFIED, key1=ITEMS).update(value=F("value") + 1)
        right = set(Rollup.objects.filter(org=org, metric=CERTIFIED).exclude(key1=ITEMS).values_list())
        _counted_by_the_migration()
        assert _certified(stored_counters(org_ids=[org.pk])) == _certified(live_counters(org_ids=[org.pk]))
        assert right <= set(Rollup.objects.filter(org=org, metric=CERTIFIED).values_list())  # their times too
        transaction.set_rollback(True)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(specs=st.lists(reviews, min_size=1, max_size=6))
def test_the_grading_writes_rule_is_the_panels_former_expression(org, specs):
    person = get_user_model().objects.get_or_create(username="decider")[0]
    with transaction.atomic():
        written = write_reviews(org, specs, person)
        computed = {review.pk: review_pass_probability(review) for review in written}
        assert _filled_by_the_migration(list(computed)) == computed
        transaction.set_rollback(True)

"""The rollups behind the dashboards: booked by the grading writes in their own transaction, rebuilt by every
grading pass on a worker, and equal to a live GROUP BY over the raw tables throughout."""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.db import connection, transaction

from grading.conversations.grader import conversation_grade
from grading.conversations.ingest import conversation_append, feedback_record
from grading.core.schemas import FeedbackIn
from grading.core.weeks import monday
from grading.figures.expressions import wait_bucket
from grading.models import Feedback, ItemKind, RollupRebuild
from grading.passes.planner import grading_pass
from grading.reviews.rollups import live_counters, rollups_rebuild, rollups_tracking, stored_counters
from grading.tasks import rebuild_all_rollups
from tests.builders.conversations import llm_judge, upsert, verdicts_reply
from tests.builders.processes import wait_until
from tests.builders.world import _messages, conversation_payload


def test_weeks_are_iso_weeks_in_utc():
    sunday_night = datetime(2026, 11, 22, 23, 59, 59, tzinfo=UTC)
    assert monday(sunday_night).isoformat() == "2026-11-16"
    assert monday(sunday_night + timedelta(seconds=1)).isoformat() == "2026-11-23"
    # Monday 00:30 in Berlin is still Sunday 23:30 in UTC: the figures file by UTC.
    berlin = datetime(2026, 11, 23, 0, 30, tzinfo=ZoneInfo("Europe/Berlin"))
    assert monday(berlin).isoformat() == "2026-11-16"


def test_waiting_times_fall_in_the_first_bucket_that_holds_them():
    assert [wait_bucket(s) for s in (0, 60, 61, 604800, 604801)] == ["60", "60", "300", "604800", "more"]


@pytest.mark.django_db
def test_a_write_that_rolls_back_books_nothing(org, fake_llm):
    conversation = upsert(org, conversation_payload("c1", "billing", datetime(2026, 11, 18, tzinfo=UTC)))
    fake_llm.script(verdicts_reply(["m1", "m2"]))
    review = conversation_grade(conversation_id=conversation.conversation.pk, judge=llm_judge(fake_llm))
    before = stored_counters(org_ids=[org.pk])
    with pytest.raises(RuntimeError), transaction.atomic(), rollups_tracking([review.pk]):
        type(review).objects.filter(pk=review.pk).update(state="stale")
        raise RuntimeError("the write failed after it changed the review")
    assert stored_counters(org_ids=[org.pk]) == before == live_counters(org_ids=[org.pk])


@pytest.mark.django_db
def test_a_write_holds_its_orgs_rollup_lock_shared_until_it_commits(org, fake_llm):
    """A rebuild inside a transaction takes the org's lock exclusive to hold writers off (rollups_rebuild): a
    write that books counters must have taken it shared, and keep it to its commit (the test is one transaction)."""
    conversation = upsert(org, conversation_payload("c1", "billing", datetime(2026, 11, 18, tzinfo=UTC)))
    fake_llm.script(verdicts_reply(["m1", "m2"]))
    conversation_grade(conversation_id=conversation.conversation.pk, judge=llm_judge(fake_llm))
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT mode FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2 AND classid = 7417"
            " AND objid = %s AND pid = pg_backend_pid()",
            [org.pk],
        )
        assert [mode for (mode,) in cursor.fetchall()] == ["ShareLock"]


@pytest.mark.django_db
def test_thumbs_of_a_conversation_whose_start_moves_are_put_right_by_the_rebuild(org, fake_llm):
    """The one figure no review write sees: thumbs are filed by their conversation's start, which a late earlier
    message can move. The pass's rebuild files them again."""
    upsert(org, conversation_payload("c1", "billing", datetime(2026, 11, 23, 10, tzinfo=UTC)))
    feedback_record(org=org, payload=FeedbackIn(conversation="c1", message_id="m2", value="up"))
    earlier = [{"id": "m0", "role": "system", "content": "Be brief.", "created_at": "2026-11-20T09:00:00Z"}]
    conversation_append(org=org, external_id="c1", payload=_messages(earlier))
    assert Feedback.objects.count() == 1
    assert stored_counters(org_ids=[org.pk]) != live_counters(org_ids=[org.pk])
    rebuild = rollups_rebuild(org_id=org.pk)
    assert rebuild.drifted == 2  # one thumb out of W48, into W47
    thumbs = {
        key[4].isoformat(): value for key, value in stored_counters(org_ids=[org.pk]).items() if key[5] == "thumbs"
    }
    assert thumbs == {"2026-11-16": 1}


@pytest.mark.django_db(transaction=True)
def test_the_hourly_rebuild_runs_on_a_worker_and_concurrent_graders_lose_no_count(org, celery_worker, fake_llm):
    # Eight conversations of one application and week: the worker's two processes book the same counters at once.
    for n in range(8):
        upsert(org, conversation_payload(f"c{n}", "billing", datetime(2026, 11, 18, n, tzinfo=UTC)))
    fake_llm.set_default(verdicts_reply(["m1", "m2"], complete="unknown"))
    grading_pass()
    rebuild_all_rollups.delay()  # as the beat sends it (CELERY_BEAT_SCHEDULE), while the graders write
    rebuild = wait_until(lambda: RollupRebuild.objects.filter(org=org).first(), message="the rollup rebuild")
    # It ran while the graders wrote: its one snapshot saw each review with its counters, so it found no drift.
    assert rebuild.drifted == 0 and rebuild.mismatched == {ItemKind.CONVERSATION: 0, ItemKind.DRAFT: 0}
    wait_until(lambda: org.reviews.count() == 8, message="eight reviews")
    assert stored_counters(org_ids=[org.pk]) == live_counters(org_ids=[org.pk])
    route = {key[6:8]: value for key, value in stored_counters(org_ids=[org.pk]).items() if key[5] == "route"}
    assert route == {("human", "unknown_check"): 8}
    assert rollups_rebuild(org_id=org.pk).drifted == 0

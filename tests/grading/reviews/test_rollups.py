"""The rollups behind the dashboards: booked by the grading writes in their own transaction, rebuilt by every
grading pass on a worker, and equal to a live GROUP BY over the raw tables throughout."""

from datetime import UTC, date, datetime, timedelta
from io import StringIO
from zoneinfo import ZoneInfo

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from grading.conversations.grader import conversation_grade
from grading.conversations.ingest import conversation_append, feedback_record
from grading.core.schemas import FeedbackIn
from grading.core.weeks import monday
from grading.figures.expressions import wait_bucket
from grading.models import Feedback, ItemKind, Review, Rollup, RollupRebuild
from grading.passes.planner import grading_pass
from grading.reviews.rollups import (
    FULL_REBUILD_EVERY,
    live_counters,
    rollups_rebuild,
    rollups_tracking,
    stored_counters,
)
from grading.tasks import rebuild_all_rollups
from tests.builders.conversations import llm_judge, upsert, verdicts_reply
from tests.builders.processes import wait_until
from tests.builders.rebuilds import while_a_rebuild_counts
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


W47, W48 = date(2026, 11, 16), date(2026, 11, 23)  # the ISO weeks the conversations below started in


def _graded(org, fake_llm, external_id: str, week: date) -> Review:
    conversation = upsert(org, conversation_payload(external_id, "billing", week))
    fake_llm.script(verdicts_reply(["m1", "m2"]))
    return conversation_grade(conversation_id=conversation.conversation.pk, judge=llm_judge(fake_llm))


def _weeks_but(counters: dict, week: date) -> dict:
    return {key: value for key, value in counters.items() if key[4] != week}


@pytest.mark.django_db(transaction=True)
def test_an_incremental_rebuild_recounts_the_weeks_booked_since_the_last_and_leaves_them_as_a_full_one_would(
    org, fake_llm
):
    _graded(org, fake_llm, "c1", W47)
    _graded(org, fake_llm, "c2", W48)
    assert rollups_rebuild(org_id=org.pk, incremental=True).weeks is None  # none before it: a full one
    _graded(org, fake_llm, "c3", W48)  # booked in W48 and in this week (what the judging cost)
    Rollup.objects.filter(org=org, metric="route", week=W48).update(value=999)  # a counter of W48 put wrong

    rebuild = rollups_rebuild(org_id=org.pk, incremental=True)

    assert rebuild.weeks == sorted([W48.isoformat(), monday(timezone.now()).isoformat()])
    assert rebuild.drifted == Rollup.objects.filter(org=org, metric="route", week=W48).exclude(value=0).count()
    assert stored_counters(org_ids=[org.pk]) == live_counters(org_ids=[org.pk])  # as a full rebuild leaves them
    # The next one recounts the counters the last one put right (written after its snapshot), then nothing.
    again = rollups_rebuild(org_id=org.pk, incremental=True)
    assert (again.weeks, again.drifted) == ([W48.isoformat()], 0)
    quiet = rollups_rebuild(org_id=org.pk, incremental=True)
    assert (quiet.weeks, quiet.drifted, quiet.mismatched) == ([], 0, rebuild.mismatched)
    assert stored_counters(org_ids=[org.pk]) == live_counters(org_ids=[org.pk])


@pytest.mark.django_db(transaction=True)
def test_what_no_write_booked_in_a_week_nobody_wrote_to_waits_for_the_full_rebuild(org, fake_llm):
    first = _graded(org, fake_llm, "c1", W47)
    _graded(org, fake_llm, "c2", W48)
    rollups_rebuild(org_id=org.pk)
    Review.objects.filter(pk=first.pk).update(route="fail" if first.route == "pass" else "pass")  # nothing booked

    incremental = rollups_rebuild(org_id=org.pk, incremental=True)

    assert (incremental.weeks, incremental.drifted) == ([], 0)
    assert stored_counters(org_ids=[org.pk]) != live_counters(org_ids=[org.pk])
    assert _weeks_but(stored_counters(org_ids=[org.pk]), W47) == _weeks_but(live_counters(org_ids=[org.pk]), W47)
    full = rollups_rebuild(org_id=org.pk)
    assert full.weeks is None and full.drifted > 0
    assert stored_counters(org_ids=[org.pk]) == live_counters(org_ids=[org.pk])


@pytest.mark.django_db(transaction=True)
def test_of_two_rebuilds_of_one_org_at_once_the_one_that_books_second_books_nothing(org, fake_llm, monkeypatch):
    """A task delivered twice, or the command run beside the beat: two rebuilds of one org at once count the same
    drift in their snapshots, and both used to book it. The one that books second finds the other's booking after
    its snapshot, and books nothing."""
    first = _graded(org, fake_llm, "c1", W47)
    rollups_rebuild(org_id=org.pk)
    Review.objects.filter(pk=first.pk).update(route="fail" if first.route == "pass" else "pass")  # nothing booked
    other = while_a_rebuild_counts(monkeypatch, lambda: rollups_rebuild(org_id=org.pk))

    assert rollups_rebuild(org_id=org.pk) is None

    assert other[0].drifted > 0
    assert stored_counters(org_ids=[org.pk]) == live_counters(org_ids=[org.pk])
    assert rollups_rebuild(org_id=org.pk).drifted == 0  # and the next one books


@pytest.mark.django_db
def test_the_hourly_rebuild_recounts_every_week_once_its_last_full_one_is_a_day_old(org, fake_llm):
    _graded(org, fake_llm, "c1", W47)
    first = rollups_rebuild(org_id=org.pk, incremental=True)
    assert first.weeks is None
    assert rollups_rebuild(org_id=org.pk, incremental=True).weeks is not None
    RollupRebuild.objects.filter(pk=first.pk).update(rebuilt_at=F("rebuilt_at") - FULL_REBUILD_EVERY)
    assert rollups_rebuild(org_id=org.pk, incremental=True).weeks is None


@pytest.mark.django_db
def test_a_rebuild_whose_last_mark_is_another_clusters_transaction_id_recounts_every_week(org, fake_llm):
    """A backup restored into a new cluster starts its transaction ids again: the last rebuild's mark lies ahead of
    every write, which an incremental rebuild would take for nothing written since."""
    _graded(org, fake_llm, "c1", W47)
    rollups_rebuild(org_id=org.pk)
    RollupRebuild.objects.update(unseen_from=2**62)
    assert rollups_rebuild(org_id=org.pk, incremental=True).weeks is None


@pytest.mark.django_db
def test_the_rebuild_command_recounts_every_week_and_says_how_many_counters_it_put_right(org, fake_llm):
    _graded(org, fake_llm, "c1", W47)
    rollups_rebuild(org_id=org.pk, incremental=True)
    Rollup.objects.filter(org=org, metric="route", week=W47).update(value=999)
    out = StringIO()

    call_command("rollups_rebuild", org=org.slug, stdout=out)

    assert out.getvalue().endswith("; 1 of them put right\n")
    assert RollupRebuild.objects.filter(org=org).latest("rebuilt_at").weeks is None
    assert stored_counters(org_ids=[org.pk]) == live_counters(org_ids=[org.pk])


@pytest.mark.django_db(transaction=True)  # the other rebuild books on a connection of its own
def test_the_rebuild_command_says_so_when_another_rebuild_booked_while_it_counted(org, fake_llm, monkeypatch):
    _graded(org, fake_llm, "c1", W47)
    while_a_rebuild_counts(monkeypatch, lambda: rollups_rebuild(org_id=org.pk, incremental=True))

    with pytest.raises(CommandError, match="another rebuild of the org booked"):
        call_command("rollups_rebuild", org=org.slug, stdout=StringIO())
    assert RollupRebuild.objects.get().weeks is None  # the other one's, a full one: the first of the org

"""Recovery without a person: work whose task was lost (the broker lost its queue, the worker died, the send
failed) is graded again by the next pass, never reported as backlog, and an API write is never stranded."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from grading.api.keys import api_key_create
from grading.models import Conversation, Draft, ItemKind, Review
from grading.passes.planner import SEND_GRACE, grading_pass, grading_recover
from grading.reviews.inflight import items_being_graded
from tests.builders.conversations import PATH_IDS, support_conversation, upsert, verdicts_reply
from tests.builders.drafts import CLEAN_BODY, SOURCE, draft_reply, setup_org_memory
from tests.builders.processes import forget_delivered, wait_until
from tests.fakes.openai_server import hang_reply

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

# Passes "later" run past the grace a fresh ticket gets for its send: a ticket the broker does not hold by then is
# lost, not on its way. Passing the time is the planner's own interface; nothing here sleeps it out.
LATER = SEND_GRACE + timedelta(seconds=1)


def worker_answers(app, node: str) -> bool:
    try:
        return bool(app.control.ping(destination=[node], timeout=0.5))
    except Exception:  # the broker is still coming back
        return False


@pytest.fixture
def judge_queue_paused(celery_worker):
    """The session's worker stops taking grading tasks, so tasks stay where the test put them; call the fixture's
    value to let it take them again (the teardown does, if the test did not)."""
    from reviewer.celery import app

    assert app.control.cancel_consumer("judge", destination=[celery_worker], reply=True)
    paused = [True]

    def resume() -> None:
        wait_until(lambda: worker_answers(app, celery_worker), timeout=60, message="the worker to reconnect")
        assert app.control.add_consumer("judge", destination=[celery_worker], reply=True)
        paused.clear()

    yield resume
    if paused:
        resume()


def reviews_per_item(field: str, ids: list[int]) -> dict[int, int]:
    counts = dict.fromkeys(ids, 0)
    for item_id in Review.objects.filter(**{f"{field}__in": ids}).values_list(field, flat=True):
        counts[item_id] += 1
    return counts


def test_work_the_broker_lost_is_sent_again_by_the_next_pass_and_never_counted_as_backlog(
    celery_worker, fake_llm, org, embedded_redis, judge_queue_paused
):
    ids = [upsert(org, support_conversation(f"cv-{n}")).conversation.pk for n in range(6)]
    fake_llm.set_default(verdicts_reply(PATH_IDS))
    assert sorted(grading_pass().enqueued_ids) == sorted(ids)

    waiting = grading_pass(now=timezone.now() + LATER).run
    assert (waiting.in_flight, waiting.enqueued, waiting.recovered, waiting.backlog) == (6, 0, 0, 0)

    embedded_redis.stop(lose_data=True)  # as a broker without persistence comes back: every queue empty
    embedded_redis.start()
    after = grading_pass(now=timezone.now() + LATER).run
    assert (after.needing, after.in_flight, after.enqueued, after.recovered, after.backlog) == (6, 0, 6, 6, 0)

    judge_queue_paused()
    wait_until(lambda: all(reviews_per_item("conversation", ids).values()), timeout=60, message="every review")
    assert reviews_per_item("conversation", ids) == dict.fromkeys(ids, 1)
    assert len(fake_llm.chat_requests()) == 6


def test_a_draft_submitted_while_the_broker_is_down_is_stored_owed_and_graded_when_it_is_back(
    client, celery_worker, fake_llm, org, embedded_redis
):
    setup_org_memory(org)
    fake_llm.set_default(draft_reply(8))
    auth = {"HTTP_AUTHORIZATION": f"Bearer {api_key_create(org=org, name='pipeline').plaintext}"}
    submission = {
        "external_id": "run-7/a",
        "title": "Cutting support costs",
        "slug": "cutting-support-costs",
        "body": CLEAN_BODY,
        "source_urls": [SOURCE],
    }
    embedded_redis.stop()
    try:
        accepted = client.post("/api/v1/drafts", json.dumps(submission), content_type="application/json", **auth)
    finally:
        embedded_redis.start()
    assert accepted.status_code == 202, accepted.content
    draft = Draft.objects.get(pk=accepted.json()["id"])
    assert draft.queued_at is not None and draft.grading_task_id  # stored, and owed its grading
    assert not Review.objects.filter(draft=draft).exists()

    assert grading_recover(now=timezone.now() + LATER)[ItemKind.DRAFT] == [draft.pk]
    status = wait_until(
        lambda: (body := client.get(f"/api/v1/drafts/{draft.pk}", **auth).json())["route"] != "pending" and body,
        timeout=60,
        message="the draft's verdict",
    )
    assert (status["route"], status["score"]) == ("pass", 8)
    assert Review.objects.filter(draft=draft).count() == 1
    health = client.get("/api/v1/health", **auth).json()  # the workers that lived through the restart answer it
    assert (health["redis"]["ok"], health["workers"]["ok"]) == (True, True), health


def test_an_item_whose_worker_died_is_graded_by_the_next_pass_without_waiting_out_the_time_limit(
    celery_worker, celery_processes, fake_llm, org, judge_queue_paused
):
    conversation = upsert(org, support_conversation()).conversation
    fake_llm.set_default(hang_reply(120, then=verdicts_reply(PATH_IDS)))
    doomed = celery_processes("worker", "-Q", "judge", "-c", "1")
    grading_pass()
    ticket = Conversation.objects.get(pk=conversation.pk).grading_task_id
    try:
        wait_until(fake_llm.chat_requests, timeout=60, message="the doomed worker to ask the judge")
        doomed.kill()  # the whole machine: its task stays delivered and unacknowledged in the broker
        # PostgreSQL drops the dead worker's grading lock when its backend reads the closed socket, a moment later.
        wait_until(
            lambda: (ItemKind.CONVERSATION, conversation.pk) not in items_being_graded(),
            timeout=30,
            message="PostgreSQL to end the dead worker's session",
        )
        fake_llm.set_default(verdicts_reply(PATH_IDS))
        result = grading_pass(now=timezone.now() + LATER)
        assert result.recovered[ItemKind.CONVERSATION] == [conversation.pk]
        assert (result.run.enqueued, result.run.backlog) == (1, 0)
    finally:
        forget_delivered({ticket})
    judge_queue_paused()
    wait_until(lambda: Review.objects.filter(conversation=conversation).exists(), timeout=60, message="the review")
    assert Review.objects.get(conversation=conversation).route == "pass"

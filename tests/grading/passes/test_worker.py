"""End to end through Redis and a separate `celery worker` process."""

import json
import os
import socket
import uuid

import pytest
from django.db import connection, transaction

from grading.api.keys import api_key_create
from grading.drafts.gate import draft_grade
from grading.models import AuditEvent, Conversation, Review, WebhookDelivery
from grading.passes.planner import grading_pass
from grading.reviews.services import PersonVerdict
from grading.tasks import grade_conversation
from reviewer.queue.services import claim_take, decision_create
from tests.builders.conversations import PATH_IDS, support_conversation, upsert, verdicts_reply
from tests.builders.drafts import CLEAN_BODY, SOURCE, draft_reply, llm_draft_judge, save_draft, setup_org_memory
from tests.builders.processes import wait_until, workers_idle, workers_settled
from tests.fakes.canary_tasks import canary_write
from tests.fakes.webhook_receivers import DribblingReceiver, Receiver

pytestmark = pytest.mark.django_db(transaction=True)


def bearer(org) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {api_key_create(org=org, name='pipeline').plaintext}"}


def test_a_task_sent_after_commit_runs_in_the_worker_and_its_write_is_visible(celery_worker, org):
    marker = uuid.uuid4().hex
    with transaction.atomic():
        transaction.on_commit(lambda: canary_write.delay(org.pk, marker))
    event = wait_until(
        lambda: AuditEvent.objects.filter(action="test.canary", detail__marker=marker).first(),
        message="the worker's audit event",
    )
    assert event.detail["pid"] != os.getpid()


def test_what_a_test_leaves_for_later_never_runs_in_the_next_one(celery_worker, org):
    from reviewer.celery import app

    nodes = [celery_worker, f"webhooks-{celery_worker}"]
    # A short countdown: the worker holds a task it waits out unacknowledged, and one still held when a later test
    # stops the broker hangs the worker's reconnection.
    later = canary_write.apply_async((org.pk, "later"), countdown=2)
    wait_until(lambda: later.id in _scheduled(app, nodes), message="the worker holding the task for its countdown")
    workers_settled(app, nodes)
    wait_until(lambda: later.id not in _scheduled(app, nodes), message="the countdown to pass")
    workers_idle(app, nodes)
    assert not AuditEvent.objects.filter(action="test.canary", detail__marker="later").exists()


def _scheduled(app, nodes: list[str]) -> set[str]:
    scheduled = app.control.inspect(destination=nodes, timeout=2.0).scheduled() or {}
    return {entry["request"]["id"] for entries in scheduled.values() for entry in entries}


def test_health_reports_database_redis_and_live_workers(client, celery_worker, org):
    response = client.get("/api/v1/health", **bearer(org))
    assert response.status_code == 200, response.json()
    report = response.json()
    assert report["ok"] is True
    assert report["database"]["ok"] and report["redis"]["ok"]
    assert (report["workers"]["ok"], report["workers"]["count"]) == (True, 2)  # grading and webhooks


def test_health_tells_an_org_key_nothing_about_versions_or_hosts(client, celery_worker, org):
    with connection.cursor() as cursor:
        cursor.execute("SELECT version(), extversion FROM pg_extension WHERE extname = 'vector'")
        server_version, pgvector_version = cursor.fetchone()
    text = client.get("/api/v1/health", **bearer(org)).content.decode()
    for secret in (server_version.split()[1], pgvector_version, celery_worker, socket.gethostname(), "PostgreSQL"):
        assert secret not in text


def test_a_pass_grades_through_the_worker_with_the_llm_judge_and_the_api_shows_the_review(
    client, celery_worker, fake_llm, org
):
    auth = bearer(org)
    client.post("/api/v1/conversations", support_conversation(), content_type="application/json", **auth)
    fake_llm.set_default(verdicts_reply(PATH_IDS))

    assert len(grading_pass().enqueued_ids) == 1
    review = wait_until(lambda: Review.objects.filter(org=org).first(), message="the worker's review")
    body = client.get("/api/v1/conversations/cv-1", **auth).json()
    assert body["review"]["route"] == "pass"
    assert body["review"]["identity"]["fingerprint"] == body["fingerprint"] == review.fingerprint
    assert body["review"]["identity"]["judge"]["backend"] == "openai"
    assert len(fake_llm.chat_requests()) == 1


def test_the_same_grading_task_delivered_twice_yields_one_review(celery_worker, fake_llm, org):
    conversation = upsert(org, support_conversation()).conversation
    fake_llm.set_default(verdicts_reply(PATH_IDS))
    # Grading stores no result; this test asks for them, to wait on both deliveries.
    results = [grade_conversation.apply_async(([conversation.pk],), ignore_result=False) for _ in range(2)]
    review_ids = {review_id for result in results for review_id in result.get(timeout=30)}
    assert len(review_ids) == 1
    assert Review.objects.filter(conversation=conversation).count() == 1
    assert Conversation.objects.get(pk=conversation.pk).queued_at is None


def test_a_grading_message_queued_before_batches_naming_one_item_is_still_graded(celery_worker, fake_llm, org):
    conversation = upsert(org, support_conversation()).conversation
    fake_llm.set_default(verdicts_reply(PATH_IDS))
    review_ids = grade_conversation.apply_async((conversation.pk,), ignore_result=False).get(timeout=30)
    assert review_ids == [Review.objects.get(conversation=conversation).pk]


@pytest.fixture
def allow_loopback(settings):
    """The receivers listen on 127.0.0.1; the workers have the same allowlist (conftest)."""
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.1/32"]


def test_a_submitted_draft_is_graded_by_the_worker_and_the_pipeline_gets_a_signed_webhook(
    client, celery_worker, fake_llm, org, allow_loopback
):
    setup_org_memory(org)
    hook = Receiver([200])
    fake_llm.set_default(draft_reply(8))
    try:
        submission = {
            "external_id": "run-1/a",
            "title": "Cutting support costs",
            "slug": "cutting-support-costs",
            "body": CLEAN_BODY,
            "source_urls": [SOURCE],
            "callback_url": hook.url,
        }
        accepted = client.post("/api/v1/drafts", json.dumps(submission), content_type="application/json", **bearer(org))
        assert accepted.status_code == 202
        draft_id = accepted.json()["id"]
        wait_until(
            lambda: WebhookDelivery.objects.filter(draft_id=draft_id, delivered=True).exists(), message="the webhook"
        )
        status = client.get(f"/api/v1/drafts/{draft_id}", **bearer(org)).json()
        assert (status["route"], status["score"]) == ("pass", 8)
        [(headers, body)] = hook.received
        assert json.loads(body)["draft"]["route"] == "pass"
        assert headers["x-tollgate-signature"].startswith("sha256=")
    finally:
        hook.close()


def test_an_operator_decision_on_a_draft_reaches_the_pipeline_as_a_second_signed_webhook(
    celery_worker, fake_llm, org, operator, allow_loopback
):
    setup_org_memory(org)
    hook = Receiver([200, 200])
    try:
        draft = save_draft(org, callback_url=hook.url)
        fake_llm.script(draft_reply(9, passed=False))  # a judge that contradicts itself: humans decide
        review = draft_grade(draft_id=draft.pk, judge=llm_draft_judge(fake_llm))
        assert review.route == "human"
        claim_take(user=operator, review_id=review.pk)
        decision_create(
            user=operator, review_id=review.pk, fingerprint=review.fingerprint, verdict=PersonVerdict(outcome="approve")
        )
        wait_until(lambda: len(hook.received) == 2, message="both webhooks")
        events = [headers["x-tollgate-event"] for headers, _ in hook.received]
        assert sorted(events) == ["human_decision", "machine_verdict"]
        decided = next(
            json.loads(body) for headers, body in hook.received if headers["x-tollgate-event"] == "human_decision"
        )
        assert decided["draft"]["decision"]["outcome"] == "approve"
        assert decided["draft"]["decision"]["by"] == operator.username
    finally:
        hook.close()


def test_slow_webhook_receivers_do_not_hold_up_grading(celery_worker, fake_llm, org, allow_loopback):
    """Two receivers hold their webhook tries open for longer than the wait for a grading (the workers'
    deadline is long, conftest): the grading still happens, because webhooks never take the processes that
    grade. With webhooks in the grading worker's queues, both of its processes would be held."""
    setup_org_memory(org)
    slow = DribblingReceiver(interval=0.5, lines=240)  # two minutes of headers
    try:
        for n in range(2):
            review = draft_grade(draft_id=save_draft(org, external_id=f"slow-{n}", callback_url=slow.url).pk)
            assert review.draft.callback_url == slow.url
        wait_until(lambda: slow.open == 2, message="both webhooks to be held by the slow receiver")
        conversation = upsert(org, support_conversation()).conversation
        fake_llm.set_default(verdicts_reply(PATH_IDS))
        grade_conversation.delay([conversation.pk])
        wait_until(lambda: Review.objects.filter(conversation=conversation).exists(), message="the grading")
        assert (slow.accepted, slow.open) == (2, 2)  # the same two tries, still held
    finally:
        slow.close()

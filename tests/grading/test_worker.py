"""End to end through Redis and a separate `celery worker` process."""

import os
import uuid

import pytest
from django.db import transaction

from grading.models import AuditEvent
from grading.services import api_key_create
from tests.conftest import wait_until
from tests.fakes.canary_tasks import canary_write

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_task_sent_after_commit_runs_in_the_worker_and_its_write_is_visible(celery_worker, org):
    marker = uuid.uuid4().hex
    with transaction.atomic():
        transaction.on_commit(lambda: canary_write.delay(org.pk, marker))
    event = wait_until(
        lambda: AuditEvent.objects.filter(action="test.canary", detail__marker=marker).first(),
        message="the worker's audit event",
    )
    assert event.detail["pid"] != os.getpid()


def test_health_reports_database_redis_and_a_live_worker(client, celery_worker, org):
    key = api_key_create(org=org, name="monitor").plaintext
    response = client.get("/api/v1/health", HTTP_AUTHORIZATION=f"Bearer {key}")
    assert response.status_code == 200, response.json()
    report = response.json()
    assert report["ok"] is True
    assert "pgvector" in report["database"]["detail"]
    assert celery_worker in report["workers"]["detail"]


def test_a_pass_grades_through_the_worker_with_the_llm_judge_and_the_api_shows_the_review(
    client, celery_worker, fake_llm, org
):
    from grading.models import Review
    from grading.planner import grading_pass
    from tests.grading.conversations import PATH_IDS, support_conversation, verdicts_reply

    key = api_key_create(org=org, name="agent platform").plaintext
    auth = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
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
    from grading.models import Conversation, Review
    from grading.tasks import grade_conversation
    from tests.grading.conversations import PATH_IDS, support_conversation, upsert, verdicts_reply

    conversation = upsert(org, support_conversation()).conversation
    fake_llm.set_default(verdicts_reply(PATH_IDS))
    results = [grade_conversation.delay(conversation.pk) for _ in range(2)]
    review_ids = {result.get(timeout=30) for result in results}
    assert len(review_ids) == 1
    assert Review.objects.filter(conversation=conversation).count() == 1
    assert Conversation.objects.get(pk=conversation.pk).queued_at is None

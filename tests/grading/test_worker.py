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

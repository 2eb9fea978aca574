"""A task only the test worker loads (`celery worker --include tests.fakes.canary_tasks`)."""

import os

from celery import shared_task

from grading.models import Org
from grading.models.audit import audit_record


@shared_task(name="tests.canary_write")
def canary_write(org_id: int, marker: str) -> int:
    """Write an audit event from inside the worker, and report the worker's pid."""
    audit_record(action="test.canary", org=Org.objects.get(pk=org_id), detail={"marker": marker, "pid": os.getpid()})
    return os.getpid()

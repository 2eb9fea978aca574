"""The Celery app: configured from Django settings under the CELERY_ namespace."""

import os

from celery import Celery
from kombu import Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "reviewer.settings")

app = Celery("reviewer")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_queues = [Queue(name) for name in ("judge", "default", "webhooks")]
app.autodiscover_tasks(["grading", "grading.otlp", "reviewer"])

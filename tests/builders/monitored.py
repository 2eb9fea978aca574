"""Graded items as a monitor reads them, written straight to the tables: a conversation or draft with its metadata
and one review (route, checks, state, when it was graded, usage, a due time) and, if given, people's decision; and
monitors with sensible settings. Shared by the monitors' service, page and browser tests and the benchmark."""

from __future__ import annotations

from datetime import datetime, timedelta
from itertools import count
from typing import Any

from django.utils import timezone

from grading.models import Conversation, Decision, Draft, ItemKind, Monitor, Review, ReviewState, Route
from grading.monitors.services import monitor_create
from grading.reviews.versions import criteria_active

JUDGE = {"backend": "openai", "model": "judge-test", "prompt_hash": "5be0c2d1", "temperature": 0.0}
_numbers = count(1)


def graded(
    org,
    *,
    kind: str = ItemKind.CONVERSATION,
    route: str = Route.PASS,
    checks: dict[str, str] | None = None,
    at: datetime | None = None,
    minutes_ago: float = 10,
    application: str = "billing",
    metadata: dict[str, str] | None = None,
    state: str | None = None,
    usage: dict | None = None,
    due_at: datetime | None = None,
    judge_passed: bool | None = None,
    decision: str = "",
    decision_checks: dict[str, str] | None = None,
    decided_minutes_ago: float = 5,
    audit: bool = False,
) -> Review:
    """One item and its review, graded `minutes_ago` before `at` (now). A decision makes the review decided."""
    now = at or timezone.now()
    finished = now - timedelta(minutes=minutes_ago)
    number = next(_numbers)
    fingerprint = f"fp1:{number:064x}"
    if kind == ItemKind.DRAFT:
        application = ""
        item: dict[str, Any] = {
            "draft": Draft.objects.create(
                org=org, external_id=f"mon-d{number}", title=f"Draft {number}", slug=f"mon-d{number}",
                body="body", fingerprint=fingerprint, metadata=metadata or {},
            )
        }  # fmt: skip
    else:
        item = {
            "conversation": Conversation.objects.create(
                org=org, external_id=f"mon-c{number}", application=application, started_at=finished,
                last_activity_at=finished, fingerprint=fingerprint, metadata=metadata or {},
            )
        }  # fmt: skip
    if state is None:
        state = ReviewState.DECIDED if decision else (ReviewState.WAITING if route == Route.HUMAN else "current")
    review = Review.objects.create(
        org=org, kind=kind, **item, application=application, fingerprint=fingerprint,
        criteria_version=criteria_active(org=org, kind=kind), judge=JUDGE, judge_key="judge-test",
        started_at=finished - timedelta(seconds=3), finished_at=finished, stages=1, route=route,
        reason="unknown_check" if route == Route.HUMAN else "",
        checks={key: {"verdict": verdict} for key, verdict in (checks or {}).items()},
        judge_passed=judge_passed,
        usage=usage if usage is not None else {"prompt_tokens": 100, "completion_tokens": 20},
        state=state, routed_at=finished if route == Route.HUMAN or audit else None, due_at=due_at, audit=audit,
    )  # fmt: skip
    if decision:
        Decision.objects.create(
            org=org, review=review, outcome=decision, checks=decision_checks or {},
            decided_at=now - timedelta(minutes=decided_minutes_ago),
        )  # fmt: skip
    return review


MONITOR_DEFAULTS: dict[str, Any] = {
    "figure": "check_pass", "kind": ItemKind.CONVERSATION, "check_key": "grounded", "window_hours": 24,
    "application": "", "metadata_name": "", "metadata_value": "", "min_n": 10, "direction": "",
    "warning_level": 0.9, "alert_level": 0.8, "margin": 0.0, "mail_to": [], "webhook_url": "", "chat_url": "",
}  # fmt: skip


def monitor(org, name: str = "grounding", actor=None, **settings: Any) -> Monitor:
    """A monitor of `org` through the service, `settings` over MONITOR_DEFAULTS (the grounded check's pass rate of
    conversations over a day, warning below 90%, alert below 80%, at least 10 items)."""
    return monitor_create(org=org, given=MONITOR_DEFAULTS | {"name": name} | settings, actor=actor)

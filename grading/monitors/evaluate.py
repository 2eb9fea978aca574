"""Evaluating monitors (the beat, every five minutes: `monitors_evaluate`).

For each monitor, in a transaction of its own with its row locked (a monitor another run holds is skipped, so two
runs never evaluate one monitor at once):
1. its figure and n at `now` (grading/monitors/figures.py): read for every monitor of the run together before the
   first transaction, one query per window shared (`monitors_figures`), not one per monitor;
2. its next state (grading/monitors/states.py: no data below the minimum n, the levels, hysteresis);
3. the evaluation written (the history), and the monitor's state with it;
4. after commit, when the state changed, one notice per channel the monitor names (mail, signed webhook, chat), each
   a task of the `webhooks` queue, so a slow receiver holds up no evaluation. A state that did not change is told
   nothing. A new monitor's first state is told only when it is a warning or an alert: "ok" is no news.
History older than MONITOR_HISTORY_DAYS is deleted at the end of each run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, transaction
from django.utils import timezone

from grading.models import Monitor, MonitorEvaluation, MonitorState
from grading.monitors.figures import Figure, FigureKey, figure_key, monitor_figure, monitors_figures
from grading.monitors.states import Levels, state_next

logger = logging.getLogger(__name__)

BAD = (MonitorState.WARNING, MonitorState.ALERT)
# Told of one evaluation: its id and the channels to tell (mail, webhook, chat).
Deliver = Callable[[int, list[str]], None]


def levels_of(monitor: Monitor) -> Levels:
    return Levels(
        direction=monitor.direction,
        warning=monitor.warning_level,
        alert=monitor.alert_level,
        margin=monitor.margin,
        min_n=monitor.min_n,
    )


def is_news(previous: str, state: str) -> bool:
    """Whether going from `previous` to `state` is told: every change of state, but a first state only when bad."""
    return state != previous and (bool(previous) or state in BAD)


def channels_of(monitor: Monitor) -> list[str]:
    return [
        channel
        for channel, given in (("mail", monitor.mail_to), ("webhook", monitor.webhook_url), ("chat", monitor.chat_url))
        if given
    ]


def monitors_evaluate(*, deliver: Deliver, now: datetime | None = None, org_id: int | None = None) -> int:
    """Evaluate every monitor (of one org, when given); the number evaluated."""
    now = now or timezone.now()
    monitors = Monitor.objects.order_by("pk")
    if org_id is not None:
        monitors = monitors.filter(org_id=org_id)
    monitors = list(monitors)
    try:
        figures = monitors_figures(monitors, now)
    except DatabaseError:  # each monitor then reads its own, so one bad read stops only its monitor
        logger.exception("the monitors' figures could not be read together")
        figures = {}
    evaluated = 0
    for monitor_id in [monitor.pk for monitor in monitors]:
        try:
            evaluated += monitor_evaluate(monitor_id=monitor_id, now=now, deliver=deliver, figures=figures) is not None
        except DatabaseError:  # one monitor's bad read must not stop the others
            logger.exception("monitor %s could not be evaluated", monitor_id)
    MonitorEvaluation.objects.filter(at__lt=now - timedelta(days=settings.MONITOR_HISTORY_DAYS)).delete()
    return evaluated


def monitor_evaluate(
    *, monitor_id: int, now: datetime, deliver: Deliver, figures: dict[FigureKey, Figure] | None = None
) -> MonitorEvaluation | None:
    """Steps 1 to 4 for one monitor; None when it is gone or another run holds it. `figures`: the run's, read
    together before (`monitors_figures`); a monitor whose settings changed since reads its own."""
    with transaction.atomic():
        monitor = Monitor.objects.select_for_update(skip_locked=True).filter(pk=monitor_id).first()
        if monitor is None:
            return None
        figure = (figures or {}).get(figure_key(monitor)) or monitor_figure(monitor, now)
        previous = monitor.state
        state = state_next(value=figure.value, n=figure.n, previous=previous, levels=levels_of(monitor))
        news = is_news(previous, state)
        evaluation = MonitorEvaluation.objects.create(
            monitor=monitor, at=now, value=figure.value, n=figure.n, state=state, previous=previous, changed=news
        )
        fields = ["state", "evaluated_at"]
        if state != previous:
            monitor.state_since = now
            fields.append("state_since")
        monitor.state, monitor.evaluated_at = state, now
        monitor.save(update_fields=fields)
        channels = channels_of(monitor)
        if news and channels:
            transaction.on_commit(lambda: deliver(evaluation.pk, channels))
    return evaluation

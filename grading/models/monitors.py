"""Monitors: a figure over a rolling window, on a slice of an org's items, held against a warning and an alert level
(grading/monitors/), and each evaluation of one: its figure, the n behind it and the state it left the monitor in."""

from django.conf import settings
from django.db import models

from grading.models.criteria import ItemKind
from grading.models.orgs import Org


class MonitorFigure(models.TextChoices):
    CHECK_PASS = "check_pass", "pass rate of a check"
    ITEM_PASS = "item_pass", "pass rate of items"
    UNKNOWN_SHARE = "unknown_share", "unknown share of a check"
    AGREEMENT = "agreement", "judge agrees with people"
    SPEND = "spend", "judge tokens spent"
    OVERDUE = "overdue", "queue items overdue"
    ERRORS = "errors", "grading errors"


class Direction(models.TextChoices):
    BELOW = "below", "below the level is bad"
    ABOVE = "above", "above the level is bad"


class MonitorState(models.TextChoices):
    OK = "ok", "ok"
    WARNING = "warning", "warning"
    ALERT = "alert", "alert"
    NO_DATA = "no_data", "no data"


class Monitor(models.Model):
    """An org's watch on one figure (grading/monitors/figures.py says what each counts): over the last
    `window_hours`, on the items of `kind` (of one application, and with one metadata name set to one value, when
    given), at least `min_n` of them or "no data"; past `warning_level` a warning, past `alert_level` an alert, in
    `direction`. A state reached holds until the figure is back past its level by `margin` (hysteresis)."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=100)
    figure = models.CharField(max_length=16, choices=MonitorFigure.choices)
    kind = models.CharField(max_length=16, choices=ItemKind.choices)
    check_key = models.CharField(max_length=32, blank=True, help_text="The conversation check a figure reads.")
    window_hours = models.PositiveIntegerField()
    application = models.CharField(max_length=100, blank=True)
    metadata_name = models.CharField(max_length=64, blank=True)
    metadata_value = models.CharField(max_length=200, blank=True)
    min_n = models.PositiveIntegerField()
    direction = models.CharField(max_length=8, choices=Direction.choices)
    warning_level = models.FloatField()
    alert_level = models.FloatField()
    margin = models.FloatField(default=0)
    # Where a change of state is told: addresses, a signed webhook, a chat webhook (Slack-compatible JSON).
    mail_to = models.JSONField(default=list, blank=True)
    webhook_url = models.URLField(max_length=1000, blank=True)
    chat_url = models.URLField(max_length=1000, blank=True)
    # What the last evaluation left it in ("": not evaluated yet), and since when.
    state = models.CharField(max_length=8, choices=MonitorState.choices, blank=True)
    state_since = models.DateTimeField(null=True, blank=True)
    evaluated_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["org", "name"], name="monitor_unique_name")]

    def __str__(self) -> str:
        return f"monitor {self.name} of {self.org_id}"


class MonitorEvaluation(models.Model):
    """One evaluation of a monitor: the figure (None: no data), its n, the state it left the monitor in and the
    one it was in before. `changed` marks the evaluations that were told (a change of state)."""

    monitor = models.ForeignKey(Monitor, on_delete=models.CASCADE, related_name="evaluations")
    at = models.DateTimeField()
    value = models.FloatField(null=True, blank=True)
    n = models.PositiveIntegerField()
    state = models.CharField(max_length=8, choices=MonitorState.choices)
    previous = models.CharField(max_length=8, choices=MonitorState.choices, blank=True)
    changed = models.BooleanField(default=False)

    class Meta:
        indexes = [
            models.Index(fields=["monitor", "-at"], name="monitor_evaluation_latest"),
            models.Index(fields=["at"], name="monitor_evaluation_at"),  # the history's pruning
        ]

    def __str__(self) -> str:
        return f"{self.monitor_id} at {self.at:%Y-%m-%d %H:%M}: {self.state}"

"""What the background work records: grading passes, and the dashboards' counters with their hourly rebuilds."""

from django.db import models

from grading.models.criteria import ItemKind
from grading.models.orgs import Org


class GradingRun(models.Model):
    """One grading pass. Beat-triggered passes are unique per hour so a second beat cannot double one."""

    class Trigger(models.TextChoices):
        BEAT = "beat", "beat"
        MANUAL = "manual", "manual"

    hour_bucket = models.DateTimeField()
    trigger = models.CharField(max_length=8, choices=Trigger.choices)
    started_at = models.DateTimeField(auto_now_add=True)
    needing = models.PositiveIntegerField(default=0, help_text="Items whose current review did not match.")
    enqueued = models.PositiveIntegerField(default=0, help_text="Sent to the workers, recovered ones included.")
    recovered = models.PositiveIntegerField(
        default=0, help_text="Of those enqueued, items whose earlier task was lost (broker, worker, send)."
    )
    in_flight = models.PositiveIntegerField(
        default=0, help_text="Items whose task was waiting in the broker or held by a live worker: not enqueued again."
    )
    backlog = models.PositiveIntegerField(default=0, help_text="Left for later passes by the per-pass cap.")
    spend_capped = models.PositiveIntegerField(
        default=0, help_text="Items left waiting because a spend cap of their org or version was reached."
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["hour_bucket"], condition=models.Q(trigger="beat"), name="grading_run_one_beat_per_hour"
            )
        ]

    def __str__(self) -> str:
        return f"{self.trigger} pass at {self.started_at:%Y-%m-%d %H:%M}: {self.enqueued} enqueued, {self.backlog} left"


class Rollup(models.Model):
    """One counter of the dashboards' figures for one cell: (org, kind, criteria version, application, ISO
    week), whole or one dimension value's slice of it. Kept by grading/reviews/rollups.py in the same transaction
    as every write that changes what a review contributes, and rebuilt from the reviews every hour. `criteria_id`
    0: no criteria (thumbs)."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=16, choices=ItemKind.choices)
    criteria_id = models.IntegerField()
    application = models.CharField(max_length=100)
    week = models.DateField()
    metric = models.CharField(max_length=32)
    key1 = models.CharField(max_length=400)
    key2 = models.CharField(max_length=400)
    # "" for the whole cell; "release=2.4" for its reviews filed under that dimension value (`Review.slice`). A
    # database default too: a statement written before slices (an earlier migration's) books the whole cell.
    slice = models.CharField(max_length=300, default="", db_default="", blank=True)
    value = models.BigIntegerField()
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["org", "kind", "criteria_id", "application", "week", "metric", "key1", "key2", "slice"],
                name="rollup_unique_cell_counter",
            )
        ]
        indexes = [models.Index(fields=["org", "slice", "week"], name="rollup_org_slice_week")]

    def __str__(self) -> str:
        return f"{self.kind} c{self.criteria_id} {self.application} {self.week} {self.metric}:{self.key1}:{self.key2}"


class RollupRebuild(models.Model):
    """A rebuild of an org's rollups from the reviews (hourly, by the beat), with what it found: of every week, or
    of the weeks booked since the rebuild before (grading/reviews/rollups.py)."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+")
    rebuilt_at = models.DateTimeField()
    seconds = models.FloatField()
    rows = models.PositiveIntegerField(help_text="Counters recounted.")
    drifted = models.PositiveIntegerField(help_text="Counters the incremental upkeep had wrong (0 unless a bug).")
    mismatched = models.JSONField(default=dict, help_text="Per kind: counting reviews whose fingerprint differs.")
    weeks = models.JSONField(
        null=True, blank=True, help_text="The weeks recounted (their Mondays); null: every week (a full rebuild)."
    )
    unseen_from = models.BigIntegerField(
        null=True,
        blank=True,
        help_text="The oldest transaction its snapshot did not see (64-bit id): the next rebuild recounts the weeks "
        "of every counter written from it on.",
    )

    class Meta:
        indexes = [models.Index(fields=["org", "-rebuilt_at"], name="rollup_rebuild_latest")]

    def __str__(self) -> str:
        return f"rollups of org {self.org_id} rebuilt at {self.rebuilt_at:%Y-%m-%d %H:%M}"

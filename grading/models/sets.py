"""Regression sets: items copied out of the record, frozen with the answers people expected, and runs of a criteria
version over them (grading/sets/).

A set item is a copy, not a reference: the evidence as it was when the set was built (a conversation's active path,
a draft's title, body and sources) and the expected answers, so a run judges what people judged even after the live
item moved on. `item_id` names the item it was copied from, for erasure (grading/erasure/items.py removes the copies of
an erased item: a copy of erased text is still the text) and for the lists that link back to it.

A run grades every item of its set under one criteria version with that version's judge, through the grading path the
live items use (grading/conversations/grader.py `path_outcome`, grading/drafts/gate.py `draft_outcome`), and keeps
each item's answers in a run item: never a Review, so nothing it does reaches the queue, a counter or a webhook.
"""

from django.conf import settings
from django.db import models

from grading.models.criteria import CriteriaVersion, ItemKind
from grading.models.orgs import ApiKey, Org


class SetSource(models.TextChoices):
    """Where a set item's expected answers came from."""

    DECISIONS = "decisions", "decisions in the queue"
    LABELS = "labels", "labels"
    CORRECTIONS = "corrections", "corrections"


class RegressionSet(models.Model):
    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=64, help_text="Unique in the org: the API and the CLI name a set by it.")
    kind = models.CharField(max_length=16, choices=ItemKind.choices)
    built_from = models.JSONField(default=dict, help_text="The filter or the ids it was built from, as asked.")
    skipped = models.PositiveIntegerField(default=0, help_text="Items asked for that had no expected answer.")
    erased = models.PositiveIntegerField(default=0, help_text="Items removed since because they were erased.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_by_key = models.ForeignKey(ApiKey, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["org", "name"], name="regression_set_name_once")]

    def __str__(self) -> str:
        return f"set {self.name}"


class RegressionItem(models.Model):
    regression_set = models.ForeignKey(RegressionSet, on_delete=models.CASCADE, related_name="items")
    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=16, choices=ItemKind.choices)
    item_id = models.BigIntegerField(help_text="The conversation or draft it was copied from.")
    external_id = models.CharField(max_length=200)
    application = models.CharField(max_length=100, blank=True)
    fingerprint = models.CharField(max_length=80, help_text="Of the evidence copied (and judged by people).")
    evidence = models.JSONField(help_text="Conversations: the active path's messages; drafts: title, body, sources.")
    metadata = models.JSONField(default=dict, blank=True)
    source = models.CharField(max_length=16, choices=SetSource.choices)
    expected = models.JSONField(help_text="Per check the answer people gave, as a review stores it.")
    expected_verdict = models.CharField(max_length=16, blank=True, help_text="pass or fail, or blank.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["regression_set", "item_id"], name="regression_item_once_per_set")
        ]
        # Erasure finds an item's copies in every set of its org.
        indexes = [models.Index(fields=["org", "kind", "item_id"], name="regression_item_of_item")]

    def __str__(self) -> str:
        return f"{self.external_id} in set {self.regression_set_id}"


class RunState(models.TextChoices):
    RUNNING = "running", "running"
    DONE = "done", "done"


class RegressionRun(models.Model):
    regression_set = models.ForeignKey(RegressionSet, on_delete=models.CASCADE, related_name="runs")
    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+")
    criteria_version = models.ForeignKey(CriteriaVersion, on_delete=models.PROTECT, related_name="+")
    min_agreement = models.FloatField(null=True, blank=True, help_text="The bar `passed` is read against.")
    state = models.CharField(max_length=16, choices=RunState.choices, default=RunState.RUNNING)
    items = models.PositiveIntegerField(help_text="The set's items when the run started.")
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    started_by_key = models.ForeignKey(ApiKey, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    figures = models.JSONField(default=dict, blank=True, help_text="Written when it finishes (and after an erasure).")

    class Meta:
        indexes = [models.Index(fields=["regression_set", "-started_at"], name="regression_run_latest")]

    def __str__(self) -> str:
        return f"run {self.pk} of set {self.regression_set_id}"


class RegressionRunItem(models.Model):
    """One set item as a run graded it: the route and the machine's answer per check (no rationales: a run is read
    for its verdicts; a Review keeps the rest for live items)."""

    run = models.ForeignKey(RegressionRun, on_delete=models.CASCADE, related_name="graded")
    item = models.ForeignKey(RegressionItem, on_delete=models.CASCADE, related_name="+")
    route = models.CharField(max_length=16)
    reason = models.CharField(max_length=64, blank=True)
    answers = models.JSONField(default=dict, help_text="Per check the machine's answer; pass_fail on the whole item.")
    judge_calls = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "item"], name="regression_run_item_once")]

    def __str__(self) -> str:
        return f"item {self.item_id} of run {self.run_id}"

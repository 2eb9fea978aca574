"""Orgs, their API keys and their audit trail."""

import secrets

from django.conf import settings
from django.db import models


def new_webhook_secret() -> str:
    return secrets.token_hex(32)


class Org(models.Model):
    """A tenant: users, keys, criteria, memory, drafts and conversations belong to one org."""

    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=64, unique=True)
    webhook_secret = models.CharField(
        max_length=64, default=new_webhook_secret, help_text="Signs webhook deliveries (HMAC-SHA256)."
    )
    # After a rotation the old secret signs too, until `webhook_secret_previous_until`: a receiver that still holds
    # it keeps verifying while its operator moves to the new one.
    webhook_secret_previous = models.CharField(max_length=64, blank=True)
    webhook_secret_previous_until = models.DateTimeField(null=True, blank=True)
    # The metadata names (an item's `metadata` keys) the figures are sliced by, at most DIMENSIONS_MAX: each review
    # is filed under the item's values of these when it is graded (`Review.slice`). Set by an org admin.
    dimensions = models.JSONField(default=list, blank=True, help_text="Metadata names the figures are sliced by.")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.slug


class ApiKey(models.Model):
    """A pipeline's credential. Only a SHA-256 of the key is stored: keys are 256-bit random, so a
    fast hash is enough (there is nothing to brute-force), and it lets us look a key up by its hash."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, help_text="The first characters of the key, to recognise it by.")
    key_hash = models.CharField(max_length=64, unique=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.org.slug}/{self.name} ({self.prefix}…)"

    # What the API asks of whoever calls it (a key, or a person's token: grading/api/keys.py `Caller`).
    @property
    def person(self) -> None:
        """An org's key names no person: routes that record a person's act refuse it."""
        return None


class AuditEvent(models.Model):
    """Who did what, when, to which object. Written by `audit_record`, never updated."""

    org = models.ForeignKey(Org, null=True, blank=True, on_delete=models.CASCADE, related_name="audit_events")
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    api_key = models.ForeignKey(ApiKey, null=True, blank=True, on_delete=models.SET_NULL)
    action = models.CharField(max_length=64)
    object_type = models.CharField(max_length=64, blank=True)
    object_id = models.CharField(max_length=64, blank=True)
    detail = models.JSONField(default=dict, blank=True)
    # The item (conversation or draft) the event concerns, whatever object it names (a claim, a decision, a
    # review): an item's page shows its trail through these. Plain ids, not keys: the trail outlives an erasure.
    item_kind = models.CharField(max_length=16, blank=True)
    item_id = models.BigIntegerField(null=True, blank=True)
    at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        indexes = [
            models.Index(fields=["org", "action", "at"]),
            models.Index(fields=["org", "-at", "-id"], name="audit_org_recent"),
            models.Index(
                fields=["org", "item_kind", "item_id", "at"],
                condition=models.Q(item_id__isnull=False),
                name="audit_item_trail",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.action} {self.object_type}:{self.object_id}"


class RetentionPolicy(models.Model):
    """How long an org keeps the items of one kind: the daily retention pass erases those whose last activity is
    older than `days` (grading/erasure)."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=16, choices=[("conversation", "conversation"), ("draft", "draft")])
    days = models.PositiveIntegerField()
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["org", "kind"], name="retention_one_per_kind"),
            models.CheckConstraint(condition=models.Q(days__gte=1), name="retention_at_least_a_day"),
        ]

    def __str__(self) -> str:
        return f"{self.org} keeps {self.kind}s {self.days} days"


class ErasureScope(models.TextChoices):
    CONVERSATION = "conversation", "one conversation"
    DRAFT = "draft", "one draft"
    END_USER = "end_user", "every item of an end user"
    RETENTION = "retention", "past the retention period"


class ErasureState(models.TextChoices):
    PENDING = "pending", "pending"
    RUNNING = "running", "running"
    DONE = "done", "done"


class Erasure(models.Model):
    """A request to erase items, and its tombstone once done: what was asked, by whom, when, and how much went.
    Never any content: `target` is an external id, or a SHA-256 of an end-user id. Worked in batches; `cursor`
    is the last item id erased, so a worker that died mid-way resumes where it stopped."""

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+")
    scope = models.CharField(max_length=16, choices=ErasureScope.choices)
    kind = models.CharField(max_length=16, blank=True, help_text="The item kind; blank: both.")
    target = models.CharField(max_length=200, blank=True)
    before = models.DateTimeField(null=True, blank=True, help_text="Retention: items last active before this.")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    api_key = models.ForeignKey(ApiKey, null=True, blank=True, on_delete=models.SET_NULL)
    requested_at = models.DateTimeField()
    state = models.CharField(max_length=16, choices=ErasureState.choices, default=ErasureState.PENDING)
    cursor = models.BigIntegerField(default=0)
    erased = models.JSONField(default=dict, blank=True, help_text="Counts per kind of row erased.")
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["org", "-requested_at"], name="erasure_org_recent"),
            models.Index(fields=["state"], condition=~models.Q(state="done"), name="erasure_unfinished"),
        ]

    def __str__(self) -> str:
        return f"erasure {self.pk} ({self.scope}) of org {self.org_id}: {self.state}"

"""The people side: who belongs to which org, in which role."""

from django.conf import settings
from django.db import models

from grading.models import Org


class Role(models.TextChoices):
    OPERATOR = "operator", "operator"
    CRITERIA_ADMIN = "criteria_admin", "criteria admin"
    STAKEHOLDER = "stakeholder", "stakeholder"


class Membership(models.Model):
    """A user's role in an org. A person with two roles in one org has two memberships."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=20, choices=Role.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "org", "role"], name="membership_unique_role")]

    def __str__(self) -> str:
        return f"{self.user} · {self.get_role_display()} · {self.org}"


class Claim(models.Model):
    """An operator's lease on a review routed to humans.

    Live while it has not ended and `expires_at` is still ahead: expiry is a comparison with now, so no
    job has to free anything. An expired claim is closed (as `expired`) by whoever takes the item over.
    The partial unique constraint makes a second open claim on one review impossible, not unlikely.
    """

    class End(models.TextChoices):
        RELEASED = "released", "released"
        DECIDED = "decided", "decided"
        EXPIRED = "expired", "expired"

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="claims")
    review = models.ForeignKey("grading.Review", on_delete=models.CASCADE, related_name="claims")
    holder = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="claims")
    claimed_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    end = models.CharField(max_length=16, choices=End.choices, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["review"], condition=models.Q(ended_at__isnull=True), name="claim_one_open_per_review"
            ),
            models.CheckConstraint(
                condition=models.Q(ended_at__isnull=True, end="")
                | models.Q(ended_at__isnull=False) & ~models.Q(end=""),
                name="claim_end_with_reason",
            ),
        ]
        indexes = [
            models.Index(fields=["org", "expires_at"], condition=models.Q(ended_at__isnull=True), name="claim_open"),
            models.Index(
                fields=["holder", "expires_at"], condition=models.Q(ended_at__isnull=True), name="claim_open_by_holder"
            ),
        ]

    def __str__(self) -> str:
        return f"claim of review {self.review_id} by {self.holder_id} until {self.expires_at:%H:%M}"


class Decision(models.Model):
    """What an operator decided about a review routed to humans, bound to that review's score identity.

    One per review (a constraint, so two racing submissions cannot both land). `fingerprint` and
    `criteria_version` repeat the review's identity so the decision reads on its own in exports.
    """

    class Outcome(models.TextChoices):
        APPROVE = "approve", "approve"
        REJECT = "reject", "reject"
        SEND_BACK = "send_back", "send back"
        # Conversations: the human verdicts per check, summarised as the routes would be.
        PASS = "pass", "pass"  # noqa: S105 - an outcome, not a password
        FAIL = "fail", "fail"
        UNKNOWN = "unknown", "unknown"

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="decisions")
    review = models.ForeignKey("grading.Review", on_delete=models.PROTECT, related_name="decisions")
    claim = models.ForeignKey(Claim, on_delete=models.PROTECT, related_name="decisions")
    kind = models.CharField(max_length=16)
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    checks = models.JSONField(default=dict, blank=True, help_text="Conversations: the human verdict per check.")
    note = models.TextField(blank=True)
    fingerprint = models.CharField(max_length=80)
    criteria_version = models.ForeignKey("grading.CriteriaVersion", on_delete=models.PROTECT, related_name="+")
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="decisions"
    )
    decided_at = models.DateTimeField()
    learning = models.ForeignKey(
        "grading.MemoryItem",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The org learning the note became, when the operator asked for one.",
    )

    class Meta:
        constraints = [models.UniqueConstraint(fields=["review"], name="decision_one_per_review")]
        indexes = [models.Index(fields=["org", "decided_at"])]

    def __str__(self) -> str:
        return f"{self.outcome} on review {self.review_id}"


class QueueHead(models.Model):
    """How far the start of an org's queue is known to be decided: a shortcut past the decided prefix.

    Invariant: every current review routed to humans of this org and priority whose (finished_at, review id)
    sorts at or before (`finished_at`, `review_id`) has a decision. It cannot break: decisions are never removed,
    a review's key never changes, and a review that becomes current later is written later, so it sorts after
    the head (the head only covers reviews that finished more than a margin ago). Without it, every read of the
    queue would step over all the decided items still current, oldest first: the longer the service runs, the
    slower the queue. It is only a lower bound for reads; losing it costs time, never an item.
    """

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+")
    priority = models.PositiveSmallIntegerField()
    finished_at = models.DateTimeField()
    review_id = models.BigIntegerField()
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["org", "priority"], name="queue_head_one_per_priority")]

    def __str__(self) -> str:
        return f"{self.org_id}/{self.priority}: decided through {self.finished_at:%Y-%m-%d %H:%M} #{self.review_id}"

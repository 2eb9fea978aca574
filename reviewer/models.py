"""The people side: who belongs to which org, in which role, and who holds which queue item."""

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
    # No reverse accessors on grading's models: the domain core never reaches into the people side.
    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+")
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

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+")
    review = models.ForeignKey("grading.Review", on_delete=models.CASCADE, related_name="+")
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

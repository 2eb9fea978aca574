"""The people side: who belongs to which org, in which role, and who holds which queue item."""

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models

from grading.models import Org


class Role(models.TextChoices):
    OPERATOR = "operator", "operator"
    CRITERIA_ADMIN = "criteria_admin", "criteria admin"
    STAKEHOLDER = "stakeholder", "stakeholder"


class Membership(models.Model):
    """A user's role in an org. A person with two roles in one org has two memberships.

    A membership covers the whole org, or only some of it (its reach, `reviewer/access.py`): the conversations of
    the applications it names, and drafts (the draft gate, an application of its own) when `drafts` says so.
    A criteria admin's membership always covers the whole org: a criteria version governs every application of its
    kind, and publishing it re-grades them all.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    # No reverse accessors on grading's models: the domain core never reaches into the people side.
    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+")
    role = models.CharField(max_length=20, choices=Role.choices)
    applications = ArrayField(
        models.CharField(max_length=100),
        null=True,
        blank=True,
        help_text="Empty (null): the whole org. Otherwise only these applications' conversations.",
    )
    drafts = models.BooleanField(default=True, help_text="With applications named: whether drafts are covered too.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "org", "role"], name="membership_unique_role"),
            # A limited membership covers something (an empty list without drafts would be a role with nothing in
            # it), and never a criteria admin's.
            models.CheckConstraint(
                condition=models.Q(applications__isnull=True)
                | (~models.Q(role="criteria_admin") & (models.Q(drafts=True) | models.Q(applications__len__gt=0))),
                name="membership_reach_covers_something",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} · {self.get_role_display()} · {self.org}"


class Claim(models.Model):
    """An operator's lease on a review routed to humans.

    Live while it has not ended and `expires_at` is still ahead: expiry is a comparison with now, so no
    job has to free anything. An expired claim is closed (as `expired`) by whoever takes the item over.
    An item has as many live claims as open slots (`CriteriaVersion.slots`: one, unless several people decide it);
    the claim services count them under the review's row lock, and the partial unique constraint makes a second
    open claim by one person on one review impossible, not unlikely.
    """

    class End(models.TextChoices):
        RELEASED = "released", "released"
        DECIDED = "decided", "decided"
        ANSWERED = "answered", "answered"  # one slot of an item several people decide
        DECLINED = "declined", "declined"  # given back with a reason; never an answer
        EXPIRED = "expired", "expired"

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+")
    review = models.ForeignKey("grading.Review", on_delete=models.CASCADE, related_name="+")
    holder = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="claims")
    claimed_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    end = models.CharField(max_length=16, choices=End.choices, blank=True)
    reason = models.TextField(blank=True, help_text="Why the holder declined the item.")

    class Meta:
        constraints = [
            # An item several people decide has a claim per slot; one person never holds two of one item.
            models.UniqueConstraint(
                fields=["review", "holder"], condition=models.Q(ended_at__isnull=True), name="claim_one_open_per_holder"
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

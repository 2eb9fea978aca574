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

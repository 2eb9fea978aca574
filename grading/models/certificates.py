"""Certificates: where the judge may decide alone, computed from people's unbiased verdicts.

One row per computation for a criteria version and a judge; a recomputation writes a new row, so a review names
the certificate it was routed under for good. How they are computed: grading/certify/."""

from django.db import models

from grading.models.criteria import CriteriaVersion
from grading.models.orgs import Org


class Certificate(models.Model):
    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="+")
    criteria_version = models.ForeignKey(CriteriaVersion, on_delete=models.CASCADE, related_name="certificates")
    judge_key = models.CharField(max_length=64, help_text="The judge it certifies: a review's `judge_key`.")
    agreement = models.FloatField(help_text="The target it was computed for: 1-alpha.")
    confidence = models.FloatField(help_text="The probability the guarantee holds: 1-delta, split among the checks.")
    checks = models.JSONField(
        default=dict,
        help_text="Check key (pass_fail for a draft's verdict) -> {labels, disagreements, threshold, bound, coverage,"
        " more_labels}; threshold null: no certificate for that check.",
    )
    labels = models.PositiveIntegerField(help_text="People's verdicts it was computed from.")
    labelled_from = models.DateTimeField(null=True, blank=True)
    labelled_to = models.DateTimeField(null=True, blank=True)
    computed_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["criteria_version", "judge_key", "-computed_at"], name="certificate_latest")]

    def __str__(self) -> str:
        return f"certificate {self.pk} of criteria {self.criteria_version_id} ({self.computed_at:%Y-%m-%d %H:%M})"

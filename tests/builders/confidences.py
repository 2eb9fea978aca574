"""A certificate for a review to have been routed under: what the API and the exports name (how certificates are
computed is grading/certify/'s)."""

from datetime import timedelta

from grading.models import Certificate, Review


def routed_under_a_certificate(review: Review, *, agreement: float = 0.9, confidence: float = 0.9) -> Certificate:
    """A certificate of the review's criteria version and judge, computed just before it, and the review routed
    under it."""
    certificate = Certificate.objects.create(
        org_id=review.org_id,
        criteria_version=review.criteria_version,
        judge_key=review.judge_key,
        agreement=agreement,
        confidence=confidence,
        checks={},
        labels=250,
        computed_at=review.finished_at.replace(microsecond=0) - timedelta(hours=1),
    )
    Review.objects.filter(pk=review.pk).update(certificate=certificate)
    review.certificate = certificate
    return certificate

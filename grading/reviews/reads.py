"""Reads of reviews: the one that counts for an item, how many people decide one, and the staleness audit."""

from dataclasses import dataclass

from django.db.models import Count, F

from grading.models import Conversation, Draft, ItemKind, Org, Review, ReviewState


def current_review(subject: Conversation | Draft) -> Review | None:
    """The subject's review that counts, if it has one."""
    field = "draft" if isinstance(subject, Draft) else "conversation"
    return Review.objects.counting().with_state().filter(**{field: subject}).select_related("criteria_version").first()


def review_confidence_json(review: Review) -> dict:
    """How sure the machine was of a review, as the API and the webhooks give it: the judge's confidence per check
    key (a draft's verdict as `pass_fail`), where they came from ("logprobs", or "" with none), and the certificate
    the review was routed under (null: the fixed bands), read only when it has one."""
    certificate = review.certificate if review.certificate_id is not None else None
    return {
        "confidences": review.confidences,
        "confidence_source": review.confidence_source,
        "certificate": None
        if certificate is None
        else {
            "id": certificate.pk,
            "computed_at": certificate.computed_at,
            "agreement": certificate.agreement,
            "confidence": certificate.confidence,
        },
    }


def review_slots(review: Review) -> int:
    """How many people decide the review: its criteria version's rule (`CriteriaVersion.slots_of`)."""
    return review.criteria_version.slots_of(review_id=review.pk, audit=review.audit)


@dataclass(frozen=True)
class StalenessAudit:
    """The staleness audit, per kind.

    `stale`: items whose latest review stopped counting (their evidence or criteria changed) and wait to be
    graded again; zero once a grading pass has run and its tasks are done. `mismatched`: reviews the state
    says count although their fingerprint differs from the item's, found by comparing the columns directly
    rather than by asking the state; zero always, or the writes failed to keep the state true.
    """

    stale: dict[str, int]
    mismatched: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.stale.values()) + sum(self.mismatched.values())


def staleness_audit(org: Org | None = None) -> StalenessAudit:
    reviews = Review.objects.all() if org is None else Review.objects.filter(org=org)
    stale = dict(reviews.in_state(ReviewState.STALE).values_list("kind").annotate(n=Count("pk")))
    counting = reviews.counting()
    mismatched = {
        ItemKind.CONVERSATION: counting.filter(kind=ItemKind.CONVERSATION)
        .exclude(fingerprint=F("conversation__fingerprint"))
        .count(),
        ItemKind.DRAFT: counting.filter(kind=ItemKind.DRAFT).exclude(fingerprint=F("draft__fingerprint")).count(),
    }
    return StalenessAudit(stale={kind: stale.get(kind, 0) for kind in ItemKind.values}, mismatched=mismatched)

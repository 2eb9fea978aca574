"""The pipeline's view of a draft: what the API answers and the webhook sends."""

from grading.models import Correction, Decision, Draft, ItemKind, Review
from grading.reviews.reads import current_review, review_confidence_json
from grading.reviews.spend import spend_waiting


def draft_status(draft: Draft) -> dict:
    """The pipeline's view of a draft: the API answer and the webhook body, with a person's correction of it."""
    return _review_status(draft) | {"correction": correction_of(draft)}


def _review_status(draft: Draft) -> dict:
    review = current_review(draft)
    status = {
        "id": draft.pk,
        "external_id": draft.external_id,
        "run_id": draft.run_id or None,
        "metadata": draft.metadata,
        "route": "pending",
    }
    if review is None:
        blocked = spend_waiting(org_id=draft.org_id, kind=ItemKind.DRAFT)
        return status | {"score": None, "sub_scores": None, "checks": None, "findings": [], "judge_issues": [],
                         "repairs": None, "identity": None, "decision": None, "confidences": None,
                         "confidence_source": None, "certificate": None,
                         "waiting": blocked.as_json() if blocked else None}  # fmt: skip
    return status | {
        "route": review.route,
        "reason": review.reason,
        "state": review.state_now,
        "score": review.score,
        "spread": review.spread,
        "sub_scores": review.sub_scores or None,
        "checks": _checks_of(review),
        "findings": review.findings,
        "judge_issues": review.judge_issues,
        "repairs": {"diff": review.repairs["diff"], "body": review.repairs["body"]} if review.repairs else None,
        "identity": {
            "fingerprint": review.fingerprint,
            "criteria_version": review.criteria_version.number,
            "criteria_fingerprint": review.criteria_fingerprint,
            "judge": review.judge,
            "memory_snapshot": review.memory_snapshot,
            "judged_at": review.finished_at,
            "stages": review.stages,
        },
        "decision": _decision_of(review),
        **review_confidence_json(review),
    }


def _checks_of(review: Review) -> dict:
    """Each check the review's criteria version asks, in its order, with what the judge answered: a draft's checks
    are scores (its `sub_scores`, kept beside for the pipelines that read them)."""
    scores = review.sub_scores or {}
    return {
        check.key: {"name": check.name, "kind": check.kind, "score": scores.get(check.key)}
        for check in review.criteria_version.check_set().checks
    }


def _decision_of(review: Review) -> dict | None:
    decision = Decision.objects.filter(review=review).select_related("decided_by").first()
    if decision is None:
        return None
    return {
        "outcome": decision.outcome,
        "note": decision.note,
        "by": decision.decided_by.get_username() if decision.decided_by else None,
        "at": decision.decided_at,
    }


def correction_of(draft: Draft) -> dict | None:
    """The correction whose revision the draft holds now (a person's "approve as corrected"): the corrected body the
    pipeline should publish, the diff from its own, who corrected it, and how the gate settled it (`grading`,
    `approved`, or `refused` while a hard check still fails). None when no person corrected this content (a
    resubmission after a correction makes it the pipeline's again)."""
    correction = (
        Correction.objects.filter(
            draft_id=draft.pk, kind=Correction.Kind.DRAFT_BODY, corrected_fingerprint=draft.fingerprint
        )
        .select_related("author")
        .order_by("-pk")
        .first()
    )
    if correction is None:
        return None
    return {
        "id": correction.pk,
        "state": correction.state,
        "original_fingerprint": correction.evidence_fingerprint,
        "corrected_fingerprint": correction.corrected_fingerprint,
        "body": correction.corrected,
        "diff": correction.diff,
        "by": correction.author.get_username() if correction.author else None,
        "at": correction.created_at,
        "settled_at": correction.settled_at,
        "corrected_review": correction.review_id,
        "regrade_review": correction.regrade_id,
    }

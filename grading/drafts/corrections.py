"""A draft approved as a person corrected it (issue 44, "fix and approve"), from the edit to its settling.

The corrected body is new evidence: it becomes the draft's content through the pipeline's own service
(`draft_submit`), so the review the person read stops counting by the evidence contract and the draft is owed a
grading like any resubmission. The gate grades it (checks and judge) under the active criteria, which are the
corrected review's (it was waiting, so its version was active; a publication in between is caught when settling),
routes it to people with the reason `corrected`, and settles the correction in the transaction that writes that
review:

1. no hard finding remains (whatever the judge thought) and the criteria are the corrected review's: the person's
   approval stands, as a decision on the new review in their name (`decision_as_corrected_record`);
2. a hard finding remains: the correction is refused, and the new review waits in the queue with its findings;
3. other criteria were published in between: the correction is overtaken, and the new review waits likewise. So
   is a correction whose revision the pipeline replaced before the gate graded it (`corrections_overtaken`, called
   by the resubmission).

What the pipeline is told of it is `draft_status` (grading/reviews/draft_reads.py): its `correction`.
"""

import difflib
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from grading.checks.budget import ChecksOverBudget, checks_budget
from grading.checks.checks import Finding, check_draft
from grading.core.outcomes import CORRECTED
from grading.core.schemas import DraftIn, refuse_unstorable
from grading.drafts.submit import draft_submit
from grading.models import Correction, Decision, Draft, Review, ReviewState, Route
from grading.models.audit import audit_record
from grading.reviews.reads import review_slots
from grading.reviews.services import ReviewOutcome, decision_as_corrected_record, published_draft_rules

APPROVED_AS_CORRECTED = "Approved as corrected: no hard check fails on the corrected revision."


class CorrectionRefused(Exception):
    """The corrected body cannot be taken; the message says why, naming the field. Nothing was written."""

    def __init__(self, message: str, *, too_large: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.too_large = too_large


def correction_body_refusal(body: str) -> CorrectionRefused | None:
    """Why `body` cannot be a draft's corrected body, or None: held to what a pipeline's body is held to (not empty,
    storable, within MAX_DRAFT_BYTES)."""
    size = len(body.encode("utf-8", "surrogatepass"))
    if size > settings.MAX_DRAFT_BYTES:
        return CorrectionRefused(
            f"body: the corrected body is {size} bytes; the limit is {settings.MAX_DRAFT_BYTES} (MAX_DRAFT_BYTES).",
            too_large=True,
        )
    if not body.strip():
        return CorrectionRefused("body: the corrected body is empty.")
    try:
        refuse_unstorable(body)
    except ValueError as exc:
        return CorrectionRefused(f"body: the corrected body {exc}.")
    return None


def correction_check(*, review: Review, body: str) -> list[Finding]:
    """The deterministic checks of the review's criteria on an edited body, as the gate runs them (the proof terms
    the review's judge read): nothing is written and no judge is asked. Raises CorrectionRefused for a body that
    cannot be a draft's, or one the checks could not finish within their CPU budget."""
    if refusal := correction_body_refusal(body):
        raise refusal
    rules = published_draft_rules(review.criteria_version)
    memory = review.memory_used if isinstance(review.memory_used, dict) else {}
    facts = memory.get("facts") or []
    proof_terms = [term for fact in facts if isinstance(fact, dict) for term in fact.get("proof_terms") or []]
    try:
        with checks_budget(settings.CHECKS_CPU_BUDGET_SECONDS):
            return check_draft(body=body, rules=rules, source_urls=review.draft.source_urls, proof_terms=proof_terms)
    except ChecksOverBudget:
        raise CorrectionRefused(
            f"body: the checks could not finish within {settings.CHECKS_CPU_BUDGET_SECONDS:g} s of CPU on this body."
        ) from None


def correction_diff(*, slug: str, before: str, after: str) -> str:
    """A unified diff from the draft's body to the corrected one, labelled `<slug>/original` and `<slug>/corrected`."""
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile=f"{slug}/original",
            tofile=f"{slug}/corrected",
        )
    )


def draft_locked(draft_id: int) -> Draft | None:
    """Lock the draft's row, first: a resubmission locks the draft and then its reviews, and so must a correction."""
    return Draft.objects.select_for_update().select_related("org").filter(pk=draft_id).first()


def correction_submit(
    *, review: Review, draft: Draft, author: AbstractBaseUser, corrected: str, now: datetime
) -> Correction:
    """Make `corrected` the draft's new revision, owed a grading, and record the correction. Inside the caller's
    transaction, with the draft's row locked (`draft_locked`) and `review` (the one `author` decided on, still
    waiting) checked by the caller. Raises CorrectionRefused for a body a pipeline could not send, one that changes
    nothing and one an earlier review read; the caller's transaction then writes nothing."""
    if refusal := correction_body_refusal(corrected):
        raise refusal
    original, original_fingerprint = draft.body, draft.fingerprint
    payload = DraftIn.model_construct(
        external_id=draft.external_id,
        title=draft.title,
        slug=draft.slug,
        body=corrected,
        source_urls=list(draft.source_urls),
        callback_url=draft.callback_url or None,
        run_id=draft.run_id or None,
        end_user=None,
    )
    revised = draft_submit(org=draft.org, payload=payload)
    if revised.fingerprint == original_fingerprint:
        raise CorrectionRefused("body: the corrected body is the draft's own: approve the draft instead.")
    if Review.objects.counting().filter(draft_id=draft.pk, fingerprint=revised.fingerprint).exists():
        # The resubmission's rule counts an earlier review of this content again, with no grading to settle on.
        raise CorrectionRefused(
            "body: the corrected body is an earlier revision of this draft, graded already: open its review instead."
        )
    return Correction.objects.create(
        org_id=draft.org_id,
        kind=Correction.Kind.DRAFT_BODY,
        review=review,
        draft=draft,
        evidence_fingerprint=original_fingerprint,
        original=original,
        corrected=corrected,
        corrected_fingerprint=revised.fingerprint,
        diff=correction_diff(slug=draft.slug, before=original, after=corrected),
        state=Correction.State.GRADING,
        author=author,
        created_at=now,
    )


# --- the gate's side ------------------------------------------------------------------------------------------------


def correction_awaiting(draft: Draft) -> Correction | None:
    """The correction whose revision the draft now holds, while it waits for the gate."""
    return (
        Correction.objects.filter(
            draft_id=draft.pk,
            kind=Correction.Kind.DRAFT_BODY,
            state=Correction.State.GRADING,
            corrected_fingerprint=draft.fingerprint,
        )
        .select_related("author")
        .order_by("-pk")
        .first()
    )


def correction_route(outcome: ReviewOutcome) -> ReviewOutcome:
    """A corrected revision goes to people, whatever the gate alone would say: a person's approval waits on it. An
    error stays one (the next pass grades it again). What the gate alone said is kept in the detail."""
    if outcome.route == Route.ERROR:
        return outcome
    alone = outcome.route + (f" ({outcome.reason})" if outcome.reason else "")
    # Shown to whoever decides the item next, blind review included: it names nobody and no person's verdict.
    detail = f"This body is a person's correction, graded again; the gate alone would say {alone}."
    return replace(outcome, route=Route.HUMAN, reason=CORRECTED, detail=detail)


def correction_settle(*, review: Review) -> Correction | None:
    """Settle the correction `review` graded, in the transaction that wrote it: overtaken when other criteria graded
    it, approved (a decision in its author's name) when no hard finding remains, else refused. None when the review
    graded no correction waiting, or is an error (graded again later) or no longer waiting."""
    correction = (
        Correction.objects.select_for_update(of=("self",))
        .select_related("review", "author")
        .filter(
            draft_id=review.draft_id,
            kind=Correction.Kind.DRAFT_BODY,
            state=Correction.State.GRADING,
            corrected_fingerprint=review.fingerprint,
        )
        .order_by("-pk")
        .first()
    )
    if correction is None or review.route != Route.HUMAN or review.state != ReviewState.WAITING:
        return None
    now = timezone.now()
    hard = [finding for finding in review.findings if isinstance(finding, dict)]
    same_criteria = review.criteria_version_id == correction.review.criteria_version_id
    correction.regrade, correction.settled_at = review, now
    if not same_criteria:
        correction.state = Correction.State.OVERTAKEN
    elif not hard and correction.author is not None:
        several = review_slots(correction.review) > 1
        basis = Decision.Basis.ADJUDICATED if several else Decision.Basis.ONE
        decision_as_corrected_record(
            review_id=review.pk, decided_by=correction.author, decided_at=now, basis=basis, note=APPROVED_AS_CORRECTED
        )
        correction.state = Correction.State.APPROVED
    else:
        correction.state = Correction.State.REFUSED
    correction.save(update_fields=["regrade", "settled_at", "state"])
    detail = {
        "correction": correction.pk,
        "review": review.pk,
        "corrected_review": correction.review_id,
        "fingerprint": review.fingerprint,
        "findings": sorted({str(finding.get("code")) for finding in hard}),
        "same_criteria": same_criteria,
    }
    if correction.state == Correction.State.APPROVED:
        detail["outcome"] = Decision.Outcome.APPROVE
    audit_record(action=f"correction.{correction.state}", org=review.org, actor=correction.author,
                 target=correction, detail=detail, item=review)  # fmt: skip
    return correction


def corrected_review_record(record: Callable[[], Review | None], *, correction: Correction | None) -> Review | None:
    """Write the gate's review (`record()`) and settle the correction it graded in the same transaction, so a
    worker that dies between the two cannot leave a review written and its correction waiting forever."""
    if correction is None:
        return record()
    with transaction.atomic():
        review = record()
        if review is not None:
            correction_settle(review=review)
    return review

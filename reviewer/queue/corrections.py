"""The queue's side of "approve as corrected" on a draft: who may correct, and what the item page shows of it.

Grading owns the revision, its grading and its settling (grading/drafts/corrections.py). Here, under the same locks and
rules as a decision (reviewer/queue/services.py): the draft's row first (the order a resubmission locks in), then the
review. The person holds the live lease on a review still waiting and decides the item: the one person, or on an
item several people decide, its adjudicator once every answer is in (the answers' verdict is theirs to settle, and a
correction settles it). An audit-sample item is not corrected: it measures the machine on what the pipeline sent.
The precondition is the fingerprint the editor was loaded with: a correction of content that moved on since (another
operator's correction, a resubmission) is refused with who or what moved it, and nothing is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from grading.checks.checks import Finding
from grading.drafts.corrections import CorrectionRefused, correction_submit, draft_locked
from grading.models import Answer, Correction, ItemKind, Review
from grading.models.audit import audit_record
from grading.models.criteria import ANSWERED_CANNOT_ADJUDICATE, may_adjudicate
from grading.reviews.blind import Blind
from grading.reviews.reads import review_slots
from reviewer.models import Claim
from reviewer.queue.display import stale_reason
from reviewer.queue.reads import operator_reaches, slots_now
from reviewer.queue.services import Refused, claim_end, holder_claim, locked_review

AUDIT_NOT_CORRECTED = "An audit-sample item is decided on what the pipeline sent: approve, reject or send it back."
QUOTE_CHARS = 80  # of a finding's text, beside the editor


def correction_create(
    *, user: AbstractBaseUser, review_id: int, fingerprint: str, body: str, now: datetime | None = None
) -> Correction:
    """Approve the draft of `review_id` as `user` corrected it to `body`, the editor loaded on `fingerprint`; or
    refuse (`Refused`: "invalid" for the body, else why the person may not) and write nothing."""
    now = now or timezone.now()
    reaches = operator_reaches(user)
    with transaction.atomic():
        draft_id = Review.objects.filter(pk=review_id, kind=ItemKind.DRAFT).values_list("draft_id", flat=True).first()
        draft = draft_locked(draft_id) if draft_id is not None else None
        review = locked_review(reaches, review_id)
        if draft is None or review.kind != ItemKind.DRAFT:
            raise Refused("not_found", "There is no such draft in your queue.")
        if draft.fingerprint != fingerprint:
            raise Refused("changed", moved_on(draft_id=draft.pk, fingerprint=fingerprint))
        claim = holder_claim(review, user, now)
        if not Review.objects.waiting().filter(pk=review.pk).exists() or review.fingerprint != fingerprint:
            raise Refused(
                "changed", f"The item changed since you opened it; nothing was recorded. {stale_reason(review)}"
            )
        if review.audit:
            raise Refused("invalid", AUDIT_NOT_CORRECTED)
        _refuse_unless_deciding(review, user, now)
        try:
            correction = correction_submit(review=review, draft=draft, author=user, corrected=body, now=now)
        except CorrectionRefused as refused:
            raise Refused("too_large" if refused.too_large else "invalid", refused.message) from None
        claim_end(claim, end=Claim.End.DECIDED, now=now)
        audit_record(
            action="correction.create",
            org=review.org,
            actor=user,
            target=correction,
            detail={
                "review": review.pk,
                "claim": claim.pk,
                "outcome": "approve_as_corrected",
                "fingerprint": correction.evidence_fingerprint,
                "corrected_fingerprint": correction.corrected_fingerprint,
                "criteria_version": review.criteria_version.number,
            },
            item=review,
        )
    return correction


def _refuse_unless_deciding(review: Review, user: AbstractBaseUser, now: datetime) -> None:
    """On an item several people decide, only its adjudicator corrects: an answer is one of several, blind."""
    slots = review_slots(review)
    if slots == 1:
        return
    if not slots_now(review, now).answers_in:
        raise Refused(
            "answers",
            f"{slots} people decide this item: give your answer; once every answer is in, the adjudicator may approve "
            "it as corrected.",
        )
    answered_by = list(Answer.objects.filter(review=review).values_list("person_id", flat=True))
    if not may_adjudicate(slots=slots, answered_by=answered_by, person_id=user.pk):
        raise Refused("invalid", ANSWERED_CANNOT_ADJUDICATE)


def moved_on(*, draft_id: int, fingerprint: str) -> str:
    """Why the draft no longer holds the content an editor was loaded with: who corrected it, or the pipeline."""
    taken = (
        Correction.objects.filter(draft_id=draft_id, kind=Correction.Kind.DRAFT_BODY, evidence_fingerprint=fingerprint)
        .select_related("author")
        .order_by("pk")
        .first()
    )
    if taken is not None:
        by = taken.author.get_username() if taken.author else "a former user"
        return (
            f"{by} corrected this draft at {taken.created_at:%H:%M:%S} UTC, after you opened it; nothing was recorded. "
            "Your text is kept below: reload to read their revision before you change it again."
        )
    return (
        "The pipeline resubmitted this draft after you opened it; nothing was recorded. Your text is kept below: "
        "reload to read the new content."
    )


# --- what the item page shows -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MarkedFinding:
    """A finding beside the editor: its message, code and severity, and the text it points at."""

    code: str
    message: str
    severity: str
    quotes: list[str]


def marked(findings: list[Finding] | list[dict], body: str) -> list[MarkedFinding]:
    """Findings (as the checks give them, or as a review stores them) with the text each span quotes in `body`."""
    shown = []
    for finding in findings:
        data = finding.as_json() if isinstance(finding, Finding) else finding
        if not isinstance(data, dict):
            continue
        quotes = []
        for span in data.get("spans") or []:
            if isinstance(span, list | tuple) and len(span) == 2 and all(isinstance(n, int) for n in span):
                quote = body[span[0] : span[1]]
                quotes.append(quote if len(quote) <= QUOTE_CHARS else quote[: QUOTE_CHARS - 1] + "…")
        shown.append(MarkedFinding(str(data.get("code", "")), str(data.get("message", "")),
                                   str(data.get("severity", "")), quotes))  # fmt: skip
    return shown


@dataclass(frozen=True)
class CorrectionPanel:
    """The draft's corrections, newest first, and whether this person may correct the review shown now."""

    corrections: list[Correction]
    may_correct: bool
    grading: bool  # one waits for the gate: the panel refreshes itself
    body: str  # where the editor starts: the body as judged (repaired, when the gate repaired it)
    findings: list[MarkedFinding]  # the review's findings on that body, beside the editor


def correction_panel(
    *, review: Review, user: AbstractBaseUser, deciding: bool, blind: Blind, now: datetime, body: str, findings: list
) -> CorrectionPanel | None:
    """What the item page shows of corrections to `user`: None while blind review hides what people said of the item
    (a correction is an approval), unless `user` made them."""
    corrections = list(
        Correction.objects.filter(draft_id=review.draft_id, kind=Correction.Kind.DRAFT_BODY)
        .select_related("author", "review", "regrade")
        .order_by("-pk")[:20]
    )
    if blind.verdicts or blind.answers:
        corrections = [c for c in corrections if c.author_id == user.pk]
    may_correct = deciding and not review.audit and _deciding_alone(review, user, now)
    grading = any(c.state == Correction.State.GRADING for c in corrections)
    if not corrections and not may_correct:
        return None
    shown = marked(findings, body) if may_correct else []
    return CorrectionPanel(corrections, may_correct, grading, body if may_correct else "", shown)


def _deciding_alone(review: Review, user: AbstractBaseUser, now: datetime) -> bool:
    try:
        _refuse_unless_deciding(review, user, now)
    except Refused:
        return False
    return True

"""Corrections written straight to the table, as the fix-and-approve services leave them: a draft's corrected body
(optionally graded again, as the gate leaves it: the corrected revision's review, approved by its author) and an
agent's expected reply bound to the path up to its message. For the export, figure and erasure tests, which read
corrections and never write them through the item pages."""

import json
from datetime import datetime, timedelta
from pathlib import Path

from django.utils import timezone

from grading.core.evidence import draft_fingerprint, fingerprint
from grading.core.outcomes import CORRECTED
from grading.drafts.corrections import APPROVED_AS_CORRECTED, correction_diff
from grading.models import Correction, Decision, ItemKind, Review, ReviewState, Route
from grading.reviews.conversation_reads import conversation_path

INJECTIONS = sorted((Path(__file__).parents[1] / "resilience" / "injection").glob("*.json"))


def injection_texts() -> list[str]:
    """The prompt-injection corpus's texts (tests/resilience/injection), as hostile corrections."""
    return [json.loads(path.read_text())["injection"] for path in INJECTIONS]


def draft_correction(
    review: Review,
    *,
    author,
    corrected: str,
    at: datetime | None = None,
    regrade_findings: list[dict] | None = None,
    revise: bool = True,
) -> Correction:
    """`author`'s corrected body of the draft `review` read. The draft holds the corrected revision, so the review
    read the evidence it had (stale) while the gate grades it (`revise=False`: the correction is written, the draft
    and its review are left as they were). With `regrade_findings` the gate has graded it: the corrected review is
    superseded by the revision's, which waits for people with the reason `corrected` (as `correction_route` sends
    it), and the correction is approved (no finding left: decided approve by its author) or refused (it waits)."""
    draft = review.draft
    at = at or timezone.now()
    corrected_fingerprint = draft_fingerprint(title=draft.title, body=corrected, source_urls=draft.source_urls)
    correction = Correction.objects.create(
        org=review.org, kind=Correction.Kind.DRAFT_BODY, review=review, draft=draft,
        evidence_fingerprint=review.fingerprint, original=draft.body, corrected=corrected,
        corrected_fingerprint=corrected_fingerprint,
        diff=correction_diff(slug=draft.slug, before=draft.body, after=corrected),
        state=Correction.State.GRADING, author=author, created_at=at,
    )  # fmt: skip
    if not revise:
        return correction
    draft.body, draft.fingerprint = corrected, corrected_fingerprint
    draft.save(update_fields=["body", "fingerprint"])
    Review.objects.filter(pk=review.pk).update(state=ReviewState.STALE)
    if regrade_findings is None:
        return correction
    Review.objects.filter(pk=review.pk).update(state=ReviewState.SUPERSEDED)
    refused = bool(regrade_findings)  # any finding left is a hard one (grading/drafts/corrections.py)
    regrade = Review.objects.create(
        org=review.org, kind=ItemKind.DRAFT, draft=draft, fingerprint=corrected_fingerprint,
        criteria_version=review.criteria_version, judge=review.judge, judge_key=review.judge_key,
        started_at=at, finished_at=at + timedelta(seconds=5), stages=1, week=review.week,
        route=Route.HUMAN, reason=CORRECTED, score=7.4, findings=regrade_findings,
        state=ReviewState.WAITING if refused else ReviewState.DECIDED,
    )  # fmt: skip
    if not refused:
        Decision.objects.create(
            org=review.org, review=regrade, outcome=Decision.Outcome.APPROVE, decided_by=author,
            decided_at=at + timedelta(seconds=6), note=APPROVED_AS_CORRECTED,
        )  # fmt: skip
    correction.regrade = regrade
    correction.state = Correction.State.REFUSED if refused else Correction.State.APPROVED
    correction.settled_at = at + timedelta(seconds=6)
    correction.save(update_fields=["regrade", "state", "settled_at"])
    return correction


def expected_reply(
    review: Review, *, author, reply: str, message_id: str = "m4", at: datetime | None = None
) -> Correction:
    """`author`'s expected reply at the assistant message `message_id` of the conversation `review` read, bound to
    the fingerprint of the active path up to and including that message."""
    conversation = review.conversation
    path = conversation_path(conversation).path
    upto = next(n for n, m in enumerate(path) if m.id == message_id) + 1
    message = path[upto - 1]
    return Correction.objects.create(
        org=review.org, kind=Correction.Kind.EXPECTED_REPLY, review=review, conversation=conversation,
        message_external_id=message_id, evidence_fingerprint=fingerprint(path[:upto]),
        original=message.content if isinstance(message.content, str) else json.dumps(message.content),
        corrected=reply, state=Correction.State.KEPT, author=author, created_at=at or timezone.now(),
    )  # fmt: skip

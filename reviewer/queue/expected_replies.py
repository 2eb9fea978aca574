"""Expected replies on a conversation's item page: who may write one (the holder of a live lease on the review, while
it waits: the person deciding it writes it beside their decision or answer), its form, and what the page shows of
them. What an expected reply is bound to, and who may see it, is grading/conversations/expected_replies.py's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django import forms
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from grading.conversations.expected_replies import (
    ExpectedReplies,
    ExpectedReplyRefused,
    expected_replies_of,
    expected_reply_keep,
    reply_points,
)
from grading.core import evidence
from grading.models import Correction, Review
from grading.reviews.blind import Blind
from reviewer.queue.display import stale_reason
from reviewer.queue.reads import operator_reaches
from reviewer.queue.services import Refused, holder_claim, locked_review


class ExpectedReplyForm(forms.Form):
    """One assistant message's "write the expected reply" control. `message` and `path_fingerprint` come from the
    page (what it showed); the text is the person's."""

    message = forms.CharField(max_length=200)
    path_fingerprint = forms.CharField(max_length=80)
    text = forms.CharField(strip=False, widget=forms.Textarea, error_messages={"required": "Write the reply."})


@dataclass(frozen=True)
class ReplyControl:
    """The control under one assistant message of the path: what it binds to, and the reader's own reply there."""

    message_id: str
    path_fingerprint: str
    mine: str  # the reader's expected reply at this message on this review, to edit; "" for none


def expected_reply_create(
    *,
    user: AbstractBaseUser,
    review_id: int,
    message_id: str,
    path_fingerprint: str,
    text: str,
    now: datetime | None = None,
) -> tuple[Correction, bool]:
    """Keep the person's expected reply at `message_id` on the review they hold, or refuse and write nothing: the
    review must wait undecided, the person hold a live lease on it, and the path up to the message be the one their
    page showed (`expected_reply_keep`). Returns it, and whether it replaced their earlier one there."""
    now = now or timezone.now()
    with transaction.atomic():
        review = locked_review(operator_reaches(user), review_id)
        holder_claim(review, user, now)
        try:
            return expected_reply_keep(
                review=review, author=user, message_id=message_id, path_fingerprint=path_fingerprint, text=text, at=now
            )
        except ExpectedReplyRefused as refused:
            if refused.field == "changed" and not Review.objects.waiting().filter(pk=review.pk).exists():
                raise Refused("changed", f"{refused.message} {stale_reason(review)}") from None
            raise Refused(refused.field, refused.message) from None


@dataclass(frozen=True)
class ExpectedRepliesPart:
    """The item page's expected replies: those the reader may see, whether others' are hidden from them, and (for
    the person deciding) a control per assistant message of the path."""

    replies: ExpectedReplies
    controls: dict[str, ReplyControl]
    writing: bool  # the reader holds the item: the controls are shown


def expected_replies_part(
    review: Review,
    *,
    user: AbstractBaseUser,
    deciding: bool,
    blind: Blind,
    path: Sequence[evidence.EvidenceMessage],
) -> ExpectedRepliesPart:
    """From the conversation's active `path` as the page read it (its reply points bind the controls and mark the
    replies bound), so the page reads the messages once."""
    conversation = review.conversation
    writing = deciding and review.fingerprint == conversation.fingerprint
    points = reply_points(path)
    replies = expected_replies_of(conversation, reader_id=user.pk, points=points, blind=blind)
    mine = {r.message_id: r.expected for r in replies.shown if r.mine and r.review_id == review.pk}
    controls = {
        message_id: ReplyControl(message_id, point.path_fingerprint, mine.get(message_id, ""))
        for message_id, point in (points if writing else {}).items()
    }
    return ExpectedRepliesPart(replies=replies, controls=controls, writing=bool(controls))

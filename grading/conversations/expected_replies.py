"""Expected replies: the reply a person says the agent should have given at one assistant message of a conversation's
active path (a `Correction` of kind expected_reply, state kept), written beside their decision on a review.

Bound to its evidence. An expected reply at message M names `fingerprint(path[: M + 1])`, the fingerprint of the
active path up to and including M, computed as the conversation's own (grading/core/evidence.py, `fp1`): the
fingerprint the conversation would have if M were its active message. The page the person wrote it on carries that
fingerprint; a write whose path no longer fingerprints so (a message up to M edited, the active branch switched away
from M) is refused, and so is one on a review that stopped waiting. Later, an expected reply is *bound* while the
present active path still holds M with the same path before it (messages after M may have come since: the reply still
speaks for that point), and only a bound one can become a worked example.

Blind as an answer is (grading/reviews/blind.py): while the item's places are open, nobody but its author sees it
(an API key, no person, sees none), so a person deciding the item is not anchored by another's; once every place is
answered (the adjudicator's turn) or the item is decided, everyone who may see the item sees them all.

Who may write one is the queue's rule (reviewer/queue/expected_replies.py: the holder of a live lease on the review),
which calls `expected_reply_keep` under the review's row lock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser

from grading.core import evidence
from grading.core.errors import FieldRefused
from grading.core.evidence_text import content_text, tool_call_text
from grading.models import Conversation, Correction, CriteriaExample, CriteriaVersion, ItemKind, Review
from grading.models.audit import audit_record
from grading.reviews.blind import Blind, item_blind
from grading.reviews.examples import ExampleRefused, criteria_example_add
from grading.reviews.sql import conversation_messages

EXPECTED_REPLY_MAX_CHARS = 20_000  # a long answer, far under what a request may carry


class ExpectedReplyRefused(FieldRefused):
    """An expected reply that may not be kept; `field` names what was wrong (text, message) or is "changed" when the
    evidence moved on, and the message says why. Nothing was written."""


@dataclass(frozen=True)
class ReplyPoint:
    """An assistant message of the active path, where an expected reply may be written, and what it binds to."""

    message: evidence.EvidenceMessage
    path_fingerprint: str  # of the active path up to and including the message

    @property
    def text(self) -> str:
        """The message as the judge read it: its words, then its tool calls."""
        calls = self.message.tool_calls
        calls = calls if isinstance(calls, list) else ([] if calls is None else [calls])
        return "\n".join(part for part in (content_text(self.message.content), *map(tool_call_text, calls)) if part)


def reply_points(path: Sequence[evidence.EvidenceMessage]) -> dict[str, ReplyPoint]:
    """The assistant messages of `path` (the active path, root first), by id, each bound to the path up to it."""
    fingerprints = evidence.prefix_fingerprints(path)
    return {
        m.id: ReplyPoint(m, fingerprint)
        for m, fingerprint in zip(path, fingerprints, strict=True)
        if m.role == "assistant"
    }


def present_reply_points(
    conversation: Conversation, messages: list[evidence.EvidenceMessage] | None = None
) -> dict[str, ReplyPoint]:
    """The reply points of the conversation's present active path (from `messages`, read when not given); none when it
    has no path that is evidence."""
    messages = conversation_messages(conversation.pk) if messages is None else messages
    result = evidence.active_path(messages, conversation.active_message_id)
    return {} if result.problem else reply_points(result.path)


def expected_reply_text(text: str) -> str:
    """The reply as kept (line ends made plain, outer blank space trimmed), or refused: empty, too long, or with a
    character no text may hold."""
    text = text.replace("\r\n", "\n").strip()
    if not text:
        raise ExpectedReplyRefused("text", "Write the reply the agent should have given.")
    if len(text) > EXPECTED_REPLY_MAX_CHARS:
        raise ExpectedReplyRefused(
            "text",
            f"An expected reply has at most {EXPECTED_REPLY_MAX_CHARS:,} characters; this one has {len(text):,}.",
        )
    if "\x00" in text or any(0xD800 <= ord(char) <= 0xDFFF for char in text):
        raise ExpectedReplyRefused(
            "text", "The expected reply holds a NUL or a lone surrogate, which text cannot hold."
        )
    return text


def expected_reply_keep(
    *,
    review: Review,
    author: AbstractBaseUser,
    message_id: str,
    path_fingerprint: str,
    text: str,
    at: datetime,
) -> tuple[Correction, bool]:
    """Keep `author`'s expected reply at `message_id` beside their decision on `review` (locked by the caller), bound
    to `path_fingerprint`, the path up to the message as their page showed it. Returns it, and whether it replaced
    theirs at that message (one per person, message and review: writing again replaces it, audited both times).

    1. Refuse a text that cannot be kept (`expected_reply_text`), and a review that is not a conversation's.
    2. Refuse unless the message is an assistant message of the present active path and the path up to it
       fingerprints as `path_fingerprint`: else the evidence moved on since the page was loaded. Then refuse
       unless the review still waits for people (a message after this one came, or the criteria changed).
    3. Write it (or replace the author's own) and audit it, in the caller's transaction.
    """
    text = expected_reply_text(text)
    if review.kind != ItemKind.CONVERSATION:
        raise ExpectedReplyRefused("message", "Expected replies are written on conversations.")
    conversation = review.conversation
    messages = conversation_messages(conversation.pk)
    point = _reply_point(conversation, messages, message_id)
    if point.path_fingerprint != path_fingerprint:
        raise ExpectedReplyRefused(
            "changed",
            f"The conversation changed at or before message {message_id} since you opened it: its active path up to "
            "there is not the one you read. Nothing was kept; reload the item to read it as it is now.",
        )
    if not Review.objects.waiting().filter(pk=review.pk).exists():
        raise ExpectedReplyRefused("changed", "The item changed since you opened it; nothing was kept.")
    kept = (
        Correction.objects.select_for_update()
        .filter(review=review, kind=Correction.Kind.EXPECTED_REPLY, author=author, message_external_id=message_id)
        .first()
    )
    replaced = kept is not None
    if kept is None:
        kept = Correction(
            org_id=review.org_id,
            kind=Correction.Kind.EXPECTED_REPLY,
            review=review,
            conversation=conversation,
            message_external_id=message_id,
            author=author,
            state=Correction.State.KEPT,
        )
    kept.evidence_fingerprint = point.path_fingerprint
    kept.original = point.text
    kept.corrected = text
    kept.created_at = at
    kept.save()
    audit_record(
        action="expected_reply.replace" if replaced else "expected_reply.create",
        org=review.org,
        actor=author,
        target=kept,
        detail={"review": review.pk, "message": message_id, "path_fingerprint": point.path_fingerprint},
        item=review,
    )
    return kept, replaced


def _reply_point(conversation: Conversation, messages: list[evidence.EvidenceMessage], message_id: str) -> ReplyPoint:
    """The reply point at `message_id` on the present active path, or why there is none: no such message, or not the
    agent's (a wrong form, 400); off the active path (the path moved on since the page was read, 409)."""
    point = present_reply_points(conversation, messages).get(message_id)
    if point is not None:
        return point
    found = next((m for m in messages if m.id == message_id), None)
    if found is None:
        raise ExpectedReplyRefused("message", f"The conversation has no message {message_id!r}.")
    if found.role != "assistant":
        raise ExpectedReplyRefused(
            "message", f"Message {message_id} is the {found.role}'s: an expected reply stands for one of the agent's."
        )
    raise ExpectedReplyRefused(
        "changed",
        f"Message {message_id} is not on the conversation's active path now (another branch was chosen since you "
        "opened it, or the path cannot be read). Nothing was kept; reload the item.",
    )


# --- reads ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ShownExpectedReply:
    pk: int
    message_id: str
    author: str
    mine: bool
    written_at: datetime
    original: str  # the agent's message as the review read it
    expected: str
    path_fingerprint: str
    bound: bool  # the present active path still holds the message, with the same path before it
    review_id: int
    review_fingerprint: str  # of the whole path the person's review read


@dataclass(frozen=True)
class ExpectedReplies:
    shown: list[ShownExpectedReply]
    hidden: bool  # others' are kept, and blind review hides them from this reader for now


def expected_replies_of(
    conversation: Conversation,
    *,
    reader_id: int | None,
    points: dict[str, ReplyPoint] | None = None,
    blind: Blind | None = None,
) -> ExpectedReplies:
    """The conversation's expected replies that `reader_id` may see now (None: no person, such as an API key), oldest
    first, each marked bound or not against the present path (`points`, read when not given)."""
    rows = list(
        Correction.objects.filter(conversation=conversation, kind=Correction.Kind.EXPECTED_REPLY)
        .select_related("author", "review")
        .order_by("created_at", "pk")
    )
    blind = item_blind(ItemKind.CONVERSATION, conversation.pk) if blind is None else blind
    seen = [row for row in rows if not blind.hides_answer(person_id=row.author_id, reader_id=reader_id)]
    if seen and points is None:
        points = present_reply_points(conversation)
    shown = [
        ShownExpectedReply(
            pk=row.pk,
            message_id=row.message_external_id,
            author=row.author.get_username() if row.author else "a former user",
            mine=reader_id is not None and row.author_id == reader_id,
            written_at=row.created_at,
            original=row.original,
            expected=row.corrected,
            path_fingerprint=row.evidence_fingerprint,
            bound=_bound(row, points or {}),
            review_id=row.review_id,
            review_fingerprint=row.review.fingerprint,
        )
        for row in seen
    ]
    return ExpectedReplies(shown=shown, hidden=len(seen) < len(rows))


def _bound(row: Correction, points: dict[str, ReplyPoint]) -> bool:
    point = points.get(row.message_external_id)
    return point is not None and point.path_fingerprint == row.evidence_fingerprint


# --- a worked example -------------------------------------------------------------------------------------------


def expected_reply_example_add(
    *,
    version: CriteriaVersion,
    correction: Correction,
    check: str,
    actor: AbstractBaseUser | None = None,
) -> CriteriaExample:
    """Make the conversation of an expected reply a worked example of `check` in `version`, the expected reply as its
    explanation: the judge reads the item's path and the people's verdict on the check as for any example
    (`criteria_example_add`), and then where the agent went wrong and what it should have said.

    Refused when the reply is not the actor's to see yet (blind review), when it is no longer bound (the path up to
    its message changed: it would explain evidence the example does not quote), and wherever an example is.
    """
    if correction.kind != Correction.Kind.EXPECTED_REPLY or correction.conversation_id is None:
        raise ExampleRefused("Only an expected reply can be added this way.")
    conversation = correction.conversation
    reader_id = actor.pk if actor is not None and actor.is_authenticated else None
    if item_blind(ItemKind.CONVERSATION, conversation.pk).hides_answer(
        person_id=correction.author_id, reader_id=reader_id
    ):
        raise ExampleRefused("That expected reply stays hidden until the item's places are answered.")
    if not _bound(correction, present_reply_points(conversation)):
        raise ExampleRefused(
            f"{conversation.external_id} changed at or before message {correction.message_external_id} since the "
            "expected reply was written: it speaks of evidence the conversation no longer holds."
        )
    explanation = f"At message {correction.message_external_id} the agent should have replied:\n{correction.corrected}"
    return criteria_example_add(
        version=version, subject=conversation, check=check, actor=actor, explanation=explanation
    )

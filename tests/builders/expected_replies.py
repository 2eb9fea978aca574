"""Expected replies as the item page writes them: the path fingerprint the page carries for an agent's message, and a
person claiming the item and keeping theirs (reviewer/queue/expected_replies.py)."""

from grading.conversations.expected_replies import present_reply_points
from grading.models import Correction, Review
from reviewer.queue.expected_replies import expected_reply_create
from reviewer.queue.services import claim_take


def path_fingerprint_at(review: Review, message_id: str) -> str:
    """What the item page binds an expected reply at `message_id` to, as the conversation is now."""
    return present_reply_points(review.conversation)[message_id].path_fingerprint


def expected_reply_write(person, review: Review, message_id: str, text: str) -> Correction:
    """`person` claims a place on the item (or renews theirs) and keeps an expected reply at `message_id`."""
    claim_take(user=person, review_id=review.pk)
    kept, _ = expected_reply_create(
        user=person,
        review_id=review.pk,
        message_id=message_id,
        path_fingerprint=path_fingerprint_at(review, message_id),
        text=text,
    )
    return kept

"""A conversation's expected replies as the API gives them (grading/conversations/expected_replies.py): to the org's
key, which is no person, only once blind review lets everyone see them (every place answered, or decided)."""

from datetime import datetime

from ninja import Schema

from grading.conversations.expected_replies import expected_replies_of
from grading.models import Conversation


class ExpectedReplyOut(Schema):
    message_id: str  # the assistant message it replaces
    path_fingerprint: str  # fp1 of the active path up to and including that message, when it was written
    bound: bool  # the present active path still holds the message with the same path before it
    original: str  # the agent's message as the review read it
    expected_reply: str
    author: str
    written_at: datetime
    review_fingerprint: str  # the whole path the author's review read


def expected_replies_out(conversation: Conversation) -> list[dict]:
    replies = expected_replies_of(conversation, reader_id=None).shown
    return [
        {
            "message_id": reply.message_id,
            "path_fingerprint": reply.path_fingerprint,
            "bound": reply.bound,
            "original": reply.original,
            "expected_reply": reply.expected,
            "author": reply.author,
            "written_at": reply.written_at,
            "review_fingerprint": reply.review_fingerprint,
        }
        for reply in replies
    ]

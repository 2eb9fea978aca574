"""Sizes and id sets over evidence messages that only the tests ask for; the app measures one message at a time
(`grading.core.evidence_text.message_size`) and never lists the messages off the path."""

from collections.abc import Callable, Iterable

from grading.core.evidence import EvidenceMessage
from grading.core.evidence_text import message_size


def rendered_size(messages: Iterable[EvidenceMessage], measure: Callable[[str], int] = len) -> int:
    """The budget cost of a list of messages: the sum of their `message_size`, as staging counts it."""
    return sum(message_size(m, measure) for m in messages)


def abandoned_message_ids(messages: Iterable[EvidenceMessage], path: Iterable[EvidenceMessage]) -> set[str]:
    """Ids of messages that exist but are not on the active path (other branches: shown, never judged)."""
    return {m.id for m in messages} - {m.id for m in path}

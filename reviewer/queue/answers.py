"""An item several people decide, as its page shows it: how many places are filled, and the answers side by side
with their differences marked, but only once every place is answered (blind until then: a person sees their own
answers and nobody else's, on this item's evidence or on earlier evidence)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from grading.core.outcomes import CHECKS
from grading.models import Answer, ItemKind, Review
from grading.reviews.blind import Blind
from reviewer.queue.reads import Slots

SHOWN = 50  # answers on one page: far more than any item gets (its places, over a few evidence changes)


@dataclass(frozen=True)
class ShownAnswer:
    person: str
    answered_at: datetime
    earlier: bool  # about earlier evidence (another review of the item): never compared with this review's
    fingerprint: str
    note: str


@dataclass(frozen=True)
class AnswerRow:
    """One thing the answers give (the outcome, or a check's verdict): each answer's value, marked if they differ."""

    name: str
    values: list[str]
    differs: bool


@dataclass(frozen=True)
class AnswersView:
    slots: Slots
    blind: bool  # places are open: only the viewer's own answers are shown
    answers: list[ShownAnswer]
    rows: list[AnswerRow]

    @property
    def adjudicating(self) -> bool:
        return self.slots.answers_in


def answers_view(review: Review, slots: Slots, viewer_id: int, *, blind: Blind) -> AnswersView | None:
    """The answers part of the item page, or None for an item one person decides that nobody answered apart.

    Only the viewer's own while `blind` hides answers (grading/reviews/blind.py: places are open). Answers about the
    item's other reviews (earlier evidence, or other criteria) are listed after this review's, marked, and never
    counted among its differences.
    """
    subject = (
        {"review__draft_id": review.draft_id}
        if review.draft_id
        else {"review__conversation_id": review.conversation_id}
    )
    answers = list(
        Answer.objects.filter(**subject).select_related("person").order_by("-review__finished_at", "pk")[:SHOWN]
    )
    if not slots.several and not answers:
        return None
    answers = [a for a in answers if not blind.hides_answer(person_id=a.person_id, reader_id=viewer_id)]
    answers.sort(key=lambda answer: answer.review_id != review.pk)  # this review's first, in order given
    names = ["outcome"] if review.kind == ItemKind.DRAFT else ["summary", *CHECKS]
    rows = []
    for name in names:
        values = [_value(answer, name) for answer in answers]
        current = {value for answer, value in zip(answers, values, strict=True) if answer.review_id == review.pk}
        rows.append(AnswerRow(name, values, differs=len(current) > 1))
    shown = [
        ShownAnswer(
            person=answer.person.get_username(),
            answered_at=answer.answered_at,
            earlier=answer.review_id != review.pk,
            fingerprint=answer.fingerprint,
            note=answer.note,
        )
        for answer in answers
    ]
    return AnswersView(slots=slots, blind=blind.answers, answers=shown, rows=rows)


def _value(answer: Answer, name: str) -> str:
    if name in ("outcome", "summary"):
        return answer.get_outcome_display()
    checks = answer.checks if isinstance(answer.checks, dict) else {}
    return str(checks.get(name, "–"))

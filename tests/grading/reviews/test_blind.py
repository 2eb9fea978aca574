"""Blind review's rule for the item in hand: what the machine said is hidden while an audit item waits for people,
answers while places are open; nothing once the item is decided or stopped waiting (grading/reviews/blind.py)."""

import pytest

from grading.models import CriteriaVersion, ItemKind, Review, ReviewState, SlotsFor
from grading.reviews.blind import SEEN, Blind, blind_of


def live(*, state: str = ReviewState.WAITING, audit: bool = False, active: bool = True) -> Review:
    version = CriteriaVersion(kind=ItemKind.CONVERSATION, number=1, slots=2, slots_for=SlotsFor.AUDIT, is_active=active)
    return Review(pk=7, kind=ItemKind.CONVERSATION, state=state, audit=audit, criteria_version=version)


@pytest.mark.parametrize(
    ("review", "answered", "expected"),
    [
        (live(audit=True), 0, Blind(verdicts=True, answers=True)),
        (live(audit=True), 1, Blind(verdicts=True, answers=True)),
        (live(audit=True), 2, Blind(verdicts=True, answers=False)),  # awaiting adjudication: answers shown
        (live(audit=False), 0, Blind(verdicts=False, answers=True)),  # one person decides: nobody else answered
        (live(audit=True, state=ReviewState.DECIDED), 2, SEEN),
        (live(audit=True, active=False), 0, SEEN),  # a publication took it out of the queue: it waits no more
        (live(audit=True, state=ReviewState.STALE), 0, SEEN),
        (None, 0, SEEN),
    ],
)
def test_the_rule_for_an_items_live_review(review, answered, expected):
    assert blind_of(review, answered=answered) == expected


def test_a_reader_always_sees_their_own_answer_and_a_key_sees_nobodys():
    blind = Blind(answers=True)
    assert not blind.hides_answer(person_id=3, reader_id=3)
    assert blind.hides_answer(person_id=3, reader_id=4)
    assert blind.hides_answer(person_id=3, reader_id=None)
    replaced = {"review": 1, "outcome": "pass", "checks": {}, "note": "n", "replaced": {"note": "earlier"}}
    assert blind.detail_shown("answer.replace", replaced, actor_id=3, reader_id=4) == {"review": 1}
    assert blind.detail_shown("answer.replace", replaced, actor_id=3, reader_id=3) == replaced
    label = {"labeller": "ext", "verdict": "fail"}
    assert Blind(verdicts=True).detail_shown("label.create", label, actor_id=None, reader_id=3) == {"labeller": "ext"}
    assert SEEN.detail_shown("answer.replace", replaced, actor_id=3, reader_id=None) == replaced

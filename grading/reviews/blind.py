"""Blind review: what a reader may see of an item while people are still to decide it. The one rule; every surface
that shows an item's verdicts or answers reads through it (the item pages and their partials, the item's trail, the
audit page, its CSV and API, the dashboard's lists and exports, the queue).

While the item's live review waits for people under the active criteria (`ReviewQuerySet.waiting`):
- if it is an audit-sample review, nothing anyone but the reader said about the item is shown: the machine's
  verdicts on any review of it (route and reason, score, sub-scores, checks, findings, the judge's issues, trial
  verdicts), labels' and earlier decisions' verdicts. The sample measures the machine against people, so the people
  must not be anchored by it. This lasts until the item is decided (agreed or adjudicated);
- while its places are open (fewer answers than people asked), people's answers are not shown: each person answers
  without seeing another's. Once every place is answered the answers stand and are shown (the adjudicator reads them).
A reader always sees their own answers. A reader who is no person (an API key) sees nobody's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Count, Exists, OuterRef, Subquery
from django.db.models.functions import Coalesce

from grading.core.sql_expressions import id_in
from grading.models import Answer, CriteriaVersion, ItemKind, Review, ReviewState, state_now
from grading.models.criteria import answers_stand

# What an event's detail says that someone answered or decided: the verdicts (a decision's, an answer's, a label's,
# a worked example's) and an answer's note and the answer it replaced; an expected reply is a person's answer too
# (grading/conversations/expected_replies.py), and where it was written says where they found the agent wrong.
VERDICT_DETAIL = frozenset({"outcome", "checks", "verdict", "human_verdict"})
ANSWER_DETAIL = VERDICT_DETAIL | {"note", "replaced", "message", "path_fingerprint"}
ANSWER_ACTIONS = frozenset({"answer.create", "answer.replace", "expected_reply.create", "expected_reply.replace"})
# A person's approval of a draft as they corrected it (grading/drafts/corrections.py): what it says is hidden as an
# answer's is while places are open, and as any verdict while an audit item waits.
CORRECTION_ACTIONS = frozenset({"correction.create"})


@dataclass(frozen=True)
class Blind:
    """What is hidden of one item from its readers now."""

    verdicts: bool = False  # every verdict on the item but the reader's own answers: an audit item not yet decided
    answers: bool = False  # people's answers but the reader's own: places are open

    def hides_answer(self, *, person_id: int | None, reader_id: int | None) -> bool:
        """Whether an answer given by `person_id` is hidden from `reader_id` (None: no person, such as an API key)."""
        return self.answers and (reader_id is None or person_id != reader_id)

    def detail_shown(self, action: str, detail: dict, *, actor_id: int | None, reader_id: int | None) -> dict:
        """An audit event's detail as the reader may see it: what it says someone answered or decided taken out."""
        if action in ANSWER_ACTIONS:
            hidden = ANSWER_DETAIL if self.hides_answer(person_id=actor_id, reader_id=reader_id) else frozenset()
        elif action in CORRECTION_ACTIONS and self.hides_answer(person_id=actor_id, reader_id=reader_id):
            hidden = VERDICT_DETAIL
        else:
            hidden = VERDICT_DETAIL if self.verdicts else frozenset()
        return {key: value for key, value in detail.items() if key not in hidden}


SEEN = Blind()


def blind_of(live: Review | None, *, answered: int) -> Blind:
    """The rule for an item whose live review is `live` (read with its criteria version; None: the item has none),
    answered by `answered` people."""
    if live is None:
        return SEEN
    return _blind(live.state, live.criteria_version, review_id=live.pk, audit=live.audit, answered=answered)


def _blind(state: str, version: CriteriaVersion, *, review_id: int, audit: bool, answered: int) -> Blind:
    """The rule for an item whose live review (`review_id`, graded under `version`) is stored as `state`."""
    if state_now(state, criteria_active=version.is_active) != ReviewState.WAITING:
        return SEEN
    slots = version.slots_of(review_id=review_id, audit=audit)  # `review_slots`, for a row read as values
    return Blind(verdicts=audit, answers=not answers_stand(slots=slots, answered=answered))


def blind_items(kind: str, item_ids: Iterable[int]) -> dict[int, Blind]:
    """The rule for many items of one kind at once (a page, a chunk of an export), in one query: an item absent from
    the answer is seen whole. It reads of each waiting review only what the rule does, with its answers counted
    beside it, as values rather than model instances (an export asks it of every chunk of 2,000 rows), and the ids
    go as one array."""
    item_ids = set(item_ids)
    if not item_ids:
        return {}
    field = "draft_id" if kind == ItemKind.DRAFT else "conversation_id"
    waiting = (
        Review.objects.waiting()
        .filter(id_in(field, item_ids))
        .annotate(answered=_ANSWERED)
        .values_list(field, "pk", "state", "audit", "answered", *(f"criteria_version__{name}" for name in _SLOTS_RULE))
    )
    versions: dict[tuple, CriteriaVersion] = {}  # what the rule reads of each version, as one (unsaved) instance
    found = {}
    for item_id, review_id, state, audit, answered, *rule in waiting:
        if (rule := tuple(rule)) not in versions:
            versions[rule] = CriteriaVersion(**dict(zip(_SLOTS_RULE, rule, strict=True)))
        found[item_id] = _blind(state, versions[rule], review_id=review_id, audit=audit, answered=answered)
    return {item_id: blind for item_id, blind in found.items() if blind != SEEN}


# What `blind_of` reads of a review's criteria version: whether it is active and how many people decide its reviews.
_SLOTS_RULE = ("is_active", "slots", "slots_for", "slots_share")
_ANSWERED = Coalesce(
    Subquery(Answer.objects.filter(review_id=OuterRef("pk")).values("review_id").annotate(n=Count("pk")).values("n")),
    0,
)


def verdicts_hidden(item: str, *, of: str = "pk") -> Exists:
    """`Blind.verdicts` in SQL, for a query of items whose reviews name them by `item` (`conversation`, `draft`), or
    of reviews (`of=item`: the item they name): whether the machine's verdicts of the item are hidden from people now.
    A search must ask it in its query, since matching the item by its verdict would tell that verdict; a page of
    reviews asks it of the rows it shows (PostgreSQL evaluates it past the sort and limit, so for those only)."""
    return Exists(Review.objects.waiting().filter(audit=True, **{item: OuterRef(of)}))


def item_blind(kind: str, item_id: int) -> Blind:
    return blind_items(kind, [item_id]).get(item_id, SEEN)


def reviews_blind(reviews: Iterable[Review]) -> dict[int, Blind]:
    """The rule for the items of these reviews (of either kind), by review id: a page of a list of reviews."""
    reviews = list(reviews)
    by_kind = {
        kind: blind_items(kind, [_item_id(review) for review in reviews if review.kind == kind])
        for kind in ItemKind.values
    }
    return {review.pk: by_kind[review.kind].get(_item_id(review), SEEN) for review in reviews}


def _item_id(review: Review) -> int:
    return review.draft_id if review.kind == ItemKind.DRAFT else review.conversation_id


def review_blind(review: Review) -> Blind:
    """The rule for the item of one review (any review of it: the item's live review decides)."""
    return item_blind(review.kind, _item_id(review))

"""Claim next keeps the page's promise (issue 41): one order for the page and claim next (drafts first, then the
soonest due, then the oldest), and claim next hands out exactly the first row the page shows as the reader's to
claim. A reservation says who may claim an item, not what comes first: a pool's conversation due tomorrow waits
behind drafts due within the hour that a pipeline is blocked on."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from grading.models import Review
from reviewer.models import AssignmentRule, Pool, Role
from reviewer.queue.assignments import assignment_set
from reviewer.queue.display import queue_page
from reviewer.queue.services import claim_decline, claim_next, claim_take
from tests.builders.people import make_person
from tests.builders.queue_items import conversation_item, draft_item

pytestmark = pytest.mark.django_db


def due_in(review: Review, minutes: int) -> None:
    Review.objects.filter(pk=review.pk).update(due_at=timezone.now() + timedelta(minutes=minutes))


@pytest.fixture
def billing_desk(org):
    """As in the demo: lin is in the billing pool, and a rule gives the pool the billing assistant's unknown checks
    for four hours; a conversation of theirs is due tomorrow, drafts are due within the hour."""
    lin, ann, lee = (make_person(name, org, Role.OPERATOR) for name in ("lin", "ann", "lee"))
    pool = Pool.objects.create(org=org, name="billing team")
    pool.members.add(lin)
    AssignmentRule.objects.create(org=org, position=1, application="billing-assistant", pool=pool, hours=4)
    pooled = conversation_item(org, "bill-1", application="billing-assistant", minutes_ago=100)
    due_in(pooled, 23 * 60)
    drafts = [draft_item(org, f"draft-{n}", minutes_ago=30 - n) for n in range(5)]
    for draft in drafts:
        due_in(draft, 59)
    claim_take(user=ann, review_id=drafts[0].pk)  # held by someone else
    assignment_set(review_id=drafts[1].pk, person=ann, by=lee)  # reserved for someone else
    claim_take(user=lin, review_id=drafts[2].pk)
    claim_decline(user=lin, review_id=drafts[2].pk, reason="I wrote it.")  # declined by her
    return {"lin": lin, "ann": ann, "pooled": pooled, "drafts": drafts}


def first_claimable(person) -> int | None:
    """The first row the person's queue page shows as theirs to claim."""
    return next((row.review_id for row in queue_page(user=person).rows if not row.not_claimable), None)


def test_claim_next_hands_a_pool_member_the_draft_due_first_not_the_pools_conversation(billing_desk):
    lin, drafts = billing_desk["lin"], billing_desk["drafts"]
    rows = queue_page(user=lin).rows
    assert [row.review_id for row in rows] == [d.pk for d in drafts] + [billing_desk["pooled"].pk]
    assert rows[-1].assigned.startswith("you until")  # the pool's conversation: reserved for her, due tomorrow
    assert [row.not_claimable for row in rows[:3]] == [
        "Someone else is deciding this item.",
        "reserved for ann",
        "you declined it",
    ]
    assert first_claimable(lin) == drafts[3].pk
    assert claim_next(user=lin).review_id == drafts[3].pk


def test_claim_next_hands_out_exactly_the_first_claimable_row_the_page_shows_until_none_is_left(billing_desk, org):
    lin, ann = billing_desk["lin"], billing_desk["ann"]
    cy = make_person("cy", org, Role.OPERATOR)
    conversation_item(org, "other-app", application="docs-helper", minutes_ago=400)  # no due time: after the due
    for person in (lin, cy, ann, lin, cy, lin, cy, ann):
        expected = first_claimable(person)
        claim = claim_next(user=person)
        assert (claim.review_id if claim else None) == expected, person.username
    assert first_claimable(lin) is None and claim_next(user=lin) is None


def test_the_page_states_the_order_and_marks_what_claim_next_passes_over(client_for, billing_desk):
    client = client_for(billing_desk["lin"])
    html = client.get(reverse("queue")).content.decode()
    assert "drafts first (a pipeline waits on each), then the soonest due, then the oldest" in html
    assert html.count("data-passed-over") == 3 and "claim next passes it: reserved for ann" in html

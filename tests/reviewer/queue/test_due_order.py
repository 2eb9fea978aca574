"""Service-level targets in the queue: within each priority, items due soonest come first and items no target names
after them, oldest first; paging either way walks that order exactly; claim next takes the soonest due; an item is
overdue from the moment its due time passes."""

from datetime import timedelta

import pytest
from django.urls import reverse

from grading.models import Review, ServiceTarget
from grading.reviews.targets import due_times_refresh
from reviewer.queue.display import queue_page
from reviewer.queue.services import claim_next
from tests.builders.queue_items import conversation_item, draft_item

pytestmark = pytest.mark.django_db


@pytest.fixture
def dated(org):
    """Drafts: band items due in an hour, spread items in ten minutes, the rest undated. Conversations of billing due
    in two hours; onboarding's undated."""
    drafts = [draft_item(org, f"d-{n}", reason=reason, minutes_ago=m)
              for n, (reason, m) in enumerate([("band", 50), ("spread", 5), ("band", 20), ("judge_contradiction", 90),
                                               ("spread", 8), ("judge_contradiction", 30)])]  # fmt: skip
    conversations = [conversation_item(org, f"cv-{n}", application=app, minutes_ago=m)
                     for n, (app, m) in enumerate([("billing", 40), ("onboarding", 100), ("billing", 10)])]  # fmt: skip
    for position, (kind, application, reason, minutes) in enumerate(
        [("draft", "", "spread", 10), ("draft", "", "band", 60), ("conversation", "billing", "", 120)], start=1
    ):
        ServiceTarget.objects.create(
            org=org, position=position, kind=kind, application=application, reason=reason, minutes=minutes
        )
    due_times_refresh(org.pk)
    return {review.draft.external_id if review.draft_id else review.conversation.external_id: review
            for review in Review.objects.filter(pk__in=[r.pk for r in drafts + conversations])}  # fmt: skip


def expected_order(reviews: dict) -> list[int]:
    def key(review):
        return (review.kind != "draft", review.due_at is None, review.due_at or review.finished_at, review.finished_at)

    return [review.pk for review in sorted(reviews.values(), key=key)]


def test_the_queue_is_ordered_by_due_time_within_each_priority_and_pages_walk_it_both_ways(operator, dated):
    expected = expected_order(dated)
    assert [row.review_id for row in queue_page(user=operator, page_size=100).rows] == expected
    assert expected[:2] == [dated["d-4"].pk, dated["d-1"].pk]  # spread: due within 10 min of routing, d-4 first

    forward, after = [], None
    while True:
        page = queue_page(user=operator, after=after, page_size=2)
        forward += [row.review_id for row in page.rows]
        if page.next_cursor is None:
            break
        after = page.next_cursor
    assert forward == expected
    backward, before = [], expected[-1]
    backward_pages = [[expected[-1]]]
    while before is not None:
        page = queue_page(user=operator, before=before, page_size=2)
        backward_pages.append([row.review_id for row in page.rows])
        before = page.previous_cursor
    backward = [pk for rows in reversed(backward_pages) for pk in rows]
    assert backward == expected


def test_claim_next_takes_the_item_due_soonest(operator, dated):
    assert claim_next(user=operator).review_id == dated["d-4"].pk  # routed 8 min ago, due in 2 min


def test_an_item_is_overdue_exactly_when_its_due_time_passes(operator, dated, client_for):
    due = dated["d-1"].due_at
    row = next(
        r for r in queue_page(user=operator, now=due - timedelta(seconds=1)).rows if r.review_id == dated["d-1"].pk
    )
    assert (row.due, row.overdue) == ("due in 0 min", False)
    row = next(r for r in queue_page(user=operator, now=due).rows if r.review_id == dated["d-1"].pk)
    assert (row.due, row.overdue) == ("overdue 0 min", True)
    undated = next(r for r in queue_page(user=operator, now=due).rows if r.review_id == dated["d-3"].pk)
    assert undated.due == ""
    page = client_for(operator).get(reverse("review_detail", args=[dated["cv-0"].pk])).content.decode()
    assert 'id="due"' in page and "due in 1 h" in page

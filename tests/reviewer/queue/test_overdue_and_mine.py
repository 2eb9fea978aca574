"""The queue filters by overdue and by assignment (issue 41), and claim next keeps to the filters the page shows."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from grading.models import Review
from reviewer.models import AssignmentRule, Pool, Role
from reviewer.queue.assignments import assignment_set
from reviewer.queue.display import queue_page
from reviewer.queue.reads import QueueFilters
from reviewer.queue.services import claim_next
from tests.builders.people import make_person
from tests.builders.queue_items import conversation_item, draft_item

pytestmark = pytest.mark.django_db


@pytest.fixture
def desk(org, operator):
    lee = make_person("lee", org, Role.LEAD)
    late, soon, open_ended = (
        draft_item(org, slug, minutes_ago=30 - n) for n, slug in enumerate(["late", "soon", "open"])
    )
    Review.objects.filter(pk=late.pk).update(due_at=timezone.now() - timedelta(minutes=5))
    Review.objects.filter(pk=soon.pk).update(due_at=timezone.now() + timedelta(minutes=50))
    pool = Pool.objects.create(org=org, name="billing")
    pool.members.add(operator)
    AssignmentRule.objects.create(org=org, position=1, application="billing", pool=pool)
    by_rule = conversation_item(org, "cv-billing", application="billing")
    conversation_item(org, "cv-docs", application="docs")
    assignment_set(review_id=open_ended.pk, person=operator, by=lee)
    return {"late": late, "soon": soon, "open": open_ended, "by_rule": by_rule}


def listed(person, **filters) -> list[int]:
    return [row.review_id for row in queue_page(user=person, filters=QueueFilters(**filters)).rows]


def test_overdue_lists_only_what_is_past_its_due_time(desk, operator):
    assert listed(operator, overdue=True) == [desk["late"].pk]
    assert claim_next(user=operator, filters=QueueFilters(overdue=True)).review_id == desk["late"].pk
    assert claim_next(user=operator, filters=QueueFilters(overdue=True)) is None


def test_assigned_to_me_lists_what_a_lead_or_a_rule_reserved_for_me(desk, operator, org):
    assert listed(operator, mine=True) == [desk["open"].pk, desk["by_rule"].pk]
    other = make_person("ann", org, Role.OPERATOR)
    assert listed(other, mine=True) == []  # nothing is reserved for her: no lane is read
    assert claim_next(user=operator, filters=QueueFilters(mine=True)).review_id == desk["open"].pk


def test_the_page_offers_both_filters_and_claim_next_keeps_them(client_for, desk, operator):
    client = client_for(operator)
    html = client.get(reverse("queue"), {"overdue": "on"}).content.decode()
    assert 'name="overdue"' in html and 'name="mine"' in html
    assert '<input type="hidden" name="overdue" value="1">' in html  # claim next's form carries the filter
    response = client.post(reverse("queue_claim_next"), {"overdue": "1"})
    assert response["Location"] == reverse("review_detail", args=[desk["late"].pk])

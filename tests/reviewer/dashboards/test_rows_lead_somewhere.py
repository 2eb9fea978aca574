"""Every row of a dashboard list leads somewhere (issue 41): to the item's queue page for a queue member whose reach
covers it while it waits for people (where a lead assigns it), else to its criteria page for a criteria admin; a
reader with neither gets the row without a link rather than a link that answers 403 or 404."""

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from grading.models import Review
from reviewer.models import Membership, Role
from tests.builders.people import make_person
from tests.builders.queue_items import conversation_item

pytestmark = pytest.mark.django_db


def item_links(client, org) -> dict[int, str]:
    html = client.get(reverse("dashboard_reviews"), {"org": org.slug, "due": "overdue", "kind": "conversation"}).content
    rows = re.findall(
        r'<tr data-review="(\d+)">\s*(?:<td>(?:<input[^>]*>)?</td>\s*)?<td>(?:<a href="([^"]+)" class="item-link">)?',
        html.decode(),
    )
    return {int(pk): link for pk, link in rows}


def test_a_list_row_opens_the_item_where_the_reader_can_act_on_it(client_for, org, stakeholder, criteria_admin):
    waiting = conversation_item(org, "cv-waiting", application="billing")
    Review.objects.filter(pk=waiting.pk).update(due_at=timezone.now() - timedelta(minutes=1))  # the overdue list
    lee = make_person("lee", org, Role.LEAD, Role.STAKEHOLDER)
    assert item_links(client_for(lee), org) == {waiting.pk: reverse("review_detail", args=[waiting.pk])}
    Membership.objects.create(user=criteria_admin, org=org, role=Role.STAKEHOLDER)
    criteria_page = reverse("criteria_item", kwargs={"kind": "conversation", "pk": waiting.conversation_id})
    assert item_links(client_for(criteria_admin), org) == {waiting.pk: criteria_page}
    assert item_links(client_for(stakeholder), org) == {waiting.pk: ""}
    docs_only = make_person("dee", org, Role.STAKEHOLDER)
    Membership.objects.create(user=docs_only, org=org, role=Role.OPERATOR, applications=["docs"], drafts=False)
    assert item_links(client_for(docs_only), org) == {waiting.pk: ""}  # outside her queue's reach

"""Every row of a dashboard list leads somewhere (issue 41): to the item's queue page for a queue member whose reach
covers it while it is for people (where a lead assigns it), else to the reader's page of it, which every reader of the
list may open (a stakeholder, a criteria admin, an operator outside the queue's part of it)."""

import re
from datetime import timedelta

import pytest
from django.db.models import DateField
from django.db.models.functions import TruncWeek
from django.urls import reverse
from django.utils import timezone

from grading.models import Review, ReviewState, Route
from reviewer.models import Membership, Role
from tests.builders.people import make_person
from tests.builders.queue_items import conversation_item, draft_item

pytestmark = pytest.mark.django_db


def item_links(client, org, **filters) -> dict[int, str]:
    query = {"org": org.slug, "due": "overdue", "kind": "conversation"} if not filters else {"org": org.slug, **filters}
    html = client.get(reverse("dashboard_reviews"), query).content
    rows = re.findall(
        r'<tr data-review="(\d+)">\s*(?:<td>(?:<input[^>]*>)?</td>\s*)?<td>(?:<a href="([^"]+)" class="item-link">)?',
        html.decode(),
    )
    return {int(pk): link for pk, link in rows}


def test_a_list_row_opens_the_item_where_the_reader_can_act_on_it_or_read_it(
    client, client_for, org, stakeholder, criteria_admin
):
    waiting = conversation_item(org, "cv-waiting", application="billing")
    Review.objects.filter(pk=waiting.pk).update(due_at=timezone.now() - timedelta(minutes=1))  # the overdue list
    reader_page = reverse("dashboard_item", args=[waiting.pk])
    lee = make_person("lee", org, Role.LEAD, Role.STAKEHOLDER)
    assert item_links(client_for(lee), org) == {waiting.pk: reverse("review_detail", args=[waiting.pk])}
    Membership.objects.create(user=criteria_admin, org=org, role=Role.STAKEHOLDER)
    assert item_links(client_for(criteria_admin), org) == {waiting.pk: reader_page}
    assert item_links(client_for(stakeholder), org) == {waiting.pk: reader_page}
    docs_only = make_person("dee", org, Role.STAKEHOLDER)
    Membership.objects.create(user=docs_only, org=org, role=Role.OPERATOR, applications=["docs"], drafts=False)
    assert item_links(client_for(docs_only), org) == {waiting.pk: reader_page}  # outside her queue's reach
    for person in (criteria_admin, stakeholder, docs_only):
        assert client_for(person).get(reader_page).status_code == 200  # a link that opens, not a 403 or 404


def test_a_row_the_machine_decided_alone_opens_the_readers_page_even_for_a_queue_member(client_for, org, operator):
    passed = draft_item(org)
    Review.objects.filter(pk=passed.pk).update(
        route=Route.PASS, reason="", state=ReviewState.CURRENT, week=TruncWeek("finished_at", output_field=DateField())
    )
    Membership.objects.create(user=operator, org=org, role=Role.STAKEHOLDER)
    links = item_links(client_for(operator), org, kind="draft", route="pass")
    assert links == {passed.pk: reverse("dashboard_item", args=[passed.pk])}  # the queue holds no such item

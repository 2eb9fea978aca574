"""From the dashboard's overdue list a lead assigns several items at once (issue 41): each is an assignment as the
item page makes it, audited; one that cannot go to that person is named and left as it was."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from grading.models import AuditEvent, Review
from reviewer.models import Assignment, Membership, Role
from tests.builders.people import make_person
from tests.builders.queue_items import conversation_item

pytestmark = pytest.mark.django_db


@pytest.fixture
def overdue(org):
    items = [conversation_item(org, f"cv-{n}", application=app) for n, app in enumerate(["billing", "billing", "docs"])]
    Review.objects.filter(pk__in=[r.pk for r in items]).update(due_at=timezone.now() - timedelta(minutes=5))
    return items


def test_a_lead_ticks_overdue_items_and_assigns_them_to_one_person(client_for, org, overdue):
    lee = make_person("lee", org, Role.LEAD, Role.STAKEHOLDER)
    ann = make_person("ann", org, Role.STAKEHOLDER)
    Membership.objects.create(user=ann, org=org, role=Role.OPERATOR, applications=["billing"], drafts=False)
    client = client_for(lee)
    listing = f"{reverse('dashboard_reviews')}?org={org.slug}&due=overdue&kind=conversation"
    html = client.get(listing).content.decode()
    assert 'id="assign-many"' in html and html.count('form="assign-many"') == 3
    assert f'<option value="person:{ann.pk}">ann</option>' in html

    posted = {"review": [r.pk for r in overdue], "to": f"person:{ann.pk}", "hours": "", "next": listing}
    response = client.post(reverse("queue_assign_many"), posted, follow=True)
    assert response.redirect_chain[-1][0] == listing
    assert set(Assignment.objects.values_list("review_id", flat=True)) == {overdue[0].pk, overdue[1].pk}
    assert AuditEvent.objects.filter(action="assignment.create").count() == 2
    page = response.content.decode()
    assert "Assigned 2 items to ann." in page and "Not assigned: cv-2:" in page  # docs is outside her reach


def test_nothing_ticked_or_someone_unknown_assigns_nothing_and_says_why(client_for, org, overdue):
    lee = make_person("lee", org, Role.LEAD, Role.STAKEHOLDER)
    client = client_for(lee)
    response = client.post(reverse("queue_assign_many"), {"to": f"person:{lee.pk}"}, follow=True)
    assert "Tick the items to assign first." in response.content.decode()
    response = client.post(
        reverse("queue_assign_many"), {"review": [overdue[0].pk], "to": "person:999999"}, follow=True
    )
    assert "Pick someone who can work this item" in response.content.decode()
    assert not Assignment.objects.exists()


def test_only_a_lead_may_assign_and_only_within_reach(client_for, org, other_org, overdue, operator):
    assert client_for(operator).post(reverse("queue_assign_many"), {"review": [overdue[0].pk]}).status_code == 403
    outsider = make_person("olga", other_org, Role.LEAD)
    response = client_for(outsider).post(reverse("queue_assign_many"), {"review": [overdue[0].pk], "to": "x"})
    assert response.status_code == 404 and not Assignment.objects.exists()

"""Sending to review from the people side: the API (an org's key, audited under it) and the page a list's row links to
(leads within their reach, criteria admins and org admins)."""

import json

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from grading.api.keys import api_key_create
from grading.core.weeks import monday
from grading.models import AuditEvent, Review, ReviewState
from reviewer.models import Membership, Role
from tests.builders.people import make_person
from tests.builders.queue_items import conversation_item, draft_item, passed_draft_item

pytestmark = pytest.mark.django_db


def _post(client: Client, url: str, body: dict):
    return client.post(url, json.dumps(body), content_type="application/json")


def test_an_org_key_sends_a_passed_draft_to_review_with_a_reason_audited_under_the_key(org):
    review = passed_draft_item(org)
    issued = api_key_create(org=org, name="support-desk")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {issued.plaintext}")
    url = f"/api/v1/drafts/{review.draft_id}/send-to-review"

    answer = _post(client, url, {"reason": "A customer flagged it"})
    assert answer.status_code == 200
    assert answer.json() == {"review": review.pk, "state": "waiting", "sent_now": True}
    assert _post(client, url, {"reason": "again"}).json()["sent_now"] is False  # already with people: unchanged
    event = AuditEvent.objects.get(action="review.send")
    assert (event.api_key_id, event.actor, event.detail["reason"]) == (issued.api_key.pk, None, "A customer flagged it")


def test_an_org_key_sends_a_conversation_by_its_external_id(org):
    review = conversation_item(org, "cv-sent")
    Review.objects.filter(pk=review.pk).update(route="pass", reason="", state=ReviewState.CURRENT)
    client = Client(HTTP_AUTHORIZATION=f"Bearer {api_key_create(org=org, name='k').plaintext}")
    answer = _post(client, "/api/v1/conversations/cv-sent/send-to-review", {"reason": "thumbs down by mail"})
    assert answer.json() == {"review": review.pk, "state": "waiting", "sent_now": True}


@pytest.mark.parametrize("body", [{}, {"reason": ""}, {"reason": "  "}, {"reason": "x" * 501}, {"reason": 7}])
def test_the_api_refuses_a_missing_or_bad_reason_naming_it_and_writes_nothing(org, body):
    review = passed_draft_item(org)
    client = Client(HTTP_AUTHORIZATION=f"Bearer {api_key_create(org=org, name='k').plaintext}")
    answer = _post(client, f"/api/v1/drafts/{review.draft_id}/send-to-review", body)
    assert answer.status_code == 400
    assert "reason" in json.dumps(answer.json())
    assert Review.objects.get(pk=review.pk).state == ReviewState.CURRENT
    assert not AuditEvent.objects.filter(action="review.send").exists()


def test_the_api_answers_404_for_another_orgs_item_and_409_when_nothing_of_it_counts(org, other_org):
    review = passed_draft_item(org)
    url = f"/api/v1/drafts/{review.draft_id}/send-to-review"
    theirs = Client(HTTP_AUTHORIZATION=f"Bearer {api_key_create(org=other_org, name='theirs').plaintext}")
    assert _post(theirs, url, {"reason": "peek"}).status_code == 404
    Review.objects.filter(pk=review.pk).update(state=ReviewState.STALE)
    ours = Client(HTTP_AUTHORIZATION=f"Bearer {api_key_create(org=org, name='ours').plaintext}")
    assert _post(ours, url, {"reason": "look"}).status_code == 409
    assert not AuditEvent.objects.filter(action="review.send").exists()


def test_an_item_the_machine_routed_to_people_is_with_them_already(org):
    review = draft_item(org, "in-the-band")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {api_key_create(org=org, name='k').plaintext}")
    answer = _post(client, f"/api/v1/drafts/{review.draft_id}/send-to-review", {"reason": "look"})
    assert answer.json() == {"review": review.pk, "state": "waiting", "sent_now": False}


def _send_page(review) -> str:
    return reverse("review_send", args=[review.pk])


def test_a_lead_sends_a_passed_draft_from_its_page_and_goes_back_to_the_list(org, client_for):
    lead = make_person("lee", org, Role.LEAD)
    review = passed_draft_item(org)
    client = client_for(lead)
    back = "/dashboard/reviews/?counted_in=x"

    page = client.get(_send_page(review), {"next": back})
    assert page.status_code == 200 and b'name="reason"' in page.content
    answer = client.post(_send_page(review), {"reason": "Reads like a sales pitch", "next": back})

    assert answer.status_code == 302 and answer["Location"] == back
    review.refresh_from_db()
    assert (review.state, review.sent) == (ReviewState.WAITING, "person")
    assert AuditEvent.objects.get(action="review.send").actor == lead
    assert b'id="with-people"' in client.get(_send_page(review)).content
    # In the queue its row says a person sent it: the machine, which passed it, had no doubt to name.
    [row] = [row for row in client.get(reverse("queue")).context["page"].rows if row.review_id == review.pk]
    assert row.reason_label == "sent to review by a person"


def test_the_page_refuses_a_missing_reason_with_a_400_naming_it_and_writes_nothing(org, criteria_admin, client_for):
    review = passed_draft_item(org)
    answer = client_for(criteria_admin).post(_send_page(review), {"reason": "  "})
    assert answer.status_code == 400 and b'id="reason-errors"' in answer.content
    assert Review.objects.get(pk=review.pk).state == ReviewState.CURRENT
    assert not AuditEvent.objects.filter(action="review.send").exists()


def test_the_page_refuses_a_review_that_stopped_counting_with_a_409(org, criteria_admin, client_for):
    review = passed_draft_item(org)
    Review.objects.filter(pk=review.pk).update(state=ReviewState.STALE)
    answer = client_for(criteria_admin).post(_send_page(review), {"reason": "look"})
    assert answer.status_code == 409 and b'id="refusal"' in answer.content
    assert not AuditEvent.objects.filter(action="review.send").exists()


def test_operators_stakeholders_and_leads_outside_its_reach_cannot_send_an_item(org, operator, stakeholder, client_for):
    review = conversation_item(org, "cv-billing", application="billing")
    Review.objects.filter(pk=review.pk).update(route="pass", reason="", state=ReviewState.CURRENT)
    elsewhere = make_person("lee", org)
    Membership.objects.create(user=elsewhere, org=org, role=Role.LEAD, applications=["onboarding"], drafts=False)
    assert client_for(operator).post(_send_page(review), {"reason": "x"}).status_code == 403
    assert client_for(stakeholder).get(_send_page(review)).status_code == 403
    assert client_for(elsewhere).post(_send_page(review), {"reason": "x"}).status_code == 404
    assert Review.objects.get(pk=review.pk).state == ReviewState.CURRENT


def test_a_review_list_offers_to_send_the_items_nobody_looks_at_to_those_who_may(
    org, criteria_admin, stakeholder, client_for
):
    passed = passed_draft_item(org, "passed", week=monday(timezone.now()))
    routed = draft_item(org, "routed", week=monday(timezone.now()))
    listed = {"org": org.slug, "kind": "draft"}

    page = client_for(criteria_admin).get(reverse("dashboard_reviews"), listed).content.decode()
    assert f'href="{_send_page(passed)}?next=' in page
    assert _send_page(routed) not in page  # the machine sent it to people already
    assert "send-link" not in client_for(stakeholder).get(reverse("dashboard_reviews"), listed).content.decode()


def test_the_item_page_says_who_sent_it_and_why_and_the_operator_decides_it(org, operator, client_for):
    lead = make_person("lee", org, Role.LEAD)
    review = passed_draft_item(org)
    client_for(lead).post(_send_page(review), {"reason": "Reads like a <b>sales</b> pitch"})

    page = client_for(operator).get(reverse("review_detail", args=[review.pk])).content.decode()
    assert "Sent to review by lee: Reads like a &lt;b&gt;sales&lt;/b&gt; pitch The machine passed it." in page
    assert "sent to review" in page  # the trail's event

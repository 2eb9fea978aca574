"""The worked-example pages (issue 23): a criteria admin adds a decided item to an unpublished version from the item's
page or a disagreement list, reads the examples in the editor (escaped), explains and removes them; nobody else can,
and another org's version, item or example does not exist for them."""

import pytest
from django.urls import reverse
from django.utils import timezone

from grading.core.weeks import monday
from grading.models import AuditEvent, CriteriaExample, ItemKind, Review
from grading.reviews.examples import criteria_example_add
from grading.reviews.services import PersonVerdict, decision_record
from grading.reviews.versions import criteria_new_version, criteria_publish
from tests.builders.queue_items import conversation_item

pytestmark = pytest.mark.django_db
HOSTILE = '<script>alert("x")</script>'


def decided(org, person, external_id="cv-1", note=HOSTILE):
    review = conversation_item(org, external_id)
    checks = {"grounded": "fail", "complete": "pass", "usable": "pass"}
    decision_record(
        review_id=review.pk,
        decided_by=person,
        decided_at=timezone.now(),
        verdict=PersonVerdict(checks=checks, note=note),
    )
    return review


def add_form(version, review, check="grounded") -> dict:
    return {"version": version.pk, "kind": "conversation", "item": review.conversation_id, "check": check}


def test_an_admin_adds_a_decided_item_from_its_page_and_reads_it_escaped_in_the_editor(
    org, operator, criteria_admin, client_for
):
    review = decided(org, operator)
    version = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    client = client_for(criteria_admin)
    item_page = client.get(reverse("criteria_item", args=["conversation", review.conversation_id]))
    assert b"Add as example" in item_page.content and b"grounded (people: fail)" in item_page.content
    response = client.post(reverse("criteria_example_add"), add_form(version, review))
    assert response.status_code == 302 and response["Location"].endswith(f"/{version.pk}/#examples")
    editor = client.get(reverse("criteria_version", args=[version.pk])).content.decode()
    assert HOSTILE not in editor and "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in editor
    assert 'id="example-rows"' in editor and "Save explanation" in editor and "cv-1" in editor
    assert f'<a href="{reverse("criteria_item", args=["conversation", review.conversation_id])}">cv-1</a>' in editor
    assert CriteriaExample.objects.get().added_by == criteria_admin


def test_the_explanation_is_saved_and_the_example_removed_under_the_versions_revision(
    org, operator, criteria_admin, client_for
):
    review = decided(org, operator)
    version = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    example = criteria_example_add(version=version, subject=review.conversation, check="grounded")
    client = client_for(criteria_admin)
    stale = client.post(
        reverse("criteria_example_explain", args=[example.pk]), {"revision": 1, "explanation": "from an old page"}
    )
    assert stale.status_code == 302
    example.refresh_from_db()
    assert example.explanation == ""  # the page was read before the example was added: nothing saved
    followed = client.get(stale["Location"]).content.decode()
    assert "Not saved" in followed
    client.post(
        reverse("criteria_example_explain", args=[example.pk]), {"revision": 2, "explanation": f"Reads {HOSTILE}"}
    )
    example.refresh_from_db()
    assert example.explanation == f"Reads {HOSTILE}"
    assert HOSTILE not in client.get(reverse("criteria_version", args=[version.pk])).content.decode()
    client.post(reverse("criteria_example_remove", args=[example.pk]), {"revision": 3})
    assert not CriteriaExample.objects.exists()
    assert AuditEvent.objects.filter(action="criteria.example.remove", actor=criteria_admin).count() == 1


def test_a_published_versions_examples_are_read_only_and_a_write_changes_nothing(
    org, operator, criteria_admin, client_for
):
    review = decided(org, operator)
    version = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    example = criteria_example_add(version=version, subject=review.conversation, check="grounded")
    criteria_publish(version=version)
    client = client_for(criteria_admin)
    page = client.get(reverse("criteria_version", args=[version.pk])).content.decode()
    assert 'id="example-rows"' in page and "Save explanation" not in page and "Remove" not in page
    response = client.post(reverse("criteria_example_remove", args=[example.pk]), {"revision": 2}, follow=True)
    assert "is published" in response.content.decode()
    response = client.post(reverse("criteria_example_add"), add_form(version, review, "usable"), follow=True)
    assert "is published" in response.content.decode()
    assert CriteriaExample.objects.count() == 1
    assert (
        b"Add as example"
        not in client.get(reverse("criteria_item", args=["conversation", review.conversation_id])).content
    )  # no version left to add it to


def test_another_orgs_version_item_or_example_is_a_404_and_other_roles_are_refused(
    org, other_org, operator, criteria_admin, client_for, client
):
    review = decided(org, operator)
    foreign = decided(other_org, operator, "cv-x")
    version = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    foreign_version = criteria_new_version(org=other_org, kind=ItemKind.CONVERSATION)
    foreign_example = criteria_example_add(version=foreign_version, subject=foreign.conversation, check="grounded")
    assert client.post(reverse("criteria_example_add"), add_form(version, review)).status_code == 302  # to login
    assert client_for(operator).post(reverse("criteria_example_add"), add_form(version, review)).status_code == 403
    admin = client_for(criteria_admin)
    assert admin.post(reverse("criteria_example_add"), add_form(version, foreign)).status_code == 404
    assert admin.post(reverse("criteria_example_add"), add_form(foreign_version, review)).status_code == 404
    explain = reverse("criteria_example_explain", args=[foreign_example.pk])
    assert admin.post(explain, {"revision": 2, "explanation": "mine now"}).status_code == 404
    assert admin.post(reverse("criteria_example_remove", args=[foreign_example.pk]), {"revision": 2}).status_code == 404
    assert admin.post(reverse("criteria_example_add"), {"version": "x"}).status_code == 400
    foreign_example.refresh_from_db()
    assert foreign_example.explanation == "" and CriteriaExample.objects.filter(org=org).count() == 0


def test_an_item_without_a_human_verdict_is_refused_with_the_reason(org, criteria_admin, client_for):
    review = conversation_item(org, "cv-undecided")
    version = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    response = client_for(criteria_admin).post(reverse("criteria_example_add"), add_form(version, review), follow=True)
    assert "no human verdict on grounded" in response.content.decode()
    assert not CriteriaExample.objects.exists()


def test_the_queue_item_page_offers_a_decided_item_to_a_criteria_admin_who_works_the_queue(org, operator, client_for):
    from reviewer.models import Membership, Role

    Membership.objects.create(user=operator, org=org, role=Role.CRITERIA_ADMIN)
    review = decided(org, operator)
    criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    page = client_for(operator).get(reverse("review_detail", args=[review.pk])).content.decode()
    assert 'id="add-example"' in page and "grounded (people: fail)" in page
    assert "criteria fingerprint" not in page  # a review from before it was recorded shows none


def test_a_disagreement_list_offers_each_item_to_a_criteria_admin_and_only_to_them(
    org, operator, criteria_admin, stakeholder, client_for
):
    review = decided(org, operator)  # the machine passed grounded, the person failed it
    Review.objects.filter(pk=review.pk).update(week=monday(timezone.now()))  # filed in the dashboard's weeks
    version = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    query = {"org": org.slug, "kind": "conversation", "sample": "unsure", "check": "grounded", "machine": "pass"}
    query["human"] = "fail"
    admin_page = client_for(criteria_admin).get(reverse("dashboard_reviews"), query).content.decode()
    assert f'data-review="{review.pk}"' in admin_page and "Add as example" in admin_page
    assert f'name="item" value="{review.conversation_id}"' in admin_page and f'value="{version.pk}"' in admin_page
    agreeing = client_for(criteria_admin).get(reverse("dashboard_reviews"), query | {"machine": "fail"})
    assert "Add as example" not in agreeing.content.decode()
    assert "Add as example" not in client_for(stakeholder).get(reverse("dashboard_reviews"), query).content.decode()

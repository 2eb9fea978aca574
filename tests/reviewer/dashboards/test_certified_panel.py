"""The quality rate against people on the dashboard: loaded apart from the page (which reads counters only), in
words first, within the reader's reach."""

import json
from html import unescape

import pytest
from django.core.serializers.json import DjangoJSONEncoder
from django.urls import reverse
from django.utils import timezone

from grading.api.keys import api_key_create
from grading.core.weeks import monday
from grading.dashboard.certified import certified_figures
from grading.dashboard.figures import scope_for
from grading.models import ItemKind, Label, Review
from reviewer.models import Membership, Role
from tests.builders.certified import Graded, audit_decided, counted, filed_in, graded_drafts, reviews_of
from tests.builders.people import make_person
from tests.builders.queue_items import conversation_item

pytestmark = pytest.mark.django_db


@pytest.fixture
def audited_drafts(org, operator):
    reviews = reviews_of(graded_drafts(org, [Graded(0.9, True, None), Graded(0.8, False, None)] * 10))
    filed_in(reviews, monday(timezone.now()))
    audit_decided(reviews[:6], [True, False, True, True, False, False], operator)
    counted(org)
    return reviews


def test_the_page_loads_the_interval_apart_with_a_plain_link_to_it(client_for, stakeholder, org, audited_drafts):
    html = client_for(stakeholder).get(reverse("dashboard")).content.decode()
    slot = html[html.index('id="certified-quality"') :].split("</div>", 1)[0]
    url = reverse("dashboard_certified") + f"?org={org.slug}&"
    assert f'hx-get="{url}'.replace("&", "&amp;") in slot and 'hx-trigger="load"' in slot
    assert f'href="{url}'.replace("&", "&amp;") in slot  # without JavaScript, a link to it
    assert "People audited" not in html  # the page itself reads no review


def test_the_panel_says_the_interval_in_words_first(client_for, stakeholder, org, audited_drafts):
    drafts = certified_figures(scope_for(org))[ItemKind.DRAFT]
    low, high = drafts["interval"]["low"], drafts["interval"]["high"]
    client = client_for(stakeholder)
    fragment = unescape(client.get(reverse("dashboard_certified"), HTTP_HX_REQUEST="true").content.decode())
    words = f"People audited 6 drafts: the quality rate is {low:.0%} to {high:.0%} (PPI++, 95%); the judge counts 55%."
    assert words in fragment and not fragment.lstrip().startswith("<!")
    assert "People audited 0 conversations: too few for an interval" not in fragment
    assert "No graded conversations in these weeks." in fragment
    page = unescape(client.get(reverse("dashboard_certified")).content.decode())
    assert words in page and reverse("dashboard") in page  # alone: a page of its own, with the way back


def test_a_reader_limited_to_an_application_reads_the_interval_of_its_items_only(client_for, org):
    for n, application in enumerate(("billing", "billing", "onboarding")):
        review = conversation_item(org, f"cv-{n}", application=application)
        Review.objects.filter(pk=review.pk).update(route="pass", week=monday(timezone.now()))
    counted(org)
    person = make_person("lee")
    Membership.objects.create(user=person, org=org, role=Role.STAKEHOLDER, applications=["onboarding"], drafts=False)
    fragment = client_for(person).get(reverse("dashboard_certified"), HTTP_HX_REQUEST="true").content.decode()
    assert 'data-figure="items">1<' in fragment
    assert client_for(person).get(reverse("dashboard_certified"), {"application": "billing"}).status_code == 400


def test_the_api_and_the_export_carry_the_interval_and_the_rows_behind_it(client, client_for, stakeholder, org,
                                                                            audited_drafts):  # fmt: skip
    scope = scope_for(org)
    key = api_key_create(org=org, name="tools").plaintext
    response = client.get("/api/v1/dashboard/certified", scope.as_query(), HTTP_AUTHORIZATION=f"Bearer {key}")
    assert response.status_code == 200
    expected = json.loads(json.dumps(certified_figures(scope), cls=DjangoJSONEncoder))
    assert response.json()["certified"] == expected and "quality" not in response.json()
    assert expected["draft"]["interval"]["low"] < expected["draft"]["interval"]["high"]

    export = client_for(stakeholder).get(reverse("dashboard_export"), {"kind": "draft", "format": "jsonl"})
    rows = [json.loads(line) for line in b"".join(export.streaming_content).decode().splitlines()]
    confidences = {review.pk: review.confidences for review in Review.objects.filter(org=org)}
    assert {row["review_id"]: row["confidences"] for row in rows} == confidences
    assert {row["certificate"] for row in rows} == {None}
    assert sum(row["audit"] for row in rows) == 6 and {Label.PASS_FAIL} == set(rows[0]["confidences"])

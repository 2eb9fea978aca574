"""The dashboard's corrections panel: loaded apart (htmx) or a page of its own, every count leading to a list of
exactly the reviews it counted, the export offered only to those who read items, a bad link refused naming it."""

import html
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from grading.models import Decision, Review
from reviewer.dashboards.display import Linked
from tests.builders.conversations import PATH_IDS, verdicts
from tests.builders.corrections import draft_correction, expected_reply
from tests.builders.queue_items import conversation_item, draft_item

pytestmark = pytest.mark.django_db

LINKS = {"code": "internal_links_missing", "severity": "fixable", "message": "no internal link", "spans": []}


def _decide(review: Review, person, outcome: str) -> Review:
    Review.objects.filter(pk=review.pk).update(state="decided")
    Decision.objects.create(
        org=review.org, review=review, outcome=outcome, decided_by=person, decided_at=timezone.now(), note="n"
    )
    return review


@pytest.fixture
def world(org, operator):
    _decide(draft_item(org, "d-ok"), operator, "approve")
    _decide(draft_item(org, "d-back", findings=[LINKS]), operator, "send_back")
    draft_correction(
        draft_item(org, "d-fixed", findings=[LINKS]), author=operator, corrected="Fixed.", regrade_findings=[]
    )
    replied = _decide(conversation_item(org, "cv-1", checks=verdicts(PATH_IDS, complete="fail")), operator, "fail")
    expected_reply(replied, author=operator, reply="<b>What it should have said.</b>")
    draft_item(org, "d-rep", repairs={"applied": [{"code": "banned_character", "description": "dash"}]})
    Review.objects.filter(draft__external_id="d-ok").update(finished_at=timezone.now() - timedelta(hours=1))


def _panel(client, org, **extra):
    return client.get(reverse("dashboard_corrections"), {"org": org.slug}, **extra)


def _numbers(panel: dict) -> list[Linked]:
    found = []
    for k in panel["kinds"]:
        for row in [k["total"], *k["weeks"], *k["checks"]]:
            found += [row["decided"], *row["linked"].values()]
    for row in panel["repairs"]:
        found += [value for value in row.values() if isinstance(value, Linked)]
    return found


def test_every_count_leads_to_a_list_of_exactly_the_reviews_it_counted(client_for, org, stakeholder, world):
    client = client_for(stakeholder)
    numbers = _numbers(_panel(client, org).context["panel"])
    assert sum(n.value for n in numbers) > 0
    for number in numbers:
        listed = client.get(html.unescape(number.url))
        assert listed.status_code == 200
        assert listed.context["total"] == number.value == len(listed.context["rows"]), number.url


def test_the_panel_loads_apart_on_the_dashboard_and_is_a_page_without_htmx(client_for, org, stakeholder, world):
    client = client_for(stakeholder)
    page = client.get(reverse("dashboard"), {"org": org.slug}).content.decode()
    assert 'id="corrections-panel" hx-get="/dashboard/corrections/?' in page
    partial = _panel(client, org, HTTP_HX_REQUEST="true")
    assert (
        partial.status_code == 200 and b"<html" not in partial.content and b'id="corrections-panel"' in partial.content
    )
    full = _panel(client, org)
    assert b"<html" in full.content and b"People corrected 1 of the 3 drafts" in full.content


def test_the_export_is_offered_to_those_who_read_items_only(client_for, org, stakeholder, criteria_admin, world):
    for page in (_panel(client_for(stakeholder), org), client_for(stakeholder).get(reverse("dashboard"))):
        assert b"/dashboard/corrections/export/" not in page.content
    for page in (_panel(client_for(criteria_admin), org), client_for(criteria_admin).get(reverse("dashboard"))):
        assert page.content.count(b"/dashboard/corrections/export/?") == 2  # JSONL and chat


def test_the_list_shows_which_items_never_a_corrections_text(client_for, org, criteria_admin, world):
    client = client_for(criteria_admin)
    listed = client.get(
        reverse("dashboard_corrections_items"), {"org": org.slug, "kind": "conversation", "what": "corrected"}
    )
    assert listed.status_code == 200 and listed.context["total"] == 1
    assert b"What it should have said" not in listed.content


@pytest.mark.parametrize(
    ("query", "field"),
    [({"kind": "essay", "what": "corrected"}, b"kind"), ({"kind": "draft", "what": "x"}, b"what"),
     ({"kind": "draft", "what": "corrected", "week": "W1"}, b"week"),
     ({"kind": "draft", "what": "corrected", "check": "a\x00b"}, b"check"), ({"kind": "draft", "from": "x"}, b"from")],
)  # fmt: skip
def test_a_bad_link_is_a_400_naming_its_field(client_for, org, stakeholder, query, field):
    response = client_for(stakeholder).get(reverse("dashboard_corrections_items"), {"org": org.slug, **query})
    assert response.status_code == 400 and field in response.content


def test_another_orgs_person_finds_no_such_org(client_for, org, other_org_operator):
    assert _panel(client_for(other_org_operator), org).status_code == 404

"""Stakeholders read only, and only their orgs: every POST from them is refused and writes nothing; another org's
figures do not exist for them; a link that does not parse is a 400 naming what to fix."""

import pytest
from django.urls import reverse

from grading.models import Decision, Label, Review
from reviewer.models import Claim
from tests.builders.queue_items import conversation_item, draft_item

pytestmark = pytest.mark.django_db

PAGES = (
    "dashboard", "dashboard_reviews", "dashboard_regrade", "dashboard_export", "dashboard_certified", "dashboard_queue",
    "dashboard_service", "dashboard_gate", "dashboard_spend",
)  # fmt: skip


@pytest.mark.parametrize("name", PAGES)
def test_anonymous_people_are_sent_to_sign_in(client, name):
    response = client.get(reverse(name))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


@pytest.mark.parametrize("name", PAGES)
def test_a_signed_in_person_without_a_role_is_refused(client_for, roleless, name):
    assert client_for(roleless).get(reverse(name)).status_code == 403


@pytest.mark.parametrize("name", PAGES)
def test_another_orgs_figures_do_not_exist_for_a_stakeholder(client_for, stakeholder, other_org, name):
    assert client_for(stakeholder).get(reverse(name), {"org": other_org.slug}).status_code == 404


def test_a_stakeholder_sees_only_their_orgs_items_in_the_lists(client_for, stakeholder, org, other_org):
    mine, theirs = conversation_item(org, "mine"), conversation_item(other_org, "theirs")
    Review.objects.filter(pk__in=[mine.pk, theirs.pk]).update(week=mine.conversation.started_at.date())
    html = client_for(stakeholder).get(reverse("dashboard_reviews"), {"route": "human"}).content.decode()
    assert "theirs" not in html


def test_every_post_from_a_stakeholder_is_refused_and_writes_nothing(client_for, stakeholder, org):
    conversation, draft = conversation_item(org), draft_item(org)
    client = client_for(stakeholder)
    for name in PAGES:
        assert client.post(reverse(name)).status_code == 405, name
    queue_posts = [reverse("queue_claim_next")] + [
        reverse(name, args=[review.pk])
        for review in (conversation, draft)
        for name in ("review_claim", "review_release", "review_heartbeat", "review_decide")
    ]
    for url in queue_posts:
        assert client.post(url, {"outcome": "approve", "fingerprint": draft.fingerprint}).status_code == 403, url
    labels = {"labels": [{"item": "cv-1", "check": "grounded", "verdict": "fail", "labeller": "sam"}]}
    assert client.post("/api/v1/labels", labels, content_type="application/json").status_code == 401
    assert not Claim.objects.exists() and not Decision.objects.exists() and not Label.objects.exists()
    assert set(Review.objects.values_list("state", flat=True)) == {"waiting"}


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"from": "2026-13"}, "from"),
        ({"from": "2026-W48", "to": "2026-W40"}, "from"),
        ({"from": "2020-W01", "to": "2026-W40"}, "from"),
        ({"route": "maybe"}, "route"),
        ({"check": "tone"}, "check"),
        ({"kind": "memo"}, "kind"),
        ({"operator": "dana"}, "operator"),
        ({"after": "x"}, "after"),
        ({"format": "xlsx"}, "format"),
    ],
)
def test_a_link_that_does_not_parse_is_a_400_naming_the_field(client_for, stakeholder, query, field):
    name = "dashboard_export" if field == "format" else "dashboard_reviews"
    response = client_for(stakeholder).get(reverse(name), query)
    assert response.status_code == 400
    assert f"<b>{field}</b>" in response.content.decode()


def test_the_quality_interval_names_a_week_it_does_not_understand(client_for, stakeholder):
    response = client_for(stakeholder).get(reverse("dashboard_certified"), {"from": "2026-13"})
    assert response.status_code == 400 and "<b>from</b>" in response.content.decode()

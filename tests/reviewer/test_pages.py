"""Every page for every persona: anonymous → sign-in, without the role → 403, with the role → 200."""

import re

import pytest
from django.urls import reverse

from grading.conversations.grader import conversation_grade
from grading.judge.backends import HeuristicJudge
from grading.models import AuditEvent
from tests.builders.conversations import message, upsert
from tests.builders.people import PASSWORD

PAGES = {
    "queue": {"operator"},
    "criteria": {"criteria_admin"},
    "dashboard": {"operator", "criteria_admin", "stakeholder"},
}
PERSONAS = ["operator", "criteria_admin", "stakeholder", "roleless"]


@pytest.mark.parametrize("page", PAGES)
def test_anonymous_is_sent_to_sign_in(client, db, page):
    response = client.get(reverse(page))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("persona", PERSONAS)
def test_each_page_answers_by_role(request, client_for, page, persona):
    response = client_for(request.getfixturevalue(persona)).get(reverse(page))
    assert response.status_code == (200 if persona in PAGES[page] else 403)


def test_navigation_shows_only_what_the_role_opens(client_for, stakeholder):
    html = client_for(stakeholder).get(reverse("dashboard")).content.decode()
    assert reverse("dashboard") in html
    assert reverse("queue") not in html
    assert reverse("criteria") not in html


def test_home_sends_an_operator_to_the_queue(client_for, operator):
    assert client_for(operator).get("/")["Location"] == reverse("queue")


def test_signing_in_is_audited_and_wrong_passwords_are_throttled(client, operator):
    response = client.post(reverse("login"), {"username": "dana", "password": PASSWORD})
    assert response.status_code == 302
    assert AuditEvent.objects.filter(action="user.login", actor=operator).count() == 1
    client.post(reverse("logout"))
    for _ in range(5):
        client.post(reverse("login"), {"username": "dana", "password": "wrong"})
    locked = client.post(reverse("login"), {"username": "dana", "password": PASSWORD})
    assert locked.status_code == 429
    assert not locked.wsgi_request.user.is_authenticated


def test_the_csp_header_allows_no_inline_script(client_for, operator):
    policy = client_for(operator).get(reverse("queue"))["Content-Security-Policy"]
    script_src = next(part for part in policy.split(";") if part.strip().startswith("script-src"))
    assert script_src.split() == ["script-src", "'self'"]


def test_the_dashboard_shows_quality_with_unknowns_beside_it_and_the_staleness_audit(client_for, stakeholder, org):
    replies = ["Order 1182 has shipped and will arrive soon, tracking is in your email.", "Shipped."]
    for index, reply in enumerate(replies):
        payload = {
            "external_id": f"c{index}",
            "application": "billing-<b>assistant</b>",
            "closed": True,
            "messages": [message("u1", "user", "Status of 1182?", None, 0), message("a1", "assistant", reply, "u1", 1)],
        }
        conversation_grade(conversation_id=upsert(org, payload).conversation.pk, judge=HeuristicJudge())
    html = client_for(stakeholder).get(reverse("dashboard")).content.decode()
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))
    assert "stale current reviews 0 " in text
    # The unknown is beside the number, not in it.
    assert "1 / 1 resolved pass every check (100%)" in text and "1 of 2 unknown, not counted" in text
    assert "billing-&lt;b&gt;assistant&lt;/b&gt;" in html

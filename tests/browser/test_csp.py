"""Content-Security-Policy in Chromium: every page of the security matrix (tests/resilience/test_security_matrix.py),
walked from the URLconf, renders with no violation, as each persona it serves sees it."""

import pytest
from django.urls import reverse

from reviewer.models import Role
from tests.builders.browser import count_requests, settled, sign_in
from tests.builders.page_matrix import PAGES, matrix_world, more_people, path_for, url_routes
from tests.builders.people import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def world(org, other_org, operator, criteria_admin, stakeholder, roleless, other_org_operator):
    people = {"operator": operator, "criteria_admin": criteria_admin, "stakeholder": stakeholder,
              "roleless": roleless, "other_org_operator": other_org_operator}  # fmt: skip
    return matrix_world(org, other_org, people | more_people(org))


_LISTEN = """
window.__violations = [];
document.addEventListener('securitypolicyviolation', e =>
  window.__violations.push(`${e.violatedDirective} blocked ${e.blockedURI || 'inline'} at ${e.sourceFile}`));
"""


def test_every_page_renders_in_chromium_with_no_content_security_policy_violation(browser, live_server, world):
    """Every GET page of the matrix, opened by a persona it serves (item pages of both kinds), plus the API docs
    and the admin's sign-in page."""
    ids = world["objects"]["own"]
    visits = []  # (persona, path)
    for route in url_routes():
        if route.name in PAGES and "GET" in PAGES[route.name].methods and PAGES[route.name].page:
            policy = PAGES[route.name]
            persona = "anonymous" if policy.kind == "public" else "operator"
            if policy.roles and Role.OPERATOR not in policy.roles:
                persona = {Role.ORG_ADMIN: "org_admin"}.get(policy.roles[0], "criteria_admin")
            visits.append((persona, path_for(route, ids)))
            if route.name == "review_detail":
                visits.append((persona, reverse("review_detail", kwargs={"pk": ids["conversation_review"]})))
    visits += [("anonymous", reverse("api:openapi-view")), ("anonymous", reverse("admin:login"))]
    violations = []
    for persona in sorted({persona for persona, _ in visits}):
        context = browser.new_context(base_url=live_server.url)
        context.add_init_script(_LISTEN)
        count_requests(context)
        tab = context.new_page()
        errors = []
        tab.on(
            "console",
            lambda message, errors=errors: "Content Security Policy" in message.text and errors.append(message.text),
        )
        if persona != "anonymous":
            sign_in(tab, world["people"][persona].username, PASSWORD)
            tab.wait_for_url(lambda url: not url.endswith("/login/"))
            settled(tab)
        for who, path in visits:
            if who != persona:
                continue
            tab.goto(path)
            settled(tab)
            found = tab.evaluate("window.__violations")
            violations += [f"{path} as {persona}: {v}" for v in found + errors]
            errors.clear()
        context.close()
    assert len(visits) >= 8
    assert violations == []

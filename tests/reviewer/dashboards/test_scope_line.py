"""The dashboard's pages of their own name the scope they read: its org, its weeks and its application. An
application is a name an agent's pipeline chose, so it is shown as untrusted text (a hidden character as its marker),
as the dashboard page shows it."""

import pytest
from django.urls import reverse

from tests.builders.queue_items import conversation_item

pytestmark = pytest.mark.django_db

ZWSP = "\u200b"
SPOOFED = f"bill{ZWSP}ing"
# Each page of its own, with what it asks besides the scope.
PAGES_OF_THEIR_OWN = [
    ("dashboard_certified", {}),
    ("dashboard_statistics", {"of": "judge"}),
    ("dashboard_statistics", {"of": "people"}),
    ("dashboard_corrections", {}),
    ("dashboard_queue", {}),
    ("dashboard_service", {}),
    ("dashboard_gate", {}),
    ("dashboard_spend", {}),
]


@pytest.mark.parametrize(
    ("name", "asked"), PAGES_OF_THEIR_OWN, ids=[" ".join([name, *asked.values()]) for name, asked in PAGES_OF_THEIR_OWN]
)
def test_a_page_of_its_own_names_its_application_as_untrusted_text(org, stakeholder, client_for, name, asked):
    conversation_item(org, "cv-1", application=SPOOFED)
    response = client_for(stakeholder).get(reverse(name), {"org": org.slug, "application": SPOOFED, **asked})

    assert response.status_code == 200
    page = response.content.decode()
    assert ZWSP not in page
    assert '<bdi class="untrusted">bill<span class="ctl" title="zero width space">⟨U+200B⟩</span>ing</bdi>' in page

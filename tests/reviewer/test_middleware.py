"""What a signed-in person or an API key was shown stays out of every cache (`Cache-Control: no-store, private`):
pages, their htmx partials, exports, redirects and errors alike, so the evidence is not in a shared browser's
cache after they sign out."""

import pytest
from django.urls import reverse

from grading.api.keys import api_key_create

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "queue-table"}


def directives(response) -> set[str]:
    return {part.strip() for part in response.get("Cache-Control", "").split(",") if part.strip()}


@pytest.mark.parametrize(
    ("persona", "url", "headers"),
    [
        ("operator", "/", {}),  # a redirect
        ("operator", reverse("queue"), {}),
        ("operator", reverse("queue"), HTMX),
        ("operator", reverse("review_detail", args=[999_999]), {}),  # a 404
        ("criteria_admin", reverse("criteria"), {}),
        ("stakeholder", reverse("dashboard"), {}),
        ("stakeholder", reverse("dashboard_reviews"), {}),
        ("stakeholder", reverse("dashboard_export") + "?format=csv", {}),
        ("stakeholder", reverse("dashboard_export") + "?format=jsonl", {}),
        ("stakeholder", reverse("queue"), {}),  # refused: no operator role
    ],
)
def test_it_keeps_every_answer_to_a_signed_in_person_out_of_caches(request, client_for, persona, url, headers):
    response = client_for(request.getfixturevalue(persona)).get(url, **headers)
    assert response.status_code < 500
    assert {"no-store", "private"} <= directives(response), (url, response.status_code)


@pytest.mark.parametrize("path", ["/api/v1/dashboard", "/api/v1/whoami", "/api/v1/conversations/none"])
def test_it_keeps_every_answer_to_an_api_key_out_of_caches(client, org, path):
    key = api_key_create(org=org, name="stakeholder's script").plaintext
    response = client.get(path, HTTP_AUTHORIZATION=f"Bearer {key}")
    assert response.status_code in (200, 404)
    assert directives(response) == {"no-store", "private"}

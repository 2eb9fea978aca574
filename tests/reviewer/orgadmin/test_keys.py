"""API keys from the browser: made and shown once, usable against the API, listed with their last use, and refused
by the API from the moment an org admin revokes them; another org's keys are not there."""

import pytest

from grading.api.keys import api_key_create
from grading.models import ApiKey, AuditEvent

pytestmark = pytest.mark.django_db


def shown_key(page: str) -> str:
    return page.split('<code class="ident">')[1].split("</code>")[0]


def test_a_key_is_shown_once_works_against_the_api_and_is_refused_after_revocation(client, client_for, org_admin, org):
    admin = client_for(org_admin)
    response = admin.post("/org/keys/", {"org": org.pk, "name": "support-pipeline"})
    assert response.status_code == 200
    plaintext = shown_key(response.content.decode())
    key = ApiKey.objects.get(org=org, name="support-pipeline")
    assert plaintext.startswith(key.prefix) and key.created_by == org_admin

    api = {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}
    assert client.get("/api/v1/whoami", **api).json() == {
        "org": "northwind",
        "key_name": "support-pipeline",
        "person": None,
    }
    page = admin.get("/org/keys/").content.decode()
    assert plaintext not in page  # never again
    assert key.prefix in page and "never" not in page.split(f'id="api-key-{key.pk}"')[1].split("</tr>")[0]

    assert admin.post(f"/org/keys/{key.pk}/revoke/").status_code == 302
    assert client.get("/api/v1/whoami", **api).status_code == 401
    key.refresh_from_db()
    assert key.revoked_at is not None
    events = AuditEvent.objects.filter(object_id=str(key.pk)).order_by("pk")
    assert [(event.action, event.actor) for event in events] == [
        ("api_key.create", org_admin),
        ("api_key.revoke", org_admin),
    ]


@pytest.mark.parametrize("fields", [{}, {"name": ""}, {"name": "   "}, {"name": "x" * 101}, {"name": "ok", "org": "x"}])
def test_a_key_without_a_good_name_is_a_form_error_and_nothing_is_made(client_for, org_admin, org, fields):
    response = client_for(org_admin).post("/org/keys/", {"org": org.pk} | fields)
    assert response.status_code == 400
    assert b"Nothing was changed" in response.content
    assert not ApiKey.objects.exists()


def test_another_orgs_keys_are_not_listed_made_or_revoked(client_for, org_admin, other_org):
    theirs = api_key_create(org=other_org, name="their-pipeline").api_key
    client = client_for(org_admin)
    assert "their-pipeline" not in client.get("/org/keys/").content.decode()
    assert client.post(f"/org/keys/{theirs.pk}/revoke/").status_code == 404
    assert client.post("/org/keys/", {"org": other_org.pk, "name": "sneaky"}).status_code == 404
    theirs.refresh_from_db()
    assert theirs.revoked_at is None
    assert list(ApiKey.objects.values_list("name", flat=True)) == ["their-pipeline"]

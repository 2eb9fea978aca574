import pytest

from grading.api.keys import api_key_create, api_key_revoke
from grading.models import ApiKey, AuditEvent


@pytest.fixture
def issued(org):
    return api_key_create(org=org, name="writer pipeline")


def bearer(key: str) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {key}"}


def test_a_key_is_stored_only_as_a_hash(issued):
    stored = ApiKey.objects.get(pk=issued.api_key.pk)
    assert issued.plaintext not in (stored.key_hash, stored.prefix, stored.name)
    assert issued.plaintext.startswith(stored.prefix)
    assert AuditEvent.objects.filter(action="api_key.create", object_id=str(stored.pk)).exists()


@pytest.mark.parametrize(
    "headers", [{}, bearer("tg_not-a-real-key"), bearer("garbage"), {"HTTP_AUTHORIZATION": "Basic x"}]
)
def test_missing_or_wrong_keys_get_401(client, issued, headers):
    assert client.get("/api/v1/whoami", **headers).status_code == 401


def test_a_revoked_key_gets_401(client, issued):
    api_key_revoke(api_key=issued.api_key)
    assert client.get("/api/v1/whoami", **bearer(issued.plaintext)).status_code == 401


def test_a_valid_key_gets_200_and_its_last_used_time_moves(client, issued):
    assert issued.api_key.last_used_at is None
    response = client.get("/api/v1/whoami", **bearer(issued.plaintext))
    assert response.status_code == 200
    assert response.json() == {"org": "northwind", "key_name": "writer pipeline", "person": None}
    issued.api_key.refresh_from_db()
    assert issued.api_key.last_used_at is not None


def test_the_openapi_document_is_served(client, db):
    document = client.get("/api/v1/openapi.json").json()
    assert "/api/v1/health" in document["paths"]


def test_the_api_docs_load_swagger_from_our_own_static_files(client, db):
    html = client.get("/api/v1/docs").content.decode()
    assert "/static/ninja/swagger-ui-bundle.js" in html
    assert "cdn." not in html  # the machines, and many users' networks, have no internet
    assert "<script>" not in html  # nothing inline for the CSP to refuse

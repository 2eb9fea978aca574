"""Schemathesis fuzzes every operation of the OpenAPI document: no input makes the API answer 5xx, a refusal writes
nothing (row counts before and after), and the JSON API names what it refuses: the fields of a 400, the limit of a
413 (issue 11, Build 6). The OTLP receiver answers in the OTLP status format and is held to the first two."""

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, settings

from grading.api.keys import api_key_create
from reviewer.wsgi import application
from tests.builders.api_calls import row_counts


@schemathesis.serializer("application/x-protobuf")
def protobuf_bytes(ctx, value) -> bytes:
    """The OTLP endpoint's protobuf body: generated as binary, sent as the bytes it is."""
    return value if isinstance(value, bytes) else str(value).encode()


schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", application).exclude(
    path="/api/v1/health"  # asks live workers over the broker: covered end to end in test_worker
)


@pytest.fixture
def bearer(org) -> dict:
    return {"Authorization": f"Bearer {api_key_create(org=org, name='fuzzer').plaintext}"}


@pytest.fixture(autouse=True)
def keep_the_test_connection():
    """Requests go through the WSGI app in this thread; as Django's own test client does, stop the start and end of a
    request from closing the connection that holds the test's transaction."""
    for signal in (request_started, request_finished):
        signal.disconnect(close_old_connections)
    yield
    for signal in (request_started, request_finished):
        signal.connect(close_old_connections)


@pytest.mark.slow
@pytest.mark.django_db
@schema.parametrize()
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_input_makes_the_api_answer_5xx_and_a_refusal_writes_nothing_and_says_why(case, bearer):
    before = row_counts()
    response = case.call(headers=bearer)
    assert response.status_code < 500, response.text[:500]
    if response.status_code < 400:
        return
    assert row_counts() == before, response.text[:500]
    if case.path.startswith("/api/v1/otlp/") or response.status_code not in (400, 404, 413):
        return  # OTLP answers in its own status format; 401, 405 and the like have nothing to name
    body = response.json()
    assert body["detail"], response.text[:500]
    if response.status_code == 400:
        assert body["errors"] and all(error["field"] and error["message"] for error in body["errors"]), body
    if response.status_code == 413:
        assert body["limit"].startswith("MAX_"), body

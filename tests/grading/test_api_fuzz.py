"""Schemathesis fuzzes every operation of the OpenAPI document: no input makes the API answer 5xx."""

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, settings

from grading.services import api_key_create
from reviewer.wsgi import application


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


@pytest.mark.django_db
@schema.parametrize()
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_input_makes_the_api_answer_5xx(case, bearer):
    response = case.call(headers=bearer)
    assert response.status_code < 500, response.text[:500]

"""A request body sent chunked, as JavaScript's OTLP exporters send it: gunicorn, serving `reviewer.wsgi` as in
production, reads it whole (an export is stored, not answered 200 with nothing stored) and refuses one over
MAX_REQUEST_BYTES; a server that cannot read it says so."""

import http.client
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from grading.api.keys import api_key_create
from grading.models import Conversation
from reviewer.wsgi import application
from tests.builders.processes import REPO_ROOT, database_url, wait_until

RECORDING = Path(__file__).resolve().parents[1] / "fixtures" / "otlp" / "ai-sdk-two-turns.pb"


@pytest.fixture
def gunicorn(tmp_path):
    """gunicorn serving reviewer.wsgi on a port it picks; yields the port."""
    env = os.environ | {
        "DATABASE_URL": database_url(settings.DATABASES["default"]),
        "REDIS_URL": settings.REDIS_URL,
        "MAX_REQUEST_BYTES": "1000000",
    }
    log_path = tmp_path / "gunicorn.log"
    with log_path.open("w") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "reviewer.wsgi", "-b", "127.0.0.1:0", "-w", "1"],
            cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip

    def listening() -> int | None:
        assert server.poll() is None, log_path.read_text()
        found = re.search(r"Listening at: http://127\.0\.0\.1:(\d+)", log_path.read_text())
        return found and int(found[1])

    try:
        yield wait_until(listening, timeout=60, message="gunicorn to listen")
    finally:
        server.terminate()
        server.wait(timeout=30)


def post_chunked(port: int, key: str, body: bytes) -> http.client.HTTPResponse:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    pieces = (body[i : i + 4096] for i in range(0, len(body), 4096))
    connection.request(
        "POST", "/api/v1/otlp/v1/traces", body=pieces, encode_chunked=True,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/x-protobuf"},
    )  # fmt: skip
    return connection.getresponse()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_gunicorn_reads_a_chunked_export_whole_and_refuses_one_over_the_limit(gunicorn, org):
    key = api_key_create(org=org, name="ai sdk agent").plaintext
    answer = post_chunked(gunicorn, key, RECORDING.read_bytes())
    assert answer.status == 200, answer.read()[:500]
    assert Conversation.objects.get(org=org, external_id="support-1").message_count == 9

    answer = post_chunked(gunicorn, key, b"\n" * 1_000_001)
    assert answer.status == 413 and b"MAX_REQUEST_BYTES" in answer.read()


def test_a_server_that_cannot_read_a_chunked_body_answers_411_saying_what_to_do():
    answers = []
    environ = {
        "REQUEST_METHOD": "POST", "PATH_INFO": "/api/v1/otlp/v1/traces", "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8000", "wsgi.url_scheme": "http", "wsgi.input": io.BytesIO(b""),
        "HTTP_TRANSFER_ENCODING": "chunked", "CONTENT_TYPE": "application/x-protobuf",
    }  # fmt: skip
    body = b"".join(application(environ, lambda status, headers: answers.append(status)))
    assert answers == ["411 Length Required"]
    assert b"send Content-Length, or run Tollgate under gunicorn" in body

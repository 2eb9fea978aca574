"""Deployed as docs/production.md says: everything a person and a pipeline do reaches Tollgate through Debian's
nginx with the documented site, TLS and settings, and the protections those settings promise hold there (see
conftest.py for what is started and what is changed)."""

import csv
import io
import json
import re
from pathlib import Path

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.utils import timezone

from grading.api.keys import api_key_create
from grading.core.weeks import monday
from grading.models import Conversation
from reviewer.models import Role
from tests.builders.people import PASSWORD, make_person
from tests.builders.queue_items import draft_item
from tests.deploy.conftest import DEPLOY, HOST, deployment_environment, documented_settings, finished, manage

# One nginx and gunicorn for the module, on one xdist worker. The tests that use them commit what gunicorn reads
# (`transaction=True`); each costs a flush of the database, so they are few and each tells one person's story.
pytestmark = pytest.mark.xdist_group("deploy")
committed = pytest.mark.django_db(transaction=True)

OTLP_EXPORT = Path(__file__).resolve().parents[1] / "fixtures" / "otlp" / "ai-sdk-two-turns.pb"
DANA, MALLORY = "127.0.0.2", "127.0.0.3"  # two people's machines, as nginx sees them


@pytest.fixture
def dana(org):
    """A stakeholder whose password is hashed as production hashes it: gunicorn knows only the production hashers."""
    person = make_person("dana", org, Role.STAKEHOLDER)
    hasher = PBKDF2PasswordHasher()
    person.password = hasher.encode(PASSWORD, hasher.salt())
    person.save(update_fields=["password"])
    return person


@pytest.mark.slow
def test_the_documented_settings_pass_the_deploy_check(tmp_path):
    env = deployment_environment(tmp_path, https_port=443, static_root=tmp_path / "static")
    checked = finished(manage("check", "--deploy", "--fail-level", "WARNING", env=env))
    assert checked.returncode == 0, checked.stdout
    assert "System check identified no issues (0 silenced)" in checked.stdout


@pytest.mark.slow
@committed
def test_a_person_signs_in_over_tls_from_the_trusted_origin_and_downloads_a_streamed_export(deployment, org, dana):
    review = draft_item(org, week=monday(timezone.now()))
    typed = deployment.plain_http("/dashboard/?app=billing")
    assert typed.status == 301 and typed.headers["Location"] == f"https://{HOST}/dashboard/?app=billing"

    browser = deployment.browser(DANA)
    form = browser.request("GET", "/login/")
    assert form.status == 200  # X-Forwarded-Proto believed: no redirect loop
    assert form.headers["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains; preload"
    assert form.cookies["csrftoken"]["secure"]
    assert_static_files_come_from_nginx(deployment, form.body)

    assert browser.sign_in("dana", PASSWORD, Origin="https://evil.example").status == 403
    assert browser.sign_in("dana", PASSWORD, Referer="https://evil.example/login/").status == 403
    assert "sessionid" not in browser.cookies
    # No Origin (an older browser): the Referer names the trusted origin.
    signed_in = browser.sign_in("dana", PASSWORD, Referer=f"{deployment.origin}/login/")
    assert signed_in.status == 302 and signed_in.headers["Location"] == "/"
    session = signed_in.cookies["sessionid"]
    assert session["secure"] and session["httponly"]

    export = browser.request("GET", f"/dashboard/export/?org={org.slug}&kind=draft")
    assert export.status == 200, export.body[:500]
    assert export.headers["Content-Type"] == "text/csv; charset=utf-8"
    assert export.headers["Transfer-Encoding"] == "chunked" and "Content-Length" not in export.headers
    rows = list(csv.DictReader(io.StringIO(export.body.decode())))
    assert [row["review_id"] for row in rows] == [str(review.pk)]


@committed
def test_failed_sign_ins_lock_out_that_client_behind_the_proxy_and_no_other(deployment, dana):
    mallory = deployment.browser(MALLORY)
    for _ in range(4):
        assert mallory.sign_in("dana", "guess", Origin=deployment.origin).status == 200  # the form, with its error
    # The fifth failure (AXES_FAILURE_LIMIT, the documented default) locks.
    assert mallory.sign_in("dana", "guess", Origin=deployment.origin).status == 429
    assert AccessAttempt.objects.get(username="dana").ip_address == MALLORY  # the client nginx saw, not nginx

    # Writing Dana's address in X-Forwarded-For changes nothing: nginx appends the address it saw.
    assert mallory.sign_in("dana", PASSWORD, Origin=deployment.origin, **{"X-Forwarded-For": DANA}).status == 429
    assert deployment.browser(DANA).sign_in("dana", PASSWORD, Origin=deployment.origin).status == 302


def assert_static_files_come_from_nginx(deployment, page: bytes) -> None:
    """The page's stylesheet is collectstatic's copy under its hashed name, served by nginx cached for a year."""
    stylesheet = re.search(rb'href="(/static/tollgate\.[0-9a-f]{12}\.css)"', page)[1].decode()
    hashed = deployment.browser(DANA).request("GET", stylesheet)
    assert hashed.status == 200 and hashed.headers["Content-Type"] == "text/css"
    assert hashed.headers["Cache-Control"] == "public, max-age=31536000, immutable"
    assert hashed.body == (deployment.static_root / stylesheet.removeprefix("/static/")).read_bytes()
    plain = deployment.browser(DANA).request("GET", "/static/tollgate.css")
    assert plain.status == 200 and "Cache-Control" not in plain.headers  # revalidated: its content may change
    assert "/static/" not in deployment.gunicorn_log.read_text()  # nginx answered, gunicorn never saw them


@committed
def test_a_pipeline_reaches_the_api_and_the_otlp_receiver_and_an_oversized_body_is_refused_as_the_api_would(
    deployment, org
):
    key = api_key_create(org=org, name="support agent").plaintext
    pipeline = deployment.browser(DANA)
    assert pipeline.request("GET", "/api/v1/whoami").status == 401
    whoami = pipeline.request("GET", "/api/v1/whoami", headers={"Authorization": f"Bearer {key}"})
    assert whoami.status == 200 and json.loads(whoami.body) == {
        "org": org.slug,
        "key_name": "support agent",
        "person": None,
    }

    # JavaScript's exporters send their body chunked: nginx reads it whole and hands gunicorn its length.
    body = OTLP_EXPORT.read_bytes()
    pieces = (body[i : i + 4096] for i in range(0, len(body), 4096))
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/x-protobuf"}
    exported = pipeline.request("POST", "/api/v1/otlp/v1/traces", body=pieces, headers=headers, chunked=True)
    assert exported.status == 200, exported.body[:500]
    assert Conversation.objects.get(org=org, external_id="support-1").message_count == 9

    # Refused by nginx before gunicorn reads a byte, in the API's words.
    limit = int(documented_settings(DEPLOY / "tollgate.env.example")["MAX_REQUEST_BYTES"])
    assert limit == settings.DATA_UPLOAD_MAX_MEMORY_SIZE  # the documented value is the default
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json", "Content-Length": str(limit + 1)}
    refused = pipeline.request("POST", "/api/v1/conversations", body=b"", headers=headers)
    assert refused.status == 413
    assert json.loads(refused.body) == {
        "detail": f"the request body is over MAX_REQUEST_BYTES ({limit} bytes)",
        "limit": "MAX_REQUEST_BYTES",
        "value": limit,
    }

"""Pipelines submit drafts over HTTP, read the verdict, and read the writer rules from the one source."""

import json
from datetime import datetime
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from grading.api.keys import api_key_create
from grading.models import Draft
from tests.builders.confidences import routed_under_a_certificate
from tests.builders.drafts import CLEAN_BODY, SOURCE, setup_org_memory
from tests.builders.queue_items import draft_item

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(client, org):
    key = api_key_create(org=org, name="writer").plaintext

    def call(method: str, path: str, body=None, **extra):
        kwargs = {"HTTP_AUTHORIZATION": f"Bearer {key}", **extra}
        if body is not None:
            kwargs.update(data=json.dumps(body), content_type="application/json")
        return getattr(client, method)(f"/api/v1{path}", **kwargs)

    return call


def submission(**overrides) -> dict:
    return {
        "external_id": "run-7/article-1",
        "title": "Cutting support costs with self-service",
        "slug": "cutting-support-costs",
        "body": CLEAN_BODY,
        "source_urls": [SOURCE],
        **overrides,
    }


def test_a_submitted_draft_is_accepted_and_pending_until_graded(api, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        response = api("post", "/drafts", submission())
    assert response.status_code == 202
    body = response.json()
    assert body["route"] == "pending"
    assert body["status_url"].endswith(f"/api/v1/drafts/{body['id']}")
    assert len(callbacks) == 1  # the grading task goes out after commit
    status = api("get", f"/drafts/{body['id']}").json()
    assert (status["route"], status["identity"], status["decision"]) == ("pending", None, None)
    assert (status["confidences"], status["confidence_source"], status["certificate"]) == (None, None, None)


def test_a_drafts_verdict_says_how_sure_the_judge_was_and_the_certificate_it_was_routed_under(api, org):
    review = draft_item(org, confidences={"pass_fail": 0.81, "aeo": 0.9}, confidence_source="logprobs")
    certificate = routed_under_a_certificate(review, agreement=0.85, confidence=0.9)

    status = api("get", f"/drafts/{review.draft_id}").json()

    assert (status["confidences"], status["confidence_source"]) == ({"pass_fail": 0.81, "aeo": 0.9}, "logprobs")
    assert datetime.fromisoformat(status["certificate"].pop("computed_at")) == certificate.computed_at
    assert status["certificate"] == {"id": certificate.pk, "agreement": 0.85, "confidence": 0.9}


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ({"slug": "Not A Slug"}, "slug"),
        ({"source_urls": ["not a url"]}, "source_urls.0"),
        ({"callback_url": "ftp://x"}, "callback_url"),
        ({"body": ""}, "body"),
        ({"title": "x" * 301}, "title"),
    ],
)
def test_an_invalid_draft_is_400_naming_the_field_and_nothing_is_saved(api, override, field):
    response = api("post", "/drafts", submission(**override))
    assert response.status_code == 400
    assert field in response.json()["detail"]
    assert Draft.objects.count() == 0


def test_another_orgs_draft_is_404(api, client, other_org):
    draft_id = api("post", "/drafts", submission()).json()["id"]
    outsider = api_key_create(org=other_org, name="other").plaintext
    assert client.get(f"/api/v1/drafts/{draft_id}", HTTP_AUTHORIZATION=f"Bearer {outsider}").status_code == 404
    assert api("get", "/drafts/999999").status_code == 404


def test_the_writer_rules_are_served_as_json_and_as_text(api):
    rules = api("get", "/criteria/draft/writer-rules").json()
    assert rules["criteria_version"] == 1
    assert "delve" in rules["rules"]["banned_words"]["terms"]
    text = api("get", "/criteria/draft/writer-rules?format=text")
    assert text["Content-Type"].startswith("text/plain")
    assert "delve" in text.content.decode()
    assert api("get", "/criteria/draft/writer-rules?format=xml").status_code == 400


@pytest.mark.parametrize(
    ("edit", "exit_code"),
    [
        (lambda body: body, 0),
        (lambda body: body.replace("Start with the questions", "Delve into the questions"), 1),
    ],
)
def test_the_gate_command_exits_by_route(org, tmp_path, edit, exit_code):
    setup_org_memory(org)
    path = Path(tmp_path) / "cutting-support-costs.mdx"
    path.write_text("# Cutting support costs with self-service\n\n" + edit(CLEAN_BODY))
    out = StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("gate", str(path), "--org", org.slug, "--source", SOURCE, "--json", stdout=out)
    assert exited.value.code == exit_code
    assert json.loads(out.getvalue())["route"] == ("pass" if exit_code == 0 else "fail")


def test_pipelines_add_memory_and_articles_over_the_api(api, org):
    fact = api("post", "/memory", {"kind": "fact", "text": "Acme cut tickets by 38%.", "proof_terms": ["Acme"]})
    assert fact.status_code == 201 and fact.json()["proof_terms"] == ["Acme"]
    first = api("post", "/memory", {"kind": "strategy", "text": "Write for support leaders."}).json()
    api("post", "/memory", {"kind": "strategy", "text": "Write for finance leaders."})
    assert org.memory.get(pk=first["id"]).active is False  # one active strategy
    assert api("post", "/memory", {"kind": "opinion", "text": "x"}).status_code == 400
    assert api("post", "/memory", {"kind": "learning", "text": "!!!"}).status_code == 400
    article = api("post", "/articles", {"slug": "ticket-triage", "title": "Ticket triage", "summary": "How."})
    assert article.status_code == 200 and article.json()["slug"] == "ticket-triage"
    assert api("post", "/articles", {"slug": "Bad Slug", "title": "x"}).status_code == 400

"""Verdicts out: reviews and operator decisions reach an OTLP logs receiver as `gen_ai.evaluation.result`
records, after commit, from the Celery task, with retries that never block grading and show on the dashboard."""

import json
import os
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured

from grading.api.keys import api_key_create
from grading.conversations.grader import conversation_grade
from grading.delivery.evaluations import EVENT_NAME, evaluation_export_status, evaluation_records
from grading.models import Conversation, Review
from grading.models.otlp import EvaluationExport
from grading.reviews.services import PersonVerdict
from reviewer.celery import app
from reviewer.env import env_headers, env_url
from reviewer.queue.services import claim_take, decision_create
from tests.builders.confidences import routed_under_a_certificate
from tests.builders.conversations import llm_judge, verdicts, verdicts_reply
from tests.builders.otlp_spans import TRACE, export_request, span_id, two_turns_with_a_tool
from tests.builders.processes import REPO_ROOT
from tests.builders.queue_items import draft_item
from tests.fakes.logs_collector import LogsCollector
from tests.fakes.openai_server import json_reply

pytestmark = pytest.mark.django_db


@pytest.fixture
def collector():
    with LogsCollector() as server:
        yield server


@pytest.fixture
def exporting(settings, collector):
    """Exports configured to the loopback collector; the task runs in this process when queued on commit."""
    settings.OTLP_EVALUATIONS_ENDPOINT = collector.url
    settings.OTLP_EVALUATIONS_HEADERS = {"authorization": "Bearer collector-key"}
    settings.OTLP_EVALUATIONS_RETRY_BASE_SECONDS = 0
    settings.CONVERSATION_QUIET_MINUTES = 0
    import grading.otlp.tasks  # noqa: F401 - registered, so the task sent by name runs eagerly here

    eager = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield collector
    app.conf.task_always_eager = eager


@pytest.fixture
def conversation(client, org) -> Conversation:
    key = api_key_create(org=org, name="collector").plaintext
    body = export_request(*two_turns_with_a_tool()).SerializeToString()
    response = client.post(
        "/api/v1/otlp/v1/traces", body, content_type="application/x-protobuf", HTTP_AUTHORIZATION=f"Bearer {key}"
    )
    assert response.status_code == 200
    return Conversation.objects.get(external_id="conv-otlp")


def grade(conversation, fake_llm, django_capture_on_commit_callbacks, **outcomes) -> Review:
    fake_llm.script(verdicts_reply(conversation.active_path_ids, **outcomes))
    with django_capture_on_commit_callbacks(execute=True):
        return conversation_grade(conversation_id=conversation.pk, judge=llm_judge(fake_llm))


def test_a_review_arrives_as_one_evaluation_record_per_check_linked_to_the_judged_span(
    exporting, conversation, fake_llm, django_capture_on_commit_callbacks
):
    review = grade(conversation, fake_llm, django_capture_on_commit_callbacks, complete="fail")

    headers, _ = exporting.requests[0]
    assert headers["authorization"] == "Bearer collector-key"
    assert headers["content-type"] == "application/x-protobuf"
    records = exporting.records()
    assert [attributes["gen_ai.evaluation.name"] for _, attributes, _ in records] == ["grounded", "complete", "usable"]
    resource, complete, record = records[1]
    assert resource["service.name"] == "tollgate"
    assert record.event_name == EVENT_NAME
    assert (record.trace_id.hex(), record.span_id.hex()) == (TRACE, span_id(4))  # the call whose answer ends the path
    assert complete["gen_ai.evaluation.score.label"] == "fail"
    assert complete["gen_ai.evaluation.score.value"] == 0.0
    assert complete["gen_ai.evaluation.explanation"] == "complete fail"
    assert complete["gen_ai.response.id"] == "chatcmpl-4"
    assert complete["tollgate.fingerprint"] == review.fingerprint == conversation.fingerprint
    assert complete["tollgate.criteria_version"] == review.criteria_version.number
    assert complete["tollgate.judge.model"] == "judge-test" and complete["tollgate.judge.backend"] == "openai"
    assert complete["tollgate.review.id"] == review.pk and complete["tollgate.source"] == "judge"
    assert records[0][1]["gen_ai.evaluation.score.value"] == 1.0
    export = EvaluationExport.objects.get()
    assert export.delivered and export.final and export.records == 3


def test_an_operator_decision_arrives_with_the_human_verdicts(
    exporting, conversation, fake_llm, django_capture_on_commit_callbacks, operator
):
    review = grade(conversation, fake_llm, django_capture_on_commit_callbacks, usable="unknown")
    assert review.route == "human"
    claim_take(user=operator, review_id=review.pk)
    with django_capture_on_commit_callbacks(execute=True):
        decision_create(
            user=operator,
            review_id=review.pk,
            fingerprint=review.fingerprint,
            verdict=PersonVerdict(
                checks={"grounded": "pass", "complete": "pass", "usable": "fail"}, note="The tracking link is missing."
            ),
        )
    human = [attributes for _, attributes, _ in exporting.records() if attributes["tollgate.source"] == "operator"]
    assert {a["gen_ai.evaluation.name"]: a["gen_ai.evaluation.score.label"] for a in human} == {
        "grounded": "pass", "complete": "pass", "usable": "fail"
    }  # fmt: skip
    assert {a["tollgate.decided_by"] for a in human} == {operator.username}
    assert {a["gen_ai.evaluation.explanation"] for a in human} == {"The tracking link is missing."}
    assert not any("tollgate.confidence" in a for a in human)  # the judge's sureness is not the operator's


def test_a_judges_record_carries_how_sure_it_was_and_the_certificate_the_review_was_routed_under(
    exporting, conversation, fake_llm, django_capture_on_commit_callbacks
):
    answers = verdicts(conversation.active_path_ids, complete="fail")
    fake_llm.script(json_reply(answers, verdict_logprobs={"complete": {"fail": 0.7, "pass": 0.2, "unknown": 0.1}}))
    with django_capture_on_commit_callbacks(execute=True):
        review = conversation_grade(conversation_id=conversation.pk, judge=llm_judge(fake_llm))

    exported = {attributes["gen_ai.evaluation.name"]: attributes for _, attributes, _ in exporting.records()}
    assert exported["complete"]["tollgate.confidence"] == pytest.approx(0.7)
    assert exported["grounded"]["tollgate.confidence"] == 1.0  # its answer token came back certain
    assert {a["tollgate.confidence.source"] for a in exported.values()} == {"logprobs"}
    assert not any("tollgate.certificate.id" in a for a in exported.values())  # routed by the fixed bands

    certificate = routed_under_a_certificate(review)
    records = evaluation_records(review, EvaluationExport.Event.REVIEW)
    assert {_attributes(record)["tollgate.certificate.id"].int_value for record in records} == {certificate.pk}


def test_a_drafts_overall_record_carries_the_judges_confidence_in_its_verdict(org):
    review = draft_item(org, confidences={"pass_fail": 0.85, "aeo": 0.9}, confidence_source="logprobs")

    records = {
        attributes["gen_ai.evaluation.name"].string_value: attributes
        for attributes in map(_attributes, evaluation_records(review, EvaluationExport.Event.REVIEW))
    }

    assert records["overall"]["tollgate.confidence"].double_value == pytest.approx(0.85)
    assert records["aeo"]["tollgate.confidence"].double_value == pytest.approx(0.9)
    assert records["aeo"]["tollgate.confidence.source"].string_value == "logprobs"
    assert "tollgate.confidence" not in records["writing"]  # the judge's sureness of it is not known


def _attributes(record) -> dict:
    return {kv.key: kv.value for kv in record.attributes}


def test_a_failing_endpoint_is_retried_then_given_up_without_touching_grading(
    exporting, settings, conversation, fake_llm, django_capture_on_commit_callbacks, client_for, operator
):
    settings.OTLP_EVALUATIONS_MAX_ATTEMPTS = 3
    exporting.statuses.extend([503, 503, 503])
    review = grade(conversation, fake_llm, django_capture_on_commit_callbacks)

    assert Review.objects.get(pk=review.pk).state == "current"  # the verdict stands whatever the export did
    tries = list(EvaluationExport.objects.order_by("attempt").values_list("attempt", "status_code", "final"))
    assert tries == [(1, 503, False), (2, 503, False), (3, 503, True)]
    status = evaluation_export_status(review.org_id)
    assert (status["delivered"], status["given_up"], status["failed_tries"]) == (0, 1, 3)
    assert "503" in status["last_error"]
    page = client_for(operator).get("/dashboard/").content.decode()
    assert "Evaluation export (OTLP)" in page and "<b>1</b> given up" in page


def test_a_refused_batch_is_not_retried(exporting, conversation, fake_llm, django_capture_on_commit_callbacks):
    exporting.statuses.append(400)
    grade(conversation, fake_llm, django_capture_on_commit_callbacks)
    assert list(EvaluationExport.objects.values_list("attempt", "status_code", "final")) == [(1, 400, True)]


def test_nothing_is_queued_when_no_endpoint_is_configured(
    settings, conversation, fake_llm, django_capture_on_commit_callbacks
):
    settings.OTLP_EVALUATIONS_ENDPOINT = ""
    fake_llm.script(verdicts_reply(conversation.active_path_ids))
    with django_capture_on_commit_callbacks() as callbacks:
        conversation_grade(conversation_id=conversation.pk, judge=llm_judge(fake_llm))
    assert callbacks == []


def _settings_value(*names: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """The settings `names` as a process started with `env` reads them: a JSON object of name to value on stdout.
    Several names are read by one start, since each start of Django here takes seconds."""
    values = f"{{name: getattr(settings, name) for name in {names!r}}}"
    code = f"import json; from django.conf import settings; print(json.dumps({values}))"
    return subprocess.run(
        [sys.executable, "manage.py", "shell", "--no-imports", "-c", code],
        cwd=REPO_ROOT,
        env={**{k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TOLLGATE_OTLP"))}, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
def test_the_standard_otlp_variables_configure_the_export():
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/", "OTEL_EXPORTER_OTLP_HEADERS": "api-key=s%20ecret"}
    read = _settings_value("OTLP_EVALUATIONS_ENDPOINT", "OTLP_EVALUATIONS_HEADERS", env=env)
    assert json.loads(read.stdout)["OTLP_EVALUATIONS_ENDPOINT"] == "http://collector:4318/v1/logs", read.stderr[-2000:]
    assert json.loads(read.stdout)["OTLP_EVALUATIONS_HEADERS"] == {"api-key": "s ecret"}
    own = env | {"TOLLGATE_OTLP_EVALUATIONS_ENDPOINT": "https://evals.example/ingest"}
    own_read = _settings_value("OTLP_EVALUATIONS_ENDPOINT", env=own)
    assert json.loads(own_read.stdout)["OTLP_EVALUATIONS_ENDPOINT"] == "https://evals.example/ingest"


def test_a_junk_endpoint_stops_start_up_naming_the_variable():
    result = _settings_value("OTLP_EVALUATIONS_ENDPOINT", env={"TOLLGATE_OTLP_EVALUATIONS_ENDPOINT": "collector:4318"})
    assert result.returncode != 0 and "TOLLGATE_OTLP_EVALUATIONS_ENDPOINT" in result.stderr


@pytest.mark.parametrize("value", ["authorization", "=x", "a=b,c", "bad key=1", "a=line%0Abreak"])
def test_junk_headers_are_refused_naming_the_variable(monkeypatch, value):
    monkeypatch.setenv("TG_TEST_HEADERS", value)
    with pytest.raises(ImproperlyConfigured, match="TG_TEST_HEADERS"):
        env_headers("TG_TEST_HEADERS")


def test_headers_and_urls_parse_the_opentelemetry_way(monkeypatch):
    monkeypatch.setenv("TG_TEST_HEADERS", "Authorization=Bearer%20tg_x, x-team = ops ")
    assert env_headers("TG_TEST_HEADERS") == {"Authorization": "Bearer tg_x", "x-team": "ops"}
    monkeypatch.setenv("TG_TEST_URL", "ftp://x")
    with pytest.raises(ImproperlyConfigured, match="TG_TEST_URL"):
        env_url("TG_TEST_URL")

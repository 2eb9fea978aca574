"""Human labels from outside the queue: the file import reports bad rows by line and imports the rest, importing
again changes nothing, the API is all or nothing, and a label speaks only about the evidence it was given for."""

import json
from datetime import date
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import OperationalError, connection

from grading.api.keys import api_key_create
from grading.conversations.grader import conversation_grade
from grading.conversations.ingest import conversation_append
from grading.dashboard.figures import dashboard_figures, scope_for
from grading.dashboard.labels import LABELS_PER_TRANSACTION
from grading.models import Label
from grading.reviews.rollups import live_counters, stored_counters
from tests.builders.conversations import llm_judge, upsert, verdicts_reply
from tests.builders.drafts import save_draft
from tests.builders.world import _messages, conversation_payload

pytestmark = pytest.mark.django_db

CSV = """item,check,verdict,labeller,time
c1,grounded,fail,ann,2026-11-20T09:00:00Z
c1,complete,pass,ann,2026-11-20T09:00:00Z
nobody,grounded,pass,ann,2026-11-20T09:00:00Z
c1,tone,pass,ann,2026-11-20T09:00:00Z
c1,usable,maybe,ann,2026-11-20T09:00:00Z
d1,pass/fail,pass,bo,2026-11-21T10:00:00+01:00
d1,grounded,pass,bo,
c1,usable,pass,,2026-11-20T09:00:00Z
"""


@pytest.fixture
def items(org, fake_llm):
    conversation = upsert(org, conversation_payload("c1", "billing", date(2026, 11, 18)))
    fake_llm.script(verdicts_reply(["m1", "m2"]))
    review = conversation_grade(conversation_id=conversation.conversation.pk, judge=llm_judge(fake_llm))
    save_draft(org, external_id="d1")
    return review


def _import(org, tmp_path, text: str, name: str = "labels.csv"):
    path = tmp_path / name
    path.write_text(text)
    out, err = StringIO(), StringIO()
    try:
        call_command("import_labels", str(path), "--org", org.slug, stdout=out, stderr=err)
        failed = False
    except CommandError:
        failed = True
    return out.getvalue(), err.getvalue(), failed


def test_a_bad_row_is_reported_by_its_line_and_the_rest_import(org, items, tmp_path):
    out, err, failed = _import(org, tmp_path, CSV)
    assert failed
    assert "3 created, 0 updated, 0 unchanged, 5 bad rows" in out
    lines = err.splitlines()
    assert lines[0].startswith("line 4: item: no conversation or draft 'nobody'")
    assert lines[1].startswith("line 5: check: ")
    assert lines[2].startswith("line 6: verdict: ")
    assert lines[3] == "line 8: check: a draft is labelled pass_fail only"
    assert lines[4].startswith("line 9: labeller: ")
    stored = {(lb.check_name, lb.verdict, lb.labeller) for lb in Label.objects.all()}
    assert stored == {("grounded", "fail", "ann"), ("complete", "pass", "ann"), ("pass_fail", "pass", "bo")}
    label = Label.objects.get(check_name="grounded")
    assert (label.fingerprint, label.source) == (items.fingerprint, "file:labels.csv")


def test_importing_the_same_file_again_changes_nothing(org, items, tmp_path):
    _import(org, tmp_path, CSV)
    before = list(Label.objects.order_by("pk").values()), stored_counters(org_ids=[org.pk])
    out, _, _ = _import(org, tmp_path, CSV)
    assert "0 created, 0 updated, 3 unchanged, 5 bad rows" in out
    assert (list(Label.objects.order_by("pk").values()), stored_counters(org_ids=[org.pk])) == before


def test_jsonl_labels_import_and_a_line_that_is_not_json_is_named(org, items, tmp_path):
    rows = [
        json.dumps({"item": "c1", "check": "grounded", "verdict": "pass", "labeller": "cy"}),
        "{not json",
        json.dumps(["a", "list"]),
        json.dumps({"item": "d1", "kind": "draft", "check": "pass_fail", "verdict": "fail", "labeller": "cy"}),
    ]
    out, err, failed = _import(org, tmp_path, "\n".join(rows) + "\n", name="labels.jsonl")
    assert failed and "2 created" in out
    assert err.splitlines()[0].startswith("line 2: row: not JSON")
    assert err.splitlines()[1] == "line 3: row: each line must be a JSON object"


def test_labels_count_as_human_verdicts_for_agreement_and_only_for_the_evidence_they_saw(org, items, fake_llm, client):
    key = api_key_create(org=org, name="qa").plaintext
    body = {"labels": [{"item": "c1", "check": "grounded", "verdict": "fail", "labeller": "ann"}]}
    response = client.post("/api/v1/labels", body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {key}")
    assert response.status_code == 201 and response.json() == {"created": 1, "updated": 0, "unchanged": 0}
    scope = scope_for(org, since="2026-W46", until="2026-W49")
    grounded = dashboard_figures(scope)["agreement"]["conversation"]["samples"]["label"]["checks"]["grounded"]
    assert (grounded["n"], grounded["confusion"][0][1]) == (1, 1)  # the machine's pass, the label's fail
    # The conversation goes on: its new evidence gets its own review, which the old label says nothing about.
    more = [
        {"id": "m3", "parent_id": "m2", "role": "user", "content": "Thanks", "created_at": "2026-11-18T10:05:00Z"},
        {"id": "m4", "parent_id": "m3", "role": "assistant", "content": "Bye.", "created_at": "2026-11-18T10:06:00Z"},
    ]
    conversation_append(org=org, external_id="c1", payload=_messages(more))
    fake_llm.script(verdicts_reply(["m1", "m2", "m3", "m4"]))
    conversation_grade(conversation_id=items.conversation_id, judge=llm_judge(fake_llm))
    grounded = dashboard_figures(scope)["agreement"]["conversation"]["samples"]["label"]["checks"]["grounded"]
    assert grounded["n"] == 0
    assert stored_counters(org_ids=[org.pk]) == live_counters(org_ids=[org.pk])


def test_the_api_writes_no_label_when_one_is_bad_and_names_it(org, other_org, items, client):
    key = api_key_create(org=org, name="qa").plaintext
    upsert(other_org, conversation_payload("theirs", "billing", date(2026, 11, 18)))
    auth = {"HTTP_AUTHORIZATION": f"Bearer {key}", "content_type": "application/json"}
    good = {"item": "c1", "check": "grounded", "verdict": "fail", "labeller": "ann"}
    response = client.post("/api/v1/labels", {"labels": [good, {**good, "item": "theirs"}]}, **auth)
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "labels.1.item"
    response = client.post("/api/v1/labels", {"labels": [good, {**good, "verdict": "yes"}]}, **auth)
    assert response.status_code == 400 and response.json()["errors"][0]["field"] == "labels.1.verdict"
    response = client.post("/api/v1/labels", {"labels": [{**good, "time": "2026-11-20T09:00:00"}]}, **auth)
    assert response.status_code == 400 and "time zone" in response.json()["detail"]
    assert not Label.objects.exists()


def test_more_labels_than_the_limit_are_refused_naming_it(org, items, client, settings):
    settings.MAX_LABELS_PER_REQUEST = 3
    key = api_key_create(org=org, name="qa").plaintext
    good = {"item": "c1", "check": "grounded", "verdict": "fail", "labeller": "ann"}
    body = {"labels": [good] * 4}
    response = client.post("/api/v1/labels", body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {key}")
    assert response.status_code == 413
    assert (response.json()["limit"], response.json()["value"]) == ("MAX_LABELS_PER_REQUEST", 3)
    assert "at most 3 labels per request" in response.json()["detail"]
    # Counted before any label is read: validating ten times the limit only to refuse it took seconds.
    body = {"labels": [good] * 3 + [{"item": "c1"}]}
    response = client.post("/api/v1/labels", body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {key}")
    assert response.status_code == 413
    assert not Label.objects.exists()


def test_it_commits_a_long_request_in_bounded_transactions_and_a_retry_records_only_the_rest(org, items, client):
    """A request is written LABELS_PER_TRANSACTION labels at a time, each batch in its own transaction, so no item's
    lock is held for the whole request. A worker killed part way (here: its second batch's INSERT fails) keeps the
    batches it committed, and the sender's retry of the same request records the rest and changes nothing else."""
    key = api_key_create(org=org, name="qa").plaintext
    labels = [
        {"item": "c1", "check": "grounded", "verdict": "fail", "labeller": f"ann{n}"}
        for n in range(LABELS_PER_TRANSACTION + 5)
    ]
    inserts = []

    def killed_in_the_second_batch(execute, sql, params, many, context):
        if sql.startswith('INSERT INTO "grading_label"'):
            inserts.append(sql)
            if len(inserts) == 2:
                raise OperationalError("the worker was killed")
        return execute(sql, params, many, context)

    def post():
        return client.post(
            "/api/v1/labels", {"labels": labels}, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {key}"
        )

    with connection.execute_wrapper(killed_in_the_second_batch), pytest.raises(OperationalError):
        post()
    assert Label.objects.count() == LABELS_PER_TRANSACTION
    assert stored_counters(org_ids=[org.pk]) == live_counters(org_ids=[org.pk])
    response = post()
    assert response.json() == {"created": 5, "updated": 0, "unchanged": LABELS_PER_TRANSACTION}
    assert Label.objects.count() == LABELS_PER_TRANSACTION + 5
    assert stored_counters(org_ids=[org.pk]) == live_counters(org_ids=[org.pk])
    assert post().json() == {"created": 0, "updated": 0, "unchanged": LABELS_PER_TRANSACTION + 5}


def test_a_label_sent_twice_in_one_request_is_recorded_as_its_last_verdict(org, items, client):
    key = api_key_create(org=org, name="qa").plaintext
    good = {"item": "c1", "check": "grounded", "verdict": "fail", "labeller": "ann"}
    body = {"labels": [good, {**good, "verdict": "pass"}, {**good, "check": "usable"}]}
    response = client.post("/api/v1/labels", body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {key}")
    assert response.json() == {"created": 2, "updated": 1, "unchanged": 0}
    assert Label.objects.get(check_name="grounded").verdict == "pass"
    assert stored_counters(org_ids=[org.pk]) == live_counters(org_ids=[org.pk])

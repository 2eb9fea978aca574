"""A corrected draft as the pipeline learns of it: the signed webhook and the draft's status carry the corrected body,
its fingerprint and the diff, who corrected it and how the gate settled it."""

import hashlib
import hmac
import json

import pytest
from django.utils import timezone

from grading.delivery.enqueue import HUMAN_DECISION, MACHINE_VERDICT
from grading.drafts.corrections import correction_submit, draft_locked
from grading.drafts.gate import draft_grade
from grading.erasure.runs import erasure_request, erasure_run
from grading.models import AuditEvent, Correction, Decision, Draft
from grading.reviews.draft_reads import draft_status
from grading.tasks import deliver_webhook
from tests.builders.api_calls import api_caller
from tests.builders.corrected_drafts import FATAL_BODY, FIXED_BODY, waiting_with_finding
from tests.builders.database import foreign_keys_checked_now
from tests.builders.drafts import draft_reply, llm_draft_judge, save_draft

pytestmark = pytest.mark.django_db


@pytest.fixture
def allow_loopback(settings):
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.1/32"]


def corrected(review, operator, body: str, fake_llm, *, overall: int = 6):
    """`operator` approves the draft of `review` as corrected to `body`; the gate grades the revision."""
    draft = draft_locked(review.draft_id)
    correction_submit(review=review, draft=draft, author=operator, corrected=body, now=timezone.now())
    fake_llm.script(draft_reply(overall))
    return draft_grade(draft_id=draft.pk, judge=llm_draft_judge(fake_llm))


def test_the_pipeline_receives_the_corrected_body_and_its_diff_signed(org, operator, receiver, allow_loopback,
                                                                      fake_llm):  # fmt: skip
    hook = receiver([200])
    review = waiting_with_finding(org, callback_url=hook.url)
    regraded = corrected(review, operator, FIXED_BODY, fake_llm)
    assert deliver_webhook.apply(args=(regraded.pk, HUMAN_DECISION)).get() is True
    [(headers, body)] = hook.received
    signed = hmac.new(org.webhook_secret.encode(), headers["x-tollgate-timestamp"].encode() + b"." + body,
                      hashlib.sha256)  # fmt: skip
    assert headers["x-tollgate-signature"] == "sha256=" + signed.hexdigest()
    payload = json.loads(body)
    assert payload["event"] == "human_decision"
    draft = payload["draft"]
    assert draft["decision"]["outcome"] == "approve" and draft["decision"]["by"] == operator.username
    correction = draft["correction"]
    assert correction["state"] == "approved" and correction["body"] == FIXED_BODY
    assert correction["by"] == operator.username
    assert (correction["original_fingerprint"], correction["corrected_fingerprint"]) == (
        review.fingerprint, regraded.fingerprint)  # fmt: skip
    assert draft["identity"]["fingerprint"] == regraded.fingerprint
    assert "+and [how we measure deflection](/writing/measuring-deflection)." in correction["diff"].splitlines()
    assert (correction["corrected_review"], correction["regrade_review"]) == (review.pk, regraded.pk)


def test_a_refused_correction_is_told_with_the_machine_verdict_and_no_decision(org, operator, receiver,
                                                                               allow_loopback, fake_llm):  # fmt: skip
    hook = receiver([200])
    review = waiting_with_finding(org, callback_url=hook.url)
    regraded = corrected(review, operator, FATAL_BODY, fake_llm, overall=9)
    assert deliver_webhook.apply(args=(regraded.pk, MACHINE_VERDICT)).get() is True
    draft = json.loads(hook.received[0][1])["draft"]
    assert (draft["route"], draft["reason"], draft["decision"]) == ("human", "corrected", None)
    assert draft["correction"]["state"] == "refused" and draft["correction"]["body"] == FATAL_BODY
    assert [finding["code"] for finding in draft["findings"]] == ["h2_not_question"]


def test_the_draft_api_shows_the_correction_while_the_gate_grades_it(client, org, operator):
    review = waiting_with_finding(org)
    draft = draft_locked(review.draft_id)
    correction_submit(review=review, draft=draft, author=operator, corrected=FIXED_BODY, now=timezone.now())
    status = api_caller(client, org)("get", f"/drafts/{review.draft_id}").json()
    assert status["route"] == "pending"
    assert status["correction"]["state"] == "grading" and status["correction"]["body"] == FIXED_BODY


def test_a_resubmission_after_a_correction_makes_the_content_the_pipelines_again(org, operator, fake_llm):
    review = waiting_with_finding(org)
    corrected(review, operator, FIXED_BODY, fake_llm)
    assert Decision.objects.filter(outcome="approve").exists()
    draft = save_draft(org, FIXED_BODY + "\nOne more line from the pipeline.\n")
    assert draft_status(draft)["correction"] is None
    assert Correction.objects.get().state == Correction.State.APPROVED  # the record of what happened stays


def test_a_resubmission_while_the_gate_grades_a_correction_overtakes_it_and_nothing_waits_for_it(org, operator):
    review = waiting_with_finding(org)
    draft = draft_locked(review.draft_id)
    correction_submit(review=review, draft=draft, author=operator, corrected=FIXED_BODY, now=timezone.now())
    draft = save_draft(org, FIXED_BODY + "\nThe pipeline's own next revision.\n")
    correction = Correction.objects.get()
    assert (correction.state, correction.regrade) == (Correction.State.OVERTAKEN, None)
    assert correction.settled_at is not None and draft_status(draft)["correction"] is None
    assert AuditEvent.objects.filter(action="correction.overtaken").count() == 1


def test_erasing_a_corrected_draft_takes_its_corrections_and_both_revisions_with_it(org, operator, fake_llm):
    review = waiting_with_finding(org)
    corrected(review, operator, FIXED_BODY, fake_llm)
    erasure = erasure_request(org=org, scope="draft", target=review.draft.external_id)
    erasure_run(erasure_id=erasure.pk)
    foreign_keys_checked_now()
    assert not Correction.objects.exists() and not Draft.objects.filter(pk=review.draft_id).exists()

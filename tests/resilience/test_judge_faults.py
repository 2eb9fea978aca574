"""A judge that misbehaves, served by the loopback server and met by the production client: each fault is retried
within the budget and no further, then the item is routed to `error` with the reason, never given a made-up
score, and counted on the dashboard; a fault that clears within the budget still ends in a real verdict."""

import json
import re

import pytest

from grading.api.keys import api_key_create
from grading.conversations.grader import conversation_grade
from grading.drafts.gate import draft_grade
from grading.judge.backends import OpenAIDraftJudge
from grading.judge.client import ChatJudgeClient
from grading.models import Draft, Review
from grading.passes.planner import drafts_needing_grading
from tests.builders.conversations import PATH_IDS, llm_judge, support_conversation, upsert, verdicts_reply
from tests.builders.drafts import CLEAN_BODY, SOURCE, draft_reply, draft_verdict, save_draft, setup_org_memory
from tests.builders.processes import wait_until
from tests.fakes.openai_server import (
    cut_off_reply,
    error_reply,
    hang_reply,
    json_reply,
    malformed_reply,
    refusal_reply,
)

RETRIES = 2  # the budget: transient faults get this many more tries, malformed output one more
TIMEOUT = 0.3

FAULTS = {
    # name: (the reply the judge keeps giving, requests the budget allows, the error kind, what the detail names)
    "429 with Retry-After": (error_reply(429, retry_after=1.5), RETRIES + 1, "JudgeUnavailable", "HTTP 429"),
    "500": (error_reply(500), RETRIES + 1, "JudgeUnavailable", "HTTP 500"),
    "timeout": (hang_reply(TIMEOUT * 5), RETRIES + 1, "JudgeUnavailable", "Timeout"),
    "malformed JSON": (malformed_reply(), 2, "JudgeMalformed", "invalid JSON"),
    "JSON that breaks the schema": (json_reply(draft_verdict(8) | {"aeo": 9}), 2, "JudgeMalformed", "aeo"),
    "a refusal": (refusal_reply("I can't assess this article."), 2, "JudgeMalformed", "refused"),
    "cut off by its token limit": (cut_off_reply(draft_reply(8)), 2, "JudgeMalformed", "token limit"),
}


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def judge(fake_llm, sleeps) -> OpenAIDraftJudge:
    """The production draft judge with a short timeout; its waits between tries are recorded, not slept."""
    client = ChatJudgeClient(
        base_url=fake_llm.base_url,
        model="judge-test",
        api_key="k",
        timeout=TIMEOUT,
        max_retries=RETRIES,
        want_logprobs=True,
        sleep=sleeps.append,
    )
    return OpenAIDraftJudge(client)


@pytest.mark.django_db
@pytest.mark.parametrize("fault", FAULTS)
def test_a_judge_fault_is_retried_within_the_budget_then_routes_the_draft_to_error_with_no_score(
    client, fake_llm, judge, sleeps, org, fault
):
    reply, requests, kind, named = FAULTS[fault]
    setup_org_memory(org)
    draft = save_draft(org)
    fake_llm.set_default(reply)

    review = draft_grade(draft_id=draft.pk, judge=judge)

    assert len(fake_llm.chat_requests()) == requests
    assert (review.route, review.reason) == ("error", kind)
    assert named in review.detail
    assert (review.score, review.judge_score, review.sub_scores, review.judge_issues) == (None, None, {}, [])
    if fault == "429 with Retry-After":
        assert sleeps == [1.5] * RETRIES  # waited as long as the server asked, each time
    auth = {"HTTP_AUTHORIZATION": f"Bearer {api_key_create(org=org, name='pipeline').plaintext}"}
    status = client.get(f"/api/v1/drafts/{draft.pk}", **auth).json()
    assert (status["route"], status["reason"], status["score"], status["sub_scores"]) == ("error", kind, None, None)
    assert drafts_needing_grading().filter(pk=draft.pk).exists()  # the next pass tries again


@pytest.mark.django_db
@pytest.mark.parametrize("fault", ["429 with Retry-After", "500", "timeout", "malformed JSON", "a refusal"])
def test_a_fault_that_clears_within_the_budget_ends_in_the_real_verdict(fake_llm, judge, org, fault):
    setup_org_memory(org)
    draft = save_draft(org)
    fake_llm.script(FAULTS[fault][0])
    fake_llm.set_default(draft_reply(8))
    review = draft_grade(draft_id=draft.pk, judge=judge)
    assert (review.route, review.score) == ("pass", 8)
    assert len(fake_llm.chat_requests()) == 2


@pytest.mark.django_db
@pytest.mark.parametrize("fault", ["429 with Retry-After", "cut off by its token limit"])
def test_a_conversation_the_judge_fails_is_routed_to_error_with_no_verdicts(fake_llm, org, fault):
    conversation = upsert(org, support_conversation()).conversation
    reply, _, kind, _ = FAULTS[fault]
    if fault == "cut off by its token limit":
        reply = cut_off_reply(verdicts_reply(PATH_IDS))
    fake_llm.set_default(reply)
    review = conversation_grade(conversation_id=conversation.pk, judge=llm_judge(fake_llm))
    assert (review.route, review.reason, review.checks) == ("error", kind, {})


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_drafts_the_judge_failed_in_the_worker_are_counted_on_the_dashboard_by_reason(
    client, client_for, celery_worker, fake_llm, org, stakeholder
):
    """Through the API and the worker's own judge client (JUDGE_MAX_RETRIES 3): two drafts meet a rate limit that
    never lifts, one a judge that always refuses."""
    setup_org_memory(org)
    auth = {"HTTP_AUTHORIZATION": f"Bearer {api_key_create(org=org, name='pipeline').plaintext}"}
    fake_llm.set_default(error_reply(429, retry_after=0.1))
    ids = []
    for n, reply in enumerate([None, None, refusal_reply()]):
        if reply is not None:
            wait_until(lambda: Review.objects.filter(draft__in=ids).count() == len(ids), timeout=60)
            fake_llm.set_default(reply)
        submission = {"external_id": f"run-1/{n}", "title": "Costs", "slug": f"costs-{n}", "body": CLEAN_BODY,
                      "source_urls": [SOURCE]}  # fmt: skip
        accepted = client.post("/api/v1/drafts", json.dumps(submission), content_type="application/json", **auth)
        ids.append(accepted.json()["id"])
    wait_until(lambda: Review.objects.filter(draft__in=ids).count() == 3, timeout=60, message="three reviews")
    assert set(Review.objects.filter(draft__in=ids).values_list("route", flat=True)) == {"error"}
    assert not Draft.objects.filter(pk__in=ids, reviews__score__isnull=False).exists()

    page = client_for(stakeholder).get("/dashboard/").content.decode()
    listed = page[page.index('id="judge-errors"') :].split("</ul>")[0]
    assert re.search(r"<code>JudgeUnavailable</code>: <a [^>]*>2</a>", listed)
    assert re.search(r"<code>JudgeMalformed</code>: <a [^>]*>1</a>", listed)

"""Grading under the evidence contract, against the loopback OpenAI-compatible judge."""

import json
import re
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from django.db import connection, connections
from django.utils import timezone

from grading.conversations.grader import conversation_grade
from grading.conversations.ingest import conversation_append
from grading.core.schemas import MessagesIn
from grading.models import GradingRun, ItemKind, Review
from grading.passes.planner import grading_pass
from grading.reviews.conversation_reads import conversation_state
from grading.reviews.reads import current_review, staleness_audit
from grading.reviews.versions import criteria_active, criteria_new_version, criteria_publish
from tests.builders.conversations import (
    PATH_IDS,
    T0,
    llm_judge,
    message,
    support_conversation,
    upsert,
    verdicts_reply,
)
from tests.fakes.openai_server import malformed_reply, tokenize

pytestmark = pytest.mark.django_db


def grade(conversation, fake_llm, **kwargs) -> Review:
    return conversation_grade(conversation_id=conversation.pk, judge=llm_judge(fake_llm), **kwargs)


def test_the_statements_a_grader_repeats_are_prepared_by_the_server(org, fake_llm, settings):
    """Parsing and planning them for every review was half of PostgreSQL's CPU per review (see settings)."""
    fake_llm.set_default(verdicts_reply(PATH_IDS))
    for n in range(settings.DATABASE_PREPARE_THRESHOLD + 1):
        grade(upsert(org, support_conversation(f"cv-{n}")).conversation, fake_llm)
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        prepared = [row[0] for row in cursor.fetchall()]
    assert any("INSERT INTO grading_review" in statement for statement in prepared)
    assert any("INSERT INTO grading_rollup" in statement for statement in prepared)


def test_a_graded_conversation_names_its_evidence(org, fake_llm):
    conversation = upsert(org, support_conversation()).conversation
    fake_llm.script(verdicts_reply(PATH_IDS))
    review = grade(conversation, fake_llm)
    assert review.route == "pass"
    assert review.fingerprint == conversation.fingerprint
    assert review.criteria_version == criteria_active(org=org, kind=ItemKind.CONVERSATION)
    assert review.judge["backend"] == "openai" and review.judge["model"] == "judge-test"
    assert review.judge["prompt_hash"]
    assert review.stages == 1
    assert review.usage == {"prompt_tokens": 100, "completion_tokens": 20, "cached_tokens": 0, "total_tokens": 120}
    assert current_review(conversation) == review


def test_regression_stale_scores_a_grown_conversation_is_graded_again(org, fake_llm):
    """A conversation scored once must not keep its score while it grows."""
    conversation = upsert(org, support_conversation(closed=False)).conversation
    conversation.last_activity_at = timezone.now() - timedelta(hours=2)
    conversation.save()
    fake_llm.script(verdicts_reply(PATH_IDS))
    first = grade(conversation, fake_llm)
    assert grading_pass().enqueued_ids == []

    follow_up = MessagesIn.model_validate({"messages": [message("m5", "user", "Also refund 1183?", "m4", 10)]})
    write = conversation_append(org=org, external_id="cv-1", payload=follow_up)
    assert write.conversation.fingerprint != first.fingerprint
    assert current_review(write.conversation) is None  # the old score stopped counting at once
    assert staleness_audit(org).stale["conversation"] == 1

    write.conversation.last_activity_at = timezone.now() - timedelta(hours=2)
    write.conversation.save()
    assert grading_pass().enqueued_ids == [conversation.pk]
    fake_llm.script(verdicts_reply([*PATH_IDS, "m5"], complete="fail"))
    second = grade(write.conversation, fake_llm)
    first.refresh_from_db()
    assert (first.state, second.state) == ("superseded", "current")
    assert second.route == "fail"
    assert staleness_audit(org).stale["conversation"] == 0


def test_regression_the_judge_reads_the_whole_active_path_and_nothing_else(org, fake_llm):
    """Not the first user message plus the agent's text cut short: every path message, tool traffic
    included, abandoned branches excluded, inside the nonce delimiter, with no tools offered."""
    long_result = "row " * 5000 + "END-OF-TOOL-RESULT"
    payload = support_conversation()
    payload["messages"][2]["content"] = long_result
    conversation = upsert(org, payload).conversation
    fake_llm.script(verdicts_reply(PATH_IDS))
    grade(conversation, fake_llm)

    [request] = fake_llm.chat_requests()
    body = request.body
    assert not {"tools", "functions", "tool_choice", "function_call"} & set(body)
    user_text = body["messages"][-1]["content"]
    nonce = re.search(r"<<<EVIDENCE ([0-9a-f]+)>>>", user_text).group(1)
    evidence = user_text.split(f"<<<EVIDENCE {nonce}>>>")[1].split(f"<<<END EVIDENCE {nonce}>>>")[0]
    for message_id in PATH_IDS:
        assert f'id="{message_id}"' in evidence
    assert 'id="m4b"' not in user_text and "I could not do that." not in user_text
    assert "END-OF-TOOL-RESULT" in evidence and long_result in evidence
    assert "refund" in evidence and "call_1" in evidence
    assert "instructions" in body["messages"][0]["content"].lower()


def chapters(count: int, words: int = 80, filler: str = "words ") -> dict:
    payload = support_conversation()
    payload["messages"] = [message("u0", "user", "Summarise each chapter.", None, 0)]
    for i in range(1, count + 1):
        payload["messages"].append(
            message(f"a{i}", "assistant", f"Chapter {i}: " + filler * words, payload["messages"][-1]["id"], i)
        )
    payload["active_message_id"] = f"a{count}"
    return payload


def prompt_tokens(request) -> int:
    return sum(len(tokenize(m["content"])) for m in request.body["messages"])


def test_a_conversation_over_the_context_the_server_reports_is_judged_in_stages_that_fit_it(org, fake_llm):
    # llama.cpp's /props says so; a longer prompt would be refused. Room for the version's checks and a chapter or two.
    fake_llm.context_tokens = 3_000
    conversation = upsert(org, chapters(12)).conversation
    fake_llm.set_default(verdicts_reply(["u0"] + [f"a{i}" for i in range(1, 13)]))
    review = grade(conversation, fake_llm)
    requests = fake_llm.chat_requests()
    assert review.route == "pass"
    assert review.stages == len(requests) > 1
    assert all(prompt_tokens(r) <= 3_000 for r in requests)  # none was refused
    seen = set()
    for request in requests:
        user_text = request.body["messages"][-1]["content"]
        assert 'id="u0"' in user_text  # every stage repeats the user's request
        seen |= set(re.findall(r'id="(a\d+)"', user_text))
    assert seen == {f"a{i}" for i in range(1, 13)}


def test_a_context_length_refusal_stages_again_smaller_instead_of_recording_an_error(org, fake_llm):
    """Punctuation costs a token a character, three times what the estimate assumes: the server refuses the
    first staging, and its own figures make the next one fit."""
    fake_llm.context_tokens = 5_000
    # Each chapter about 400 real tokens: one fits a stage with room to spare once the estimate has learned (which
    # scales the criteria and their checks by the punctuation's factor too).
    conversation = upsert(org, chapters(12, words=200, filler="!? ")).conversation
    fake_llm.set_default(verdicts_reply(["u0"] + [f"a{i}" for i in range(1, 13)]))
    review = grade(conversation, fake_llm)
    assert (review.route, review.reason) == ("pass", "")
    answered = [r for r in fake_llm.chat_requests() if prompt_tokens(r) <= 5_000]
    assert review.stages == len(answered) > 1
    assert len(fake_llm.chat_requests()) > len(answered)  # at least one request was refused on the way
    seen = set()
    for request in answered:
        seen |= set(re.findall(r'id="(a\d+)"', request.body["messages"][-1]["content"]))
    assert seen == {f"a{i}" for i in range(1, 13)}


def test_a_message_longer_than_the_judges_whole_context_is_not_scorable_with_that_reason(org, fake_llm):
    fake_llm.context_tokens = 2_500
    conversation = upsert(org, chapters(2, words=3_000)).conversation
    review = grade(conversation, fake_llm)
    assert (review.route, review.reason) == ("not_scorable", "too_long_for_judge")
    assert "'a1'" in review.detail
    assert fake_llm.chat_requests() == []  # nothing was sent that the server would refuse


def test_ten_thousand_short_messages_make_about_size_over_budget_stages(org, fake_llm):
    """Issue 11: repeating every earlier request made 10,000 short messages into 7,762 stages."""
    from grading.core.evidence import EvidenceMessage
    from grading.core.evidence_text import stages
    from tests.builders.evidence import rendered_size

    path, parent = [], None
    for n in range(10_000):
        role = "user" if n % 2 == 0 else "assistant"
        path.append(EvidenceMessage(f"m{n}", parent, role, f"turn {n}: a short line of chat"))
        parent = f"m{n}"
    budget = 12_000
    result = stages(path, budget=budget)
    assert len(result) <= rendered_size(path) / (budget * 0.75) + 2
    assert [m for stage in result for m in stage.messages] == path


def test_a_verdict_citing_messages_off_the_path_is_unknown_and_goes_to_humans(org, fake_llm):
    conversation = upsert(org, support_conversation()).conversation
    fake_llm.script(verdicts_reply(["m4b"]))  # the abandoned branch
    review = grade(conversation, fake_llm)
    assert review.route == "human"
    assert {check["verdict"] for check in review.checks.values()} == {"unknown"}
    assert "not on the path" in review.checks["grounded"]["rationale"]


def test_a_judge_that_keeps_answering_garbage_routes_to_error_and_the_next_pass_retries(org, fake_llm):
    conversation = upsert(org, support_conversation()).conversation
    fake_llm.script(malformed_reply(), malformed_reply())
    review = grade(conversation, fake_llm)
    assert review.route == "error" and review.reason == "JudgeMalformed"
    assert review.checks == {}
    assert grading_pass().enqueued_ids == [conversation.pk]
    fake_llm.script(verdicts_reply(PATH_IDS))
    retried = grade(conversation, fake_llm)
    assert retried.route == "pass" and retried.state == "current"


def test_the_same_grading_delivered_twice_yields_one_review(org, fake_llm):
    conversation = upsert(org, support_conversation()).conversation
    fake_llm.set_default(verdicts_reply(PATH_IDS))
    first = grade(conversation, fake_llm)
    second = grade(conversation, fake_llm)
    assert first == second
    assert Review.objects.filter(conversation=conversation).count() == 1
    assert len(fake_llm.chat_requests()) == 1  # no second paid judge call either


def test_publishing_new_criteria_makes_every_current_review_stale_and_the_next_pass_regrades_all(org, fake_llm):
    conversations = [upsert(org, support_conversation(f"cv-{i}")).conversation for i in range(3)]
    fake_llm.set_default(verdicts_reply(PATH_IDS))
    for conversation in conversations:
        grade(conversation, fake_llm)
    assert grading_pass().enqueued_ids == []

    version = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    criteria_publish(version=version)
    assert staleness_audit(org).stale["conversation"] == 3
    assert all(current_review(c) is None for c in conversations)
    assert sorted(grading_pass().enqueued_ids) == sorted(c.pk for c in conversations)
    for conversation in conversations:
        assert grade(conversation, fake_llm).criteria_version == version
    assert staleness_audit(org).stale["conversation"] == 0


def test_an_in_progress_conversation_is_not_scored_until_it_goes_quiet(org, fake_llm):
    conversation = upsert(org, support_conversation(closed=False)).conversation
    review = grade(conversation, fake_llm)
    assert (review.route, review.reason) == ("not_scorable", "in_progress")
    assert fake_llm.chat_requests() == []
    assert grading_pass().enqueued_ids == []  # still in progress: nothing to do

    later = timezone.now() + timedelta(hours=1)
    assert grading_pass(now=later).enqueued_ids == [conversation.pk]
    fake_llm.script(verdicts_reply(PATH_IDS))
    assert grade(conversation, fake_llm, now=later).route == "pass"


def test_the_moment_a_conversation_goes_quiet_it_is_scorable_and_the_pass_grades_it(org, fake_llm, settings):
    """One boundary for both: at exactly the quiet period after the last message, the evidence reads scorable and
    the pass takes the item whose review said in progress."""
    conversation = upsert(org, support_conversation(closed=False)).conversation
    assert grade(conversation, fake_llm).reason == "in_progress"
    quiet_at = conversation.last_activity_at + timedelta(minutes=settings.CONVERSATION_QUIET_MINUTES)

    assert conversation_state(conversation, now=quiet_at).not_scorable_reason is None
    assert grading_pass(now=quiet_at).enqueued_ids == [conversation.pk]


def test_a_conversation_awaiting_a_calls_messages_is_graded_once_they_came_even_if_they_changed_nothing(org, fake_llm):
    """A resent call's messages can all be in place already: its evidence is the same, its scorability is not."""
    conversation = upsert(org, support_conversation()).conversation
    conversation.content_awaited_since = timezone.now()
    conversation.save(update_fields=["content_awaited_since"])
    review = grade(conversation, fake_llm)
    assert (review.route, review.reason) == ("not_scorable", "content_awaited")
    assert grading_pass().enqueued_ids == []  # still awaited: nothing to do

    conversation.content_awaited_since = None
    conversation.save(update_fields=["content_awaited_since"])
    assert grading_pass().enqueued_ids == [conversation.pk]
    fake_llm.script(verdicts_reply(PATH_IDS))
    assert grade(conversation, fake_llm).route == "pass"


def test_an_incomplete_record_is_not_scorable_with_its_reason(org, fake_llm):
    payload = support_conversation()
    payload["messages"][2]["parent_id"] = "m-missing"
    conversation = upsert(org, payload).conversation
    review = grade(conversation, fake_llm)
    assert (review.route, review.reason) == ("not_scorable", "unresolved_parent")
    state = conversation_state(conversation)
    assert state.not_scorable_reason == "unresolved_parent"


def test_the_pass_caps_judge_work_and_reports_the_backlog(org, fake_llm):
    for i in range(5):
        upsert(org, support_conversation(f"cv-{i}"))
    result = grading_pass(cap=2)
    assert len(result.enqueued_ids) == 2
    assert (result.run.needing, result.run.enqueued, result.run.backlog) == (5, 2, 3)
    assert len(grading_pass(cap=10).enqueued_ids) == 3  # the enqueued two are in flight, not doubled


def test_a_second_beat_in_the_same_hour_does_not_double_the_pass(org):
    upsert(org, support_conversation())
    now = T0 + timedelta(days=30)
    first = grading_pass(trigger=GradingRun.Trigger.BEAT, now=now)
    second = grading_pass(trigger=GradingRun.Trigger.BEAT, now=now + timedelta(minutes=20))
    assert first.run is not None and second.run is None
    assert GradingRun.objects.filter(trigger="beat").count() == 1


def test_the_judge_request_is_json_with_temperature_zero(org, fake_llm):
    conversation = upsert(org, support_conversation()).conversation
    fake_llm.script(verdicts_reply(PATH_IDS))
    grade(conversation, fake_llm)
    body = fake_llm.chat_requests()[0].body
    assert body["temperature"] == 0
    assert body["response_format"]["type"] in ("json_schema", "json_object")
    json.dumps(body)  # what was sent is plain JSON


@pytest.mark.django_db(transaction=True)
def test_two_processes_seeding_criteria_at_once_get_the_same_active_version(org):
    def seed(_):
        try:
            return criteria_active(org=org, kind=ItemKind.CONVERSATION).pk
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert len(set(pool.map(seed, range(8)))) == 1

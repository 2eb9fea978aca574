"""The ingestion API: upsert, append, read, feedback; 400 naming the field, 404, 413 naming the limit."""

import copy
import json
from datetime import datetime

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from grading.api.keys import api_key_create
from grading.core.evidence import EvidenceMessage, fingerprint
from grading.models import Conversation, Feedback, Message, Review
from tests.builders.confidences import routed_under_a_certificate
from tests.builders.conversations import PATH_IDS, message, support_conversation
from tests.builders.queue_items import conversation_item

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(client, org):
    key = api_key_create(org=org, name="agent platform").plaintext

    def call(method: str, path: str, body=None):
        kwargs = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
        if body is not None:
            kwargs.update(data=json.dumps(body), content_type="application/json")
        return getattr(client, method)(f"/api/v1{path}", **kwargs)

    return call


def recompute(messages: list[dict]) -> str:
    """The recipe of docs/pipelines-and-api.md, from the canonical messages the API returns."""
    return fingerprint([EvidenceMessage(**{**m, "parent_id": None}) for m in messages])


def test_it_creates_then_updates_a_conversation_idempotently(api):
    created = api("post", "/conversations", support_conversation())
    assert created.status_code == 201
    body = created.json()
    assert body["active_path"] == PATH_IDS
    assert body["branch_count"] == 2
    assert body["scorable"] is True and body["not_scorable_reason"] is None
    assert body["review"] is None
    again = api("post", "/conversations", support_conversation())
    assert again.status_code == 200
    assert again.json()["fingerprint"] == body["fingerprint"]
    assert Message.objects.count() == 5


def test_a_client_can_recompute_the_fingerprint_from_the_canonical_messages(api):
    api("post", "/conversations", support_conversation())
    body = api("get", "/conversations/cv-1").json()
    assert [m["id"] for m in body["messages"]] == PATH_IDS
    assert set(body["messages"][0]) == {"content", "id", "name", "role", "tool_call_id", "tool_calls"}
    assert recompute(body["messages"]) == body["fingerprint"]


def test_appending_and_editing_the_active_branch_change_the_fingerprint_an_abandoned_branch_does_not(api):
    original = api("post", "/conversations", support_conversation()).json()["fingerprint"]

    abandoned = support_conversation()
    abandoned["messages"][3]["content"] = "A different abandoned reply."
    assert api("post", "/conversations", abandoned).json()["fingerprint"] == original

    edited = support_conversation()
    edited["messages"][4]["content"] = "Done: order 1182 was refunded, 49.91 is on its way."
    edited_fp = api("post", "/conversations", edited).json()["fingerprint"]
    assert edited_fp != original

    appended = api(
        "post", "/conversations/cv-1/messages", {"messages": [message("m5", "user", "Thanks!", "m4", 9)]}
    ).json()
    assert appended["fingerprint"] != edited_fp
    assert appended["active_path"] == [*PATH_IDS, "m5"]


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda p: p.pop("external_id"), "external_id"),
        (lambda p: p["messages"][0].update(role="robot"), "messages.0.role"),
        (lambda p: p["messages"][1].update(parentId="m1"), "messages.1.parentId"),
        (lambda p: p["messages"][0].update(content="nul \x00 byte"), "messages.0.content"),
        (lambda p: p.update(closed="sometimes"), "closed"),
        (lambda p: p["messages"][0].update(id=""), "messages.0.id"),
    ],
)
def test_a_validation_failure_answers_400_naming_the_field_and_writes_nothing(api, mutate, field):
    payload = support_conversation()
    mutate(payload)
    response = api("post", "/conversations", payload)
    assert response.status_code == 400
    assert field in response.json()["detail"]
    assert Conversation.objects.count() == 0 and Message.objects.count() == 0


def test_limits_answer_413_naming_the_limit_and_write_nothing(api, settings):
    settings.MAX_MESSAGES_PER_CONVERSATION = 4
    response = api("post", "/conversations", support_conversation())
    assert response.status_code == 413
    assert response.json()["limit"] == "MAX_MESSAGES_PER_CONVERSATION"
    settings.MAX_MESSAGES_PER_CONVERSATION = 100
    settings.MAX_MESSAGE_BYTES = 1_000
    big = support_conversation()
    big["messages"][0]["content"] = "x" * 2_000
    response = api("post", "/conversations", big)
    assert response.status_code == 413
    assert "MAX_MESSAGE_BYTES" in response.json()["limit"]
    assert Conversation.objects.count() == 0


def test_an_append_over_the_limit_leaves_the_conversation_as_it_was(api, settings):
    before = api("post", "/conversations", support_conversation()).json()
    settings.MAX_MESSAGES_PER_CONVERSATION = 5
    response = api("post", "/conversations/cv-1/messages", {"messages": [message("m5", "user", "More?", "m4", 9)]})
    assert response.status_code == 413
    assert api("get", "/conversations/cv-1").json()["fingerprint"] == before["fingerprint"]
    assert Message.objects.count() == 5


def test_unknown_conversations_are_404_and_other_orgs_cannot_see_them(api, client, other_org):
    assert api("get", "/conversations/nope").status_code == 404
    assert (
        api("post", "/conversations/nope/messages", {"messages": [message("x", "user", "hi", None, 0)]}).status_code
        == 404
    )
    api("post", "/conversations", support_conversation())
    outsider = api_key_create(org=other_org, name="other").plaintext
    response = client.get("/api/v1/conversations/cv-1", HTTP_AUTHORIZATION=f"Bearer {outsider}")
    assert response.status_code == 404


def test_feedback_is_stored_apart_from_scores(api):
    api("post", "/conversations", support_conversation())
    response = api("post", "/feedback", {"conversation": "cv-1", "message_id": "m4", "value": "down"})
    assert response.status_code == 201
    assert Feedback.objects.get().value == "down"
    assert api("post", "/feedback", {"conversation": "cv-1", "message_id": "m9", "value": "up"}).status_code == 404
    assert api("post", "/feedback", {"conversation": "cv-1", "message_id": "m4", "value": "meh"}).status_code == 400


def test_an_open_conversation_ending_on_a_tool_call_is_in_progress(api):
    payload = support_conversation(closed=False)
    payload["messages"] = payload["messages"][:2]
    payload["active_message_id"] = "m2"
    body = api("post", "/conversations", payload).json()
    assert (body["scorable"], body["not_scorable_reason"]) == (False, "in_progress")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)
mutations = st.lists(
    st.tuples(
        st.sampled_from(["external_id", "application", "closed", "active_message_id", "messages", "extra"]),
        json_values,
    ),
    max_size=3,
)


@hypothesis_settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    mutations=mutations,
    message_junk=st.lists(
        st.tuples(
            st.sampled_from(["id", "parent_id", "role", "content", "tool_calls", "created_at", "hidden"]), json_values
        ),
        max_size=3,
    ),
)
def test_junk_payloads_get_4xx_never_5xx_and_rejections_write_nothing(api, mutations, message_junk):
    payload = copy.deepcopy(support_conversation("fuzz"))
    for key, value in mutations:
        payload[key] = value
    if isinstance(payload.get("messages"), list) and payload["messages"] and isinstance(payload["messages"][0], dict):
        for key, value in message_junk:
            payload["messages"][0][key] = value
    before = (Conversation.objects.count(), Message.objects.count())
    response = api("post", "/conversations", payload)
    assert response.status_code < 500
    if response.status_code >= 400:
        assert (Conversation.objects.count(), Message.objects.count()) == before


def test_regression_blind_fingerprint_every_message_counts_to_the_last_character(api):
    """Not a fingerprint of the agent's text cut at a few thousand characters: user and tool messages
    count, and a change past 100,000 characters still changes it."""
    payload = support_conversation()
    payload["messages"][2]["content"] = "x" * 150_000
    base = api("post", "/conversations", payload).json()["fingerprint"]
    payload["messages"][2]["content"] = "x" * 149_999 + "y"
    tool_changed = api("post", "/conversations", payload).json()["fingerprint"]
    payload["messages"][0]["content"] = "Please refund order 1183, it arrived broken."
    user_changed = api("post", "/conversations", payload).json()["fingerprint"]
    assert len({base, tool_changed, user_changed}) == 3


def test_a_nul_character_in_an_id_is_a_400_not_a_database_error(api):
    assert api("get", "/conversations/bad%00id").status_code == 400
    response = api("post", "/feedback", {"conversation": "cv\u0000", "message_id": "m1", "value": "up"})
    assert response.status_code == 400
    assert "conversation" in response.json()["detail"]


def test_a_review_says_how_sure_the_judge_was_and_the_certificate_it_was_routed_under(api, org):
    review = conversation_item(org)
    confidences = {"grounded": 0.92, "usable": 0.7}
    Review.objects.filter(pk=review.pk).update(confidences=confidences, confidence_source="logprobs")

    by_the_bands = api("get", "/conversations/cv-1").json()["review"]
    certificate = routed_under_a_certificate(review, agreement=0.9, confidence=0.95)
    certified = api("get", "/conversations/cv-1").json()["review"]

    assert (by_the_bands["confidences"], by_the_bands["confidence_source"]) == (confidences, "logprobs")
    assert by_the_bands["certificate"] is None
    assert datetime.fromisoformat(certified["certificate"].pop("computed_at")) == certificate.computed_at
    assert certified["certificate"] == {"id": certificate.pk, "agreement": 0.9, "confidence": 0.95}

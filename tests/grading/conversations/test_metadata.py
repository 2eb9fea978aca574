"""What produced an item (a release, a model, an environment): a small map of metadata on conversations and drafts,
through every way in (the JSON API, OpenTelemetry attributes, the importers). It is kept and shown, never part of the
evidence: a change of it re-grades nothing."""

import json
from pathlib import Path

import pytest
from django.urls import reverse

from grading.api.keys import api_key_create
from grading.importers import ParsedConversation, parse_file
from grading.models import Conversation, Draft, ReviewState
from tests.builders.api_calls import api_caller, row_counts
from tests.builders.conversations import support_conversation
from tests.builders.otlp_spans import chat_span, export_request, key_values, text
from tests.builders.queue_items import conversation_item

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "imports"
DRAFT = {"external_id": "d-1", "title": "T", "slug": "t", "body": "Body."}


def test_items_keep_their_metadata_until_a_write_gives_another_map(org, client):
    call = api_caller(client, org)
    created = call("post", "/conversations", support_conversation("cv-1") | {"metadata": {"release": "2.3"}})
    assert created.json()["metadata"] == {"release": "2.3"}
    append = {"messages": [{"id": "m5", "parent_id": "m4", "role": "user", "content": "Thanks!"}]}
    assert call("post", "/conversations/cv-1/messages", append).json()["metadata"] == {"release": "2.3"}
    replaced = {**append, "metadata": {"release": "2.4", "tier": "enterprise"}}
    assert call("post", "/conversations/cv-1/messages", replaced).status_code == 200
    assert call("get", "/conversations/cv-1").json()["metadata"] == {"release": "2.4", "tier": "enterprise"}

    assert call("post", "/drafts", DRAFT | {"metadata": {"prompt": "v7"}}).status_code == 202
    draft = Draft.objects.get()
    assert call("get", f"/drafts/{draft.pk}").json()["metadata"] == {"prompt": "v7"}
    assert call("post", "/drafts", DRAFT).status_code == 202
    assert Draft.objects.get().metadata == {"prompt": "v7"}


def test_the_item_page_shows_what_produced_the_item_escaped(client_for, operator, org):
    review = conversation_item(org, "cv-1")
    Conversation.objects.filter(pk=review.conversation_id).update(metadata={"release": "<b>2.4</b>"})
    html = client_for(operator).get(reverse("review_detail", args=[review.pk])).content.decode()
    assert "What produced it" in html
    assert "<dt>release</dt><dd>&lt;b&gt;2.4&lt;/b&gt;</dd>" in html


def test_a_change_of_metadata_leaves_the_evidence_and_the_review_as_they_were(org, client):
    review = conversation_item(org, "cv-1")
    conversation = review.conversation
    payload = support_conversation("cv-1") | {"active_message_id": "m4", "metadata": {"release": "2.4"}}
    assert api_caller(client, org)("post", "/conversations", payload).status_code == 200
    conversation.refresh_from_db()
    review.refresh_from_db()
    assert conversation.metadata == {"release": "2.4"}
    assert conversation.fingerprint == review.fingerprint
    assert review.state == ReviewState.WAITING


@pytest.mark.parametrize(
    "metadata",
    [
        {"has space": "x"},
        {"9starts-with-a-digit": "x"},
        {"k" * 65: "x"},
        {f"key{n}": "x" for n in range(21)},
        {"release": ""},
        {"release": "v" * 201},
        {"release": "2.4\n"},
        {"release": "2.4\x00"},
        {"release": 2.4},
        {"release": {"major": 2}},
        ["release", "2.4"],
    ],
    ids=[
        "space-in-key", "digit-first", "long-key", "21-keys", "empty-value", "long-value", "line-break", "nul",
        "number", "object", "list",
    ],
)  # fmt: skip
def test_hostile_metadata_is_refused_with_its_field_named_and_nothing_is_written(org, client, metadata):
    call = api_caller(client, org)
    before = row_counts()
    for path, body in (("/conversations", support_conversation("cv-1")), ("/drafts", DRAFT)):
        response = call("post", path, body | {"metadata": metadata})
        assert response.status_code == 400
        assert "metadata" in json.dumps(response.json())
    assert row_counts() == before


def test_otlp_resource_and_span_attributes_become_metadata_the_span_winning(org, client):
    key = api_key_create(org=org, name="collector").plaintext
    asked, answered = [{"role": "user", "parts": [text("Hi")]}], [{"role": "assistant", "parts": [text("Hello")]}]
    span = chat_span(
        1, asked, answered, conversation="by-otlp",
        extra={
            "deployment.environment.name": "staging",
            "tollgate.metadata.tier": "enterprise",
            "tollgate.metadata.note": "two\nlines",  # outside the rules: left out, the spans kept
            **{f"tollgate.metadata.k{n}": "x" for n in range(30)},  # beyond the limit of 20 names: left out
        },
    )  # fmt: skip
    request = export_request(span)
    request.resource_spans[0].resource.attributes.extend(
        key_values({"service.version": "2.4.1", "deployment.environment.name": "production"})
    )
    response = client.post(
        "/api/v1/otlp/v1/traces", request.SerializeToString(), content_type="application/x-protobuf",
        HTTP_AUTHORIZATION=f"Bearer {key}",
    )  # fmt: skip
    assert response.status_code == 200
    metadata = Conversation.objects.get().metadata
    assert len(metadata) == 20
    assert {key: metadata[key] for key in ("release", "environment", "model", "provider", "tier")} == {
        "release": "2.4.1",
        "environment": "staging",
        "model": "support-model",
        "provider": "openai",
        "tier": "enterprise",
    }


def test_the_importers_carry_what_each_export_says_produced_a_conversation(tmp_path):
    envelope = {"id": "c-1", "metadata": {"release": "2.3"}, "messages": [{"role": "user", "content": "Hi"}]}
    (tmp_path / "openai.jsonl").write_text(json.dumps(envelope))
    assert _metadata_of(tmp_path / "openai.jsonl", "openai") == [{"release": "2.3"}]
    assert {"model": "gpt-4o"} in _metadata_of(FIXTURES / "chatgpt-tools-branches.json", "chatgpt")
    assert {"model": "gpt-4o"} in _metadata_of(FIXTURES / "openwebui-branches.json", "openwebui")


def _metadata_of(path: Path, format_name: str) -> list:
    return [r.payload.get("metadata") for r in parse_file(format_name, path) if isinstance(r, ParsedConversation)]

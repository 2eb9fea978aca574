"""The end user an item is about, as the pipeline names it: `end_user` on the JSON API, `enduser.id` on OTLP spans
(or their resource). An erasure by end user finds items by it."""

import pytest

from grading.api.keys import api_key_create
from grading.models import Conversation, Draft
from tests.builders.api_calls import api_caller
from tests.builders.conversations import support_conversation
from tests.builders.otlp_spans import chat_span, export_request, key_values, text

pytestmark = pytest.mark.django_db


def test_conversations_and_drafts_take_an_end_user_and_keep_it_when_a_write_omits_it(org, client):
    call = api_caller(client, org)
    assert call("post", "/conversations", support_conversation("cv-1") | {"end_user": "alice"}).status_code == 201
    append = {"messages": [{"id": "m5", "parent_id": "m4", "role": "user", "content": "Thanks!"}]}
    assert call("post", "/conversations/cv-1/messages", append).status_code == 200
    assert Conversation.objects.get().end_user == "alice"
    draft = {"external_id": "d-1", "title": "T", "slug": "t", "body": "Body.", "end_user": "bob"}
    assert call("post", "/drafts", draft).status_code == 202
    assert Draft.objects.get().end_user == "bob"
    assert call("post", "/conversations", support_conversation("cv-2") | {"end_user": "x" * 201}).status_code == 400


def test_an_otlp_span_names_its_end_user_by_enduser_id_or_its_resource_does(org, client):
    key = api_key_create(org=org, name="collector").plaintext
    asked, answered = [{"role": "user", "parts": [text("Hi")]}], [{"role": "assistant", "parts": [text("Hello")]}]
    on_span = chat_span(1, asked, answered, conversation="by-span", extra={"enduser.id": "carol"})
    from_resource = export_request(chat_span(2, asked, answered, conversation="by-resource"))
    from_resource.resource_spans[0].resource.attributes.extend(key_values({"enduser.id": "dave"}))
    for request in (export_request(on_span), from_resource):
        response = client.post(
            "/api/v1/otlp/v1/traces", request.SerializeToString(), content_type="application/x-protobuf",
            HTTP_AUTHORIZATION=f"Bearer {key}",
        )  # fmt: skip
        assert response.status_code == 200
    assert dict(Conversation.objects.values_list("external_id", "end_user")) == {
        "by-span": "carol",
        "by-resource": "dave",
    }

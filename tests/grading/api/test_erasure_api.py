"""POST /api/v1/erasures and GET /api/v1/erasures/{id}: asked with exactly one target, another org's items and
erasures unknown, who asked audited."""

from django.test import Client

from grading.erasure.runs import end_user_hash, erasure_run
from grading.models import AuditEvent, Conversation, Erasure
from tests.builders.api_calls import api_caller
from tests.builders.queue_items import conversation_item


def test_a_pipeline_asks_to_erase_a_conversation_and_reads_the_tombstone(org, client: Client):
    conversation_item(org, "cv-1")
    call = api_caller(client, org)

    response = call("post", "/erasures", {"conversation": "cv-1"})

    assert response.status_code == 202
    asked = response.json()
    assert (asked["scope"], asked["target"], asked["state"], asked["counts"]) == ("conversation", "cv-1", "pending", {})
    erasure = Erasure.objects.get(pk=asked["id"])
    assert erasure.api_key.name == "hostile pipeline"
    assert AuditEvent.objects.get(action="erasure.request").api_key == erasure.api_key
    erasure_run(erasure_id=erasure.pk)
    done = call("get", f"/erasures/{erasure.pk}").json()
    assert done["state"] == "done" and done["counts"]["conversation"] == 1 and done["counts"]["message"] == 5
    assert not Conversation.objects.exists()


def test_an_end_user_is_kept_only_as_a_hash(org, client: Client):
    response = api_caller(client, org)("post", "/erasures", {"end_user": "alice@example.com"})

    assert response.status_code == 202
    assert response.json()["target"] == end_user_hash("alice@example.com")
    assert "alice" not in str(AuditEvent.objects.values_list("detail", flat=True))


def test_unknown_and_other_orgs_items_and_erasures_are_404_and_nothing_is_asked(org, other_org, client: Client):
    conversation_item(other_org, "theirs")
    call = api_caller(client, org)
    assert call("post", "/erasures", {"conversation": "theirs"}).status_code == 404
    assert call("post", "/erasures", {"draft": "no-such-draft"}).status_code == 404
    theirs = api_caller(client, other_org)("post", "/erasures", {"conversation": "theirs"}).json()["id"]
    assert call("get", f"/erasures/{theirs}").status_code == 404
    assert Erasure.objects.filter(org=org).count() == 0


def test_it_takes_exactly_one_target(org, client: Client):
    call = api_caller(client, org)
    for body in ({}, {"conversation": "a", "draft": "b"}, {"end_user": ""}, {"end_user": "x" * 201}, {"other": 1}):
        response = call("post", "/erasures", body)
        assert response.status_code == 400, body
    assert not Erasure.objects.exists()


def test_the_event_of_each_item_erased_names_the_key_that_asked(org, client: Client):
    conversation = conversation_item(org, "cv-1").conversation
    asked = api_caller(client, org)("post", "/erasures", {"conversation": "cv-1"}).json()

    erasure_run(erasure_id=asked["id"])

    erased = AuditEvent.objects.get(action="item.erase")
    assert (erased.item_id, erased.actor, erased.api_key.name) == (conversation.pk, None, "hostile pipeline")

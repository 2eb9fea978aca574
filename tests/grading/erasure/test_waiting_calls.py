"""Erasure and retention reach the OTLP model calls still waiting for their other part: their messages and end user go
with the conversation or the end user they belong to, and a call nobody completes expires."""

from datetime import timedelta

import pytest
from django.utils import timezone

from grading import tasks
from grading.api.keys import api_key_create
from grading.models import Conversation
from grading.models.otlp import PendingCall
from tests.builders.api_calls import api_caller
from tests.builders.otlp_spans import export_request, key_values, logs_request, two_turns_in_log_records

pytestmark = pytest.mark.django_db
OTHER_TRACE = "6c" * 16
THIRD_TRACE = "7d" * 16


@pytest.fixture
def send(client, org):
    key = api_key_create(org=org, name="collector").plaintext

    def post(signal: str, request) -> None:
        response = client.post(
            f"/api/v1/otlp/v1/{signal}", request.SerializeToString(), content_type="application/x-protobuf",
            HTTP_AUTHORIZATION=f"Bearer {key}",
        )  # fmt: skip
        assert response.status_code == 200, response.content[:300]

    return post


@pytest.fixture
def erase(client, org):
    call = api_caller(client, org)

    def asked(body: dict) -> dict:
        """The erasure asked for, worked to its end: its counts."""
        response = call("post", "/erasures", body)
        assert response.status_code == 202, response.content[:300]
        tasks.erasure_run(response.json()["id"])
        done = call("get", f"/erasures/{response.json()['id']}").json()
        assert done["state"] == "done"
        return done["counts"]

    return asked


def test_it_erases_a_conversation_that_exists_only_as_waiting_calls(send, erase):
    spans, records = two_turns_in_log_records(conversation="only-waiting")
    send("traces", export_request(*spans[:3]))  # calls 1 and 3 wait for their messages
    send("logs", logs_request(*records[8:]))  # call 4's messages wait for its span
    other_spans, _ = two_turns_in_log_records(conversation="someone-else", trace=OTHER_TRACE)
    send("traces", export_request(*other_spans))

    counts = erase({"conversation": "only-waiting"})

    assert counts == {"pendingcall": 3, "pendingevent": 7}
    assert not PendingCall.objects.filter(trace_id=spans[0].trace_id.hex()).exists()
    assert PendingCall.objects.filter(conversation_external_id="someone-else").count() == 3
    send("logs", logs_request(*records[:8]))  # the rest comes after all: it makes nothing of what was erased
    send("traces", export_request(spans[3]))
    assert not Conversation.objects.filter(external_id="only-waiting").exists()


def test_erasing_a_stored_conversation_takes_the_log_records_waiting_in_its_traces(send, erase):
    spans, records = two_turns_in_log_records(conversation="stored")
    send("traces", export_request(*spans[:3]))
    send("logs", logs_request(*records[:8]))  # calls 1 and 3 are written
    send("logs", logs_request(*records[8:]))  # call 4's messages, whose span has not come
    assert Conversation.objects.filter(external_id="stored").exists()

    counts = erase({"conversation": "stored"})

    assert (counts["conversation"], counts["message"]) == (1, 5)
    assert not PendingCall.objects.exists()  # the written calls' rows and call 4's records
    send("traces", export_request(spans[3]))
    assert not Conversation.objects.filter(external_id="stored").exists()


def _for_end_user(spans: list, end_user: str):
    request = export_request(*spans)
    request.resource_spans[0].resource.attributes.extend(key_values({"enduser.id": end_user}))
    return request


def test_it_erases_the_waiting_calls_of_an_end_user_and_counts_them(send, erase):
    spans, records = two_turns_in_log_records(conversation="alice-chat")
    send("traces", _for_end_user(spans[:3], "alice@example.com"))
    send("logs", logs_request(*records[:3]))  # call 1 is written: a conversation of hers
    send("logs", logs_request(*records[8:]))  # call 4's messages, before its span
    bobs, _ = two_turns_in_log_records(conversation="bob-chat", trace=OTHER_TRACE)
    send("traces", _for_end_user(bobs, "bob@example.com"))

    counts = erase({"end_user": "alice@example.com"})

    assert (counts["conversation"], counts["pendingcall"]) == (1, 3)  # call 1's row, call 3 waiting, call 4's records
    assert not PendingCall.objects.filter(trace_id=spans[0].trace_id.hex()).exists()
    assert PendingCall.objects.filter(end_user="bob@example.com").count() == 3


def test_waiting_calls_expire_after_the_setting_and_their_conversation_is_graded_on_what_came(send, settings):
    settings.OTLP_PENDING_EXPIRY_HOURS = 24
    spans, records = two_turns_in_log_records()
    send("traces", export_request(*spans))
    send("logs", logs_request(*records[:8]))  # calls 1 and 3 written; call 4's messages never come
    send("logs", logs_request(*two_turns_in_log_records(trace=OTHER_TRACE)[1]))  # records whose spans never come
    conversation = Conversation.objects.get(external_id="conv-otlp")
    assert conversation.content_awaited_since is not None
    PendingCall.objects.update(received_at=timezone.now() - timedelta(hours=25))
    fresh, _ = two_turns_in_log_records(conversation="fresh", trace=THIRD_TRACE)
    send("traces", export_request(*fresh))  # a request of the org gives up its expired calls, not its own
    assert set(PendingCall.objects.values_list("trace_id", flat=True)) == {THIRD_TRACE}
    conversation.refresh_from_db()
    assert conversation.content_awaited_since is None

    PendingCall.objects.update(received_at=timezone.now() - timedelta(hours=23))
    tasks.retention_pass()
    assert PendingCall.objects.count() == 3
    PendingCall.objects.update(received_at=timezone.now() - timedelta(hours=25))
    tasks.retention_pass()  # the daily pass: for orgs that send nothing more
    assert not PendingCall.objects.exists()


def test_whole_calls_no_worker_wrote_are_written_by_the_daily_pass_before_any_expires(send, settings):
    """A logs request made whole calls of more conversations than it writes, and the broker did not take the task
    that writes the rest: the daily pass writes them."""
    settings.MAX_OTLP_CONVERSATIONS_PER_REQUEST = 1
    records = []
    for n, trace in enumerate([OTHER_TRACE, THIRD_TRACE]):
        spans, calls = two_turns_in_log_records(conversation=f"conv-{n}", trace=trace)
        send("traces", export_request(*spans[:1]))
        records += calls[:3]
    send("logs", logs_request(*records))  # its task is sent on commit, which this test's transaction never reaches
    assert list(Conversation.objects.values_list("external_id", flat=True)) == ["conv-0"]
    PendingCall.objects.update(received_at=timezone.now() - timedelta(hours=25))

    tasks.retention_pass()

    assert sorted(Conversation.objects.values_list("external_id", flat=True)) == ["conv-0", "conv-1"]
    assert not PendingCall.objects.exists()

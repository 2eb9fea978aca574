"""Values that used to pass validation and then broke every later read, or answered 500 (issue 11).

Each is refused with a 400 naming the field (or a 413 naming the limit) and writes nothing, or is stored in a form
that every later read, append, grading and re-import can handle.
"""

import importlib
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from grading.conversations.grader import conversation_grade
from grading.judge.backends import HeuristicJudge
from grading.models import Conversation, Draft, Message
from tests.builders.api_calls import api_caller, error_fields, row_counts
from tests.builders.conversations import message, support_conversation
from tests.builders.drafts import CLEAN_BODY, SOURCE

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(client, org):
    return api_caller(client, org)


# --- times outside what the database and Python can both hold -----------------------------------------------------
OUT_OF_RANGE = [
    "0001-01-01T00:00:00+14:00",  # 31 December of 1 BC in UTC: stored by PostgreSQL, unreadable by Python
    "9999-12-31T23:00:00-14:00",  # the year 10000 in UTC
]


@pytest.mark.parametrize("created_at", OUT_OF_RANGE)
def test_a_time_outside_the_storable_range_is_refused_naming_the_field_and_writes_nothing(api, created_at):
    payload = support_conversation()
    payload["messages"][2]["created_at"] = created_at
    before = row_counts()
    response = api("post", "/conversations", payload)
    assert response.status_code == 400
    assert error_fields(response) == ["messages.2.created_at"]
    assert row_counts() == before


@pytest.mark.parametrize("created_at", OUT_OF_RANGE)
def test_an_append_with_a_time_outside_the_range_leaves_the_conversation_readable(api, created_at):
    api("post", "/conversations", support_conversation())
    response = api(
        "post",
        "/conversations/cv-1/messages",
        {"messages": [message("m5", "user", "More?", "m4", 9) | {"created_at": created_at}]},
    )
    assert response.status_code == 400
    assert error_fields(response) == ["messages.0.created_at"]
    assert api("get", "/conversations/cv-1").status_code == 200


def test_the_very_edges_of_the_range_are_stored_read_appended_and_graded(api, org):
    payload = support_conversation()
    payload["messages"][0]["created_at"] = "0001-01-01T00:00:00+00:00"
    payload["messages"][3]["created_at"] = "9999-12-31T23:59:59.999999+00:00"
    payload["messages"][4]["created_at"] = "0001-01-01T10:00:00+10:00"  # the first instant again, written east of UTC
    assert api("post", "/conversations", payload).status_code == 201
    assert api("get", "/conversations/cv-1").status_code == 200
    appended = api("post", "/conversations/cv-1/messages", {"messages": [message("m5", "user", "Thanks", "m4", 9)]})
    assert appended.status_code == 200
    review = conversation_grade(conversation_id=Conversation.objects.get().pk, judge=HeuristicJudge())
    assert review is not None


def test_an_import_refuses_a_conversation_with_an_unstorable_time_and_a_second_import_still_reaches_the_rest(
    org, tmp_path
):
    conversations = []
    for index in range(3):
        conversation = support_conversation(f"cv-{index}")
        conversations.append(conversation)
    conversations[1]["messages"][2]["created_at"] = OUT_OF_RANGE[0]
    conversations[2]["messages"][2]["created_at"] = OUT_OF_RANGE[1]
    path = tmp_path / "export.json"
    path.write_text(json.dumps(conversations))
    for _ in range(2):  # the second run re-reads what the first stored
        out, err = StringIO(), StringIO()
        with pytest.raises(CommandError, match="2 of 3"):
            call_command("import_conversations", str(path), "--format", "openai", "--json", stdout=out, stderr=err)
        assert [json.loads(line)["external_id"] for line in out.getvalue().splitlines()] == ["cv-0"]
        assert [line.split(":")[0] for line in err.getvalue().splitlines()] == ["cv-1", "cv-2"]
    # A time the source gave but that cannot be stored is not replaced by another: its conversation is refused.
    assert list(Conversation.objects.values_list("external_id", flat=True)) == ["cv-0"]


def test_the_migration_repairs_times_stored_before_they_were_refused(api):
    api("post", "/conversations", support_conversation())
    with connection.cursor() as cursor:  # what an earlier version let in
        cursor.execute("UPDATE grading_message SET created_at = '0001-01-01 00:00:00+14:00' WHERE external_id = 'm1'")
        cursor.execute("UPDATE grading_conversation SET started_at = '9999-12-31 23:00:00-14:00'")
    with pytest.raises(Exception, match="year"):
        list(Message.objects.all())
    migration = importlib.import_module("grading.migrations.0010_message_twins")
    with connection.cursor() as cursor:
        cursor.execute(migration.REPAIR_TIMES)
    assert Message.objects.get(external_id="m1").created_at is None
    assert api("get", "/conversations/cv-1").status_code == 200
    assert api("post", "/conversations", support_conversation()).status_code == 200


# --- numbers that are not JSON -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("replace", "field"),
    [
        ('"content": "Please refund order 1182, it arrived broken."', "messages.0.content"),
        ('"arguments": "{\\"order\\": 1182}"', "messages.1.tool_calls"),
    ],
)
@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_nan_and_infinity_are_refused_naming_the_field_and_write_nothing(api, replace, field, constant):
    raw = json.dumps(support_conversation())
    assert replace in raw
    key = replace.split(":")[0]
    hostile = (
        f'{key}: [{{"type": "text", "text": "x", "score": {constant}}}]'
        if key == '"content"'
        else f'{key}: "{{}}", "weight": {constant}'
    )
    before = row_counts()
    response = api("post", "/conversations", raw=raw.replace(replace, hostile, 1))
    assert response.status_code == 400, response.content
    assert error_fields(response) == [field]
    assert row_counts() == before


# --- one id twice in one payload -----------------------------------------------------------------------------------
def test_an_id_sent_twice_in_one_payload_is_kept_and_the_conversation_is_not_scorable_for_duplicate_id(api, org):
    payload = support_conversation()
    payload["messages"].append(message("m3", "tool", '{"status": "failed"}', "m2", 2, tool_call_id="call_1"))
    response = api("post", "/conversations", payload)
    assert response.status_code == 201
    body = response.json()
    assert (body["scorable"], body["not_scorable_reason"], body["active_path"]) == (False, "duplicate_id", [])
    # Both were kept, as sent: the record is what the source said, and it says two things about m3.
    assert sorted(Message.objects.filter(external_id="m3").values_list("content", flat=True)) == [
        '{"status": "failed"}',
        '{"status": "refunded", "amount": "49.90"}',
    ]
    assert api("get", "/conversations/cv-1").json()["not_scorable_reason"] == "duplicate_id"
    review = conversation_grade(conversation_id=Conversation.objects.get().pk, judge=HeuristicJudge())
    assert (review.route, review.reason) == ("not_scorable", "duplicate_id")


def test_re_posting_an_id_twice_changes_nothing_and_sending_it_once_settles_it(api):
    payload = support_conversation()
    payload["messages"].append(message("m3", "tool", '{"status": "failed"}', "m2", 2, tool_call_id="call_1"))
    first = api("post", "/conversations", payload).json()
    updated_at = Conversation.objects.get().updated_at
    assert api("post", "/conversations", payload).json() == first
    assert Conversation.objects.get().updated_at == updated_at and Message.objects.count() == 6

    settled = api("post", "/conversations", support_conversation()).json()
    assert (settled["scorable"], settled["active_path"]) == (True, ["m1", "m2", "m3", "m4"])
    assert Message.objects.count() == 5


def test_an_append_with_an_id_twice_marks_the_conversation_and_counts_against_the_limit(api, settings):
    api("post", "/conversations", support_conversation())
    twice = [message("m5", "user", "One", "m4", 9), message("m5", "user", "Two", "m4", 10)]
    body = api("post", "/conversations/cv-1/messages", {"messages": twice}).json()
    assert body["not_scorable_reason"] == "duplicate_id"
    settings.MAX_MESSAGES_PER_CONVERSATION = 7
    three = [*twice, message("m5", "user", "Three", "m4", 11)]
    response = api("post", "/conversations/cv-1/messages", {"messages": three})
    assert response.status_code == 413
    assert Message.objects.count() == 7


# --- ids that cannot be addressed ----------------------------------------------------------------------------------
@pytest.mark.parametrize("external_id", ["a/b", "/", "..", ".", "tab\there", "bell\x07", "line\nbreak", "del\x7f"])
def test_a_conversation_id_that_no_url_can_address_is_refused_naming_the_field(api, external_id):
    before = row_counts()
    response = api("post", "/conversations", support_conversation(external_id))
    assert response.status_code == 400
    assert error_fields(response) == ["external_id"]
    feedback = api("post", "/feedback", {"conversation": external_id, "message_id": "m4", "value": "up"})
    assert (feedback.status_code, error_fields(feedback)) == (400, ["conversation"])
    assert row_counts() == before


@pytest.mark.parametrize("field", ["id", "parent_id"])
def test_a_message_id_with_control_characters_is_refused_naming_the_field(api, field):
    payload = support_conversation()
    payload["messages"][1][field] = "m\x1b[31m2"
    response = api("post", "/conversations", payload)
    assert (response.status_code, error_fields(response)) == (400, [f"messages.1.{field}"])


@pytest.mark.parametrize("external_id", ["run 7 · article", "ünïcode-ид", "a?b#c", "100%", "a\\b", "~x", "a:b@c"])
def test_every_conversation_id_that_is_accepted_can_be_read_and_appended(api, external_id):
    from urllib.parse import quote

    assert api("post", "/conversations", support_conversation(external_id)).status_code == 201
    path = f"/conversations/{quote(external_id, safe='')}"
    read = api("get", path)
    assert (read.status_code, read.json()["external_id"]) == (200, external_id)
    appended = api("post", f"{path}/messages", {"messages": [message("m5", "user", "More?", "m4", 9)]})
    assert appended.status_code == 200 and appended.json()["active_path"][-1] == "m5"


# --- drafts with no end --------------------------------------------------------------------------------------------
def test_a_draft_over_the_size_limit_is_413_naming_the_limit_and_writes_nothing(api, settings):
    settings.MAX_DRAFT_BYTES = 50_000
    accepted = api("post", "/drafts", {"external_id": "d-1", "title": "T", "slug": "t", "body": CLEAN_BODY})
    assert accepted.status_code == 202
    before = row_counts()
    big = CLEAN_BODY + "\n\n" + "é" * 25_000  # 50,000 bytes of UTF-8 more, though only 25,000 characters
    response = api("post", "/drafts", {"external_id": "d-1", "title": "T", "slug": "t", "body": big})
    assert response.status_code == 413
    assert (response.json()["limit"], response.json()["value"]) == ("MAX_DRAFT_BYTES", 50_000)
    assert row_counts() == before
    assert Draft.objects.get().body == CLEAN_BODY  # the accepted version stands


def test_the_default_draft_limit_refuses_ten_megabytes(api):
    before = row_counts()
    response = api("post", "/drafts", {"external_id": "d-1", "title": "T", "slug": "t", "body": "word " * 2_000_000})
    assert (response.status_code, response.json()["limit"]) == (413, "MAX_DRAFT_BYTES")
    assert row_counts() == before


def test_the_gate_command_refuses_a_draft_over_the_limit_naming_it(org, settings, tmp_path):
    settings.MAX_DRAFT_BYTES = 10_000
    path = tmp_path / "long.md"
    path.write_text("# Long\n\n" + "word " * 5_000)
    with pytest.raises(CommandError, match="MAX_DRAFT_BYTES"):
        call_command("gate", str(path), "--source", SOURCE, stdout=StringIO())
    assert Draft.objects.count() == 0

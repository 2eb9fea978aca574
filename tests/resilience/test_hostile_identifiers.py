"""Identifiers a pipeline sends refuse control characters (issue 20, defect 2): an application, a run, a tool call or
a labeller is matched and shown, never read as text, and a TAB or a line break in one is a broken record, a cell a
spreadsheet reads as a formula or a log line split in two. Each is a 400 naming the field, and nothing is written."""

import pytest

from grading.models import Label
from tests.builders.api_calls import api_caller, error_fields, row_counts
from tests.builders.conversations import message, support_conversation, upsert
from tests.builders.drafts import CLEAN_BODY, SOURCE

pytestmark = pytest.mark.django_db

CONTROL = ["\t", "\r", "\n", "\x1b", "\x7f", "\x85"]


@pytest.fixture
def api(client, org):
    return api_caller(client, org)


@pytest.mark.parametrize("control", CONTROL)
def test_it_refuses_an_application_with_a_control_character_naming_the_field(api, control):
    before = row_counts()
    response = api("post", "/conversations", support_conversation(application=f"{control}billing"))
    assert response.status_code == 400
    assert error_fields(response) == ["application"]
    assert row_counts() == before


def test_it_refuses_a_tool_call_id_or_a_name_with_a_control_character_naming_the_field(api):
    payload = support_conversation()
    payload["messages"][2]["tool_call_id"] = "call\t1"
    payload["messages"][0]["name"] = "dana\r\n"
    before = row_counts()
    response = api("post", "/conversations", payload)
    assert response.status_code == 400
    assert sorted(error_fields(response)) == ["messages.0.name", "messages.2.tool_call_id"]
    assert row_counts() == before
    api("post", "/conversations", support_conversation())
    more = {"messages": [message("m5", "user", "Hi", "m4", 9, name="\tx")]}
    appended = api("post", "/conversations/cv-1/messages", more)
    assert appended.status_code == 400 and error_fields(appended) == ["messages.0.name"]


def test_it_refuses_a_draft_run_id_with_a_control_character_naming_the_field(api):
    draft = {"external_id": "d-1", "title": "T", "slug": "t", "body": CLEAN_BODY, "source_urls": [SOURCE]}
    before = row_counts()
    response = api("post", "/drafts", draft | {"run_id": "run\t7"})
    assert response.status_code == 400
    assert error_fields(response) == ["run_id"]
    assert row_counts() == before


@pytest.mark.parametrize("field", ["item", "labeller"])
def test_it_refuses_a_label_whose_item_or_labeller_holds_a_control_character(api, org, field):
    upsert(org, support_conversation("cv-1"))
    good = {"item": "cv-1", "check": "grounded", "verdict": "fail", "labeller": "ann"}
    response = api("post", "/labels", {"labels": [{**good, field: "ann\tcv-1" if field == "labeller" else "cv-1\x1b"}]})
    assert response.status_code == 400
    assert error_fields(response) == [f"labels.0.{field}"]
    assert not Label.objects.exists()

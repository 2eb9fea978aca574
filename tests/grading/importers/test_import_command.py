"""`manage.py import_conversations` on the fixtures, twice: the second run changes nothing."""

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from grading.conversations.grader import conversation_grade
from grading.judge.backends import HeuristicJudge
from grading.models import Conversation, Message

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "imports"

CASES = [
    ("openai", "openai-tools.jsonl"),
    ("openai", "openai-branches.json"),
    ("chatgpt", "chatgpt-librechat-sample.json"),
    ("openwebui", "openwebui-librechat-sample.json"),
    ("openwebui", "openwebui-branches.json"),
]


def run_import(fmt: str, name: str, *extra: str) -> tuple[list[dict], str, bool]:
    out, err = StringIO(), StringIO()
    failed = False
    try:
        call_command(
            "import_conversations", str(FIXTURES / name), "--format", fmt, "--json", *extra, stdout=out, stderr=err
        )
    except CommandError:
        failed = True
    return [json.loads(line) for line in out.getvalue().splitlines()], err.getvalue(), failed


def snapshot() -> list[tuple]:
    rows = Conversation.objects.order_by("pk").values_list(
        "external_id", "fingerprint", "updated_at", "last_activity_at"
    )
    return [*rows, Message.objects.count()]


@pytest.mark.parametrize(("fmt", "name"), CASES)
def test_importing_a_file_twice_changes_nothing(org, fmt, name):
    first, _, _ = run_import(fmt, name)
    assert first, "the fixture imported no conversation"
    before = snapshot()
    second, _, _ = run_import(fmt, name)
    assert second == first
    assert snapshot() == before


@pytest.mark.parametrize(("fmt", "name"), CASES)
def test_each_line_names_the_evidence_of_a_stored_conversation(org, fmt, name):
    lines, _, _ = run_import(fmt, name)
    for line in lines:
        conversation = Conversation.objects.get(org=org, external_id=line["external_id"])
        assert line["fingerprint"] == conversation.fingerprint
        assert line["active_path"] == conversation.active_path_ids
        assert line["scorable"] == (line["not_scorable_reason"] is None)


def test_the_chatgpt_sample_keeps_its_current_node_and_hidden_messages(org):
    [line], _, _ = run_import("chatgpt", "chatgpt-librechat-sample.json")
    sample = json.loads((FIXTURES / "chatgpt-librechat-sample.json").read_text())[0]
    assert line["active_path"][-1] == sample["current_node"]
    conversation = Conversation.objects.get(external_id=line["external_id"])
    assert conversation.branch_count > 1
    assert conversation.messages.filter(hidden=True, external_id__in=line["active_path"]).exists()


def test_a_bad_conversation_is_reported_by_id_and_the_others_are_imported(org):
    lines, errors, failed = run_import("chatgpt", "chatgpt-tools-branches.json")
    assert failed
    assert "not imported" in errors
    assert lines  # the good ones went in
    assert Conversation.objects.count() == len(lines)


def test_an_unreadable_file_is_a_clear_error(org, tmp_path):
    junk = tmp_path / "junk.json"
    junk.write_text("this is not json")
    with pytest.raises(CommandError, match="junk.json"):
        call_command("import_conversations", str(junk), "--format", "openai")


def test_reimporting_a_graded_conversation_reports_its_current_review(org):
    first, _, _ = run_import("openai", "openai-branches.json")
    line = first[0]
    conversation_grade(
        conversation_id=Conversation.objects.get(external_id=line["external_id"]).pk, judge=HeuristicJudge()
    )
    again, _, _ = run_import("openai", "openai-branches.json")
    reported = next(entry for entry in again if entry["external_id"] == line["external_id"])
    assert reported["review"]["identity"]["fingerprint"] == line["fingerprint"]


def test_it_refuses_a_conversation_with_a_time_out_of_range_naming_it_rather_than_storing_the_import_time(
    org, tmp_path
):
    """m3 sits on an abandoned branch. Stored with the import time instead of its own, it became the newest leaf
    and the active path: the conversation is refused, naming the message and its time, and the rest imports."""
    messages = [
        {"id": "m1", "role": "user", "content": "Refund order 1182?", "created_at": "2024-05-01T10:00:00Z"},
        {"id": "m2", "parent_id": "m1", "role": "assistant", "content": "Done.", "created_at": "2024-05-01T10:01:00Z"},
        {"id": "m3", "parent_id": "m1", "role": "assistant", "content": "No.", "created_at": "0001-01-01T00:00+01:00"},
    ]
    lines = [{"id": "c1", "messages": messages}, {"id": "c2", "messages": messages[:2]}]
    path = tmp_path / "export.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines))

    imported, errors, failed = run_import("openai", str(path))

    assert failed and [line["external_id"] for line in imported] == ["c2"]
    assert errors.splitlines() == [
        "c1: not imported: message 'm3' created_at '0001-01-01T00:00+01:00' is outside the years 1 to 9999 "
        "once converted to UTC"
    ]
    assert not Conversation.objects.filter(external_id="c1").exists()

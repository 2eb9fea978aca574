"""Hostile export files through the importers and `manage.py import_conversations`, generated (issue 11, Build 6).

Whatever a file holds: the command finishes (or refuses the whole file with a CommandError), every conversation it
does not import is named with the reason, a conversation that fails writes nothing while the others are imported,
and importing the same file again changes nothing.
"""

import json
import re
import uuid
from collections import Counter
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from grading.importers import ImportFormatError, ParsedConversation, parse_file
from grading.models import Conversation, Message, Org
from tests.builders.hostile_values import hostile_ids, hostile_text, numbers, time_values

pytestmark = pytest.mark.django_db
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))

ID_POOL = ["a", "b", "c", "d"]  # shared by messages, so twins, cycles and orphans come up often
ids = st.one_of(st.sampled_from(ID_POOL), st.sampled_from(ID_POOL), hostile_ids)
roles = st.sampled_from(["user", "assistant", "tool", "system", "developer", "function", "robot"])
texts = st.one_of(st.just("Hello there."), hostile_text)
epochs = st.one_of(st.none(), numbers, st.sampled_from([1.7e9, 1.7e12, 1.7e15, 1.7e18, -62135596800, 253402300800]))


def openai_conversation():
    message = st.fixed_dictionaries(
        {"role": roles, "content": st.one_of(texts, st.none(), st.lists(texts, max_size=2))},
        optional={"id": ids, "parent_id": st.one_of(st.none(), ids), "created_at": time_values, "tool_call_id": ids},
    )
    return st.fixed_dictionaries(
        {"id": ids, "messages": st.lists(message, max_size=6)}, optional={"active_message_id": ids}
    )


def chatgpt_conversation():
    node = st.fixed_dictionaries(
        {
            "parent": st.one_of(st.none(), ids),
            "message": st.one_of(
                st.none(),
                st.fixed_dictionaries(
                    {
                        "author": st.fixed_dictionaries({"role": roles}),
                        "content": st.fixed_dictionaries(
                            {"content_type": st.just("text"), "parts": st.lists(texts, max_size=2)}
                        ),
                        "create_time": epochs,
                        "status": st.sampled_from(["finished_successfully", "in_progress"]),
                        "recipient": st.sampled_from(["all", "python"]),
                    }
                ),
            ),
        }
    )
    return st.fixed_dictionaries(
        {"conversation_id": ids, "mapping": st.dictionaries(ids, node, max_size=6)},
        optional={"current_node": ids, "title": texts},
    )


def openwebui_conversation():
    message = st.fixed_dictionaries(
        {"role": roles, "content": texts},
        optional={"parentId": st.one_of(st.none(), ids), "timestamp": epochs, "done": st.booleans()},
    )
    history = st.fixed_dictionaries(
        {"messages": st.dictionaries(ids, message, max_size=6)}, optional={"currentId": ids}
    )
    return st.fixed_dictionaries({"id": ids, "chat": st.fixed_dictionaries({"history": history})})


CONVERSATIONS = {
    "openai": openai_conversation(),
    "chatgpt": chatgpt_conversation(),
    "openwebui": openwebui_conversation(),
}


@st.composite
def export_files(draw, fmt: str) -> bytes:
    """A file of the format as a tool might write it, then perhaps damaged the ways files get damaged."""
    conversations = draw(st.lists(CONVERSATIONS[fmt], min_size=1, max_size=4))
    if fmt == "chatgpt":  # ChatGPT nodes repeat their key as their id
        for conversation in conversations:
            for key, node in conversation["mapping"].items():
                node["id"] = key
                if node["message"] is not None:
                    node["message"]["id"] = key
    if draw(st.booleans()):
        text = "\n".join(json.dumps(conversation) for conversation in conversations)  # JSONL
    else:
        text = json.dumps(conversations, indent=draw(st.sampled_from([None, 2])))
    data = text.encode("utf-8", "surrogatepass")  # lone surrogates become bytes no UTF-8 reader accepts
    damage = draw(st.sampled_from(["none", "none", "none", "bom", "invalid utf-8", "nul", "truncated"]))
    if damage == "bom":
        data = b"\xef\xbb\xbf" + data
    elif damage == "invalid utf-8":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + b"\xff\xc3(" + data[at:]
    elif damage == "nul":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + b"\x00" + data[at:]
    elif damage == "truncated":
        data = data[: draw(st.integers(0, max(0, len(data) - 1)))]
    event(f"damage {damage}")
    return data


def run_import(path, fmt: str, org: Org) -> tuple[list[str], list[str], str | None]:
    """(ids imported, one line per conversation not imported, the command's error if it exited with one)."""
    out, err = StringIO(), StringIO()
    error = None
    try:
        call_command(
            "import_conversations", str(path), "--format", fmt, "--org", org.slug, "--json", stdout=out, stderr=err
        )
    except CommandError as exc:
        error = str(exc)
    imported = [json.loads(line)["external_id"] for line in out.getvalue().splitlines()]
    progress = re.compile(r"conversations: [\d,]+ of [\d,]+, ")  # a slow run's progress lines
    return imported, [line for line in err.getvalue().splitlines() if not progress.match(line)], error


def stored(org: Org) -> tuple:
    conversations = Conversation.objects.filter(org=org).order_by("external_id")
    return (
        list(conversations.values_list("external_id", "fingerprint", "updated_at", "message_count")),
        Message.objects.filter(conversation__org=org).count(),
    )


@pytest.mark.parametrize("fmt", ["openai", "chatgpt", "openwebui"])
def test_a_hostile_export_file_imports_what_it_can_names_what_it_cannot_and_writes_nothing_half(fmt, tmp_path):
    @FUZZ
    @given(data=export_files(fmt))
    def check(data: bytes) -> None:
        org = Org.objects.create(name="Import", slug=f"import-{uuid.uuid4().hex[:12]}")
        path = tmp_path / f"{uuid.uuid4().hex}.json"
        path.write_bytes(data)
        try:
            results = parse_file(fmt, path)
        except ImportFormatError:
            results = None  # the whole file is unreadable: the command must say so and write nothing
        imported, failures, error = run_import(path, fmt, org)
        event("file refused" if results is None else f"{len(imported)} of {len(results)} imported")
        if results is None:
            assert error and str(path) in error and imported == failures == [] and stored(org) == ([], 0)
            return
        assert len(imported) + len(failures) == len(results)  # every conversation is accounted for, once
        assert all(": not imported: " in line for line in failures)
        assert (error is not None) == bool(failures)
        # Nothing half-written: exactly the imported conversations exist, each with all of its messages.
        rows, message_rows = stored(org)
        assert sorted({external_id for external_id, *_ in rows}) == sorted(set(imported))
        payloads = [r.payload for r in results if isinstance(r, ParsedConversation)]
        once = Counter(payload["external_id"] for payload in payloads)
        sizes = {payload["external_id"]: len(payload["messages"]) for payload in payloads}
        assert message_rows == sum(count for *_, count in rows)
        for external_id, _, _, count in rows:
            assert once[external_id] > 1 or count == sizes[external_id]
        # And again: the same answers, and no row changed (unless the file says two things about one conversation).
        again, failures_again, _ = run_import(path, fmt, org)
        assert (again, len(failures_again)) == (imported, len(failures))
        if all(count == 1 for count in once.values()):
            assert stored(org) == (rows, message_rows)

    check()


@pytest.mark.slow
def test_an_import_reaches_the_conversations_after_a_hundred_thousand_deep_one_and_a_ten_megabyte_one(org, tmp_path):
    deep = [
        {"id": f"m{i}", "parent_id": f"m{i - 1}" if i else None, "role": "user", "content": "ok"}
        for i in range(100_000)
    ]
    rootless = [dict(message, parent_id=f"m{(i - 1) % 50}") for i, message in enumerate(deep[:50])]
    lines = [
        {"id": "deep", "messages": deep},
        {"id": "huge", "messages": [{"role": "user", "content": "x" * 10_000_000}]},
        {"id": "rootless", "messages": rootless},
        {"id": "slash/id", "messages": [{"role": "user", "content": "hi"}]},
        {"id": "bidi\u202eevil", "messages": [{"role": "user", "content": "a\u200bb"}]},
        {"id": "fine", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello."}]},
    ]
    path = tmp_path / "export.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines))
    imported, failures, error = run_import(path, "openai", org)
    assert error and imported == ["rootless", "bidi\u202eevil", "fine"]
    assert [line.split(": not imported: ")[0] for line in failures] == ["deep", "huge", "slash/id"]
    assert "MAX_MESSAGES_PER_CONVERSATION" in failures[0] and "MAX_MESSAGE_BYTES" in failures[1]
    assert "external_id" in failures[2]
    assert not Conversation.objects.filter(external_id__in=["deep", "huge", "slash/id"]).exists()
    assert Conversation.objects.get(external_id="rootless").message_count == 50
    [result] = [r for r in parse_file("openai", json.dumps({"id": "deep", "messages": deep})) if r]
    assert len(result.payload["messages"]) == 100_000  # parsed without recursion: the limit is what refused it


def test_an_epoch_too_large_for_a_float_refuses_its_conversation_not_the_file():
    text = json.dumps([
        {"id": "c1", "messages": [{"role": "user", "content": "hi", "created_at": 10**400}]},
        {"id": "c2", "messages": [{"role": "user", "content": "hi", "created_at": 1.7e9}]},
    ])  # fmt: skip
    refused, parsed = parse_file("openai", text)
    assert refused.external_id == "c1" and "outside the years 1 to 9999" in refused.reason
    assert len(refused.reason) < 200  # the 401 digits are not repeated back whole
    assert parsed.payload["messages"][0]["created_at"] == "2023-11-14T22:13:20+00:00"


def test_a_failure_line_cannot_be_forged_or_reordered_by_the_id_it_names(org, tmp_path):
    path = tmp_path / "export.jsonl"
    forged = "x\nfine: 1 messages on the path, scorable\u202e"
    path.write_text(json.dumps({"id": forged, "messages": [{"role": "user", "content": "hi"}]}))
    _, failures, error = run_import(path, "openai", org)
    assert error and len(failures) == 1
    assert failures[0].startswith("x\\nfine: 1 messages on the path, scorable\\u202e: not imported: external_id")


def test_an_export_without_ids_whose_text_holds_a_lone_surrogate_is_named_not_imported_and_the_rest_imports(
    org, tmp_path
):
    """Found by the fuzz test above: a conversation with no id gets one from a hash of its messages, and hashing
    text JSON escaped as \\ud800 raised UnicodeEncodeError, which stopped the whole import."""
    path = tmp_path / "export.jsonl"
    lines = [
        {"messages": [{"role": "user", "content": "broken \ud800 text"}]},
        {"id": "fine", "messages": [{"role": "user", "content": "hi"}]},
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines))  # ASCII JSON: the surrogate as an escape
    imported, failures, error = run_import(path, "openai", org)
    assert error and imported == ["fine"]
    [failure] = failures
    assert failure.startswith("openai-") and "lone surrogate" in failure
    assert list(Conversation.objects.filter(org=org).values_list("external_id", flat=True)) == ["fine"]

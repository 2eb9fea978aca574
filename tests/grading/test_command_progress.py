"""Long commands say how far they have come, on stderr: a bar with counts, rate and time left on a terminal,
plain lines in a pipe or a log, and the summary they always printed. Commands that need the org say which orgs
there are and what to run on a database that is not set up."""

import contextlib
import json
import os
import pty
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import connection

from grading.management import progress
from grading.models import Org
from tests.builders.drafts import CLEAN_BODY, SOURCE, save_draft, setup_org_memory
from tests.builders.processes import REPO_ROOT, database_url

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "imports"


@pytest.fixture
def long_commands(org, tmp_path, settings) -> dict[str, tuple[list[str], str, int]]:
    """Each long command, on a small input: its arguments, what its progress counts and how many."""
    settings.EMBEDDINGS_BACKEND = "hashing"
    save_draft(org, external_id="d1")
    drafts = [tmp_path / f"post-{n}.md" for n in range(2)]
    for draft in drafts:
        draft.write_text(f"# {draft.stem}\n\n{CLEAN_BODY}")
    labels = tmp_path / "labels.csv"
    labels.write_text("item,check,verdict,labeller\n" + "".join(f"d1,pass/fail,pass,{who}\n" for who in "abc"))
    memory = tmp_path / "memory.jsonl"
    memory.write_text("".join(json.dumps({"kind": "learning", "text": f"Learning {n}."}) + "\n" for n in range(4)))
    return {
        "import_conversations": (
            ["import_conversations", str(FIXTURES / "openai-branches.json"), "--format", "openai"],
            "conversations",
            len(json.loads((FIXTURES / "openai-branches.json").read_text())),
        ),
        "import_labels": (["import_labels", str(labels), "--org", org.slug], "label rows", 3),
        "memory import": (["memory", "import", "--org", org.slug, str(memory)], "lines", 4),
        "memory reembed": (["memory", "reembed", "--org", org.slug], "items re-embedded", 4),
        "gate": (["gate", *map(str, drafts), "--org", org.slug, "--source", SOURCE], "drafts", 2),
    }


COMMANDS = ["import_conversations", "import_labels", "memory import", "memory reembed", "gate"]


def run(arguments: list[str], *, stderr) -> str:
    out = StringIO()
    with contextlib.suppress(SystemExit):  # gate exits with its verdict
        call_command(*arguments, stdout=out, stderr=stderr)
    return out.getvalue()


@pytest.mark.parametrize("command", COMMANDS)
def test_in_a_pipe_it_writes_a_plain_line_now_and_then(long_commands, command, monkeypatch):
    if command == "memory reembed":
        run(long_commands["memory import"][0], stderr=StringIO())
    arguments, what, total = long_commands[command]
    monkeypatch.setattr(progress, "PLAIN_EVERY_SECONDS", 0.0)  # a line at every step
    err = StringIO()
    out = run(arguments, stderr=err)

    lines = [line for line in err.getvalue().splitlines() if line.startswith(f"{what}: ")]
    assert lines[-1].startswith(f"{what}: {total} of {total}, ") and lines[-1].endswith("about 0 s left")
    assert all("/s, about " in line for line in lines)
    assert "\x1b" not in err.getvalue()  # no terminal codes in a log
    assert out  # the summary or the per-item lines it always printed, on stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_on_a_terminal_it_draws_a_bar_with_counts_rate_and_time_left(long_commands, command):
    if command == "memory reembed":
        run(long_commands["memory import"][0], stderr=StringIO())
    arguments, what, total = long_commands[command]
    controller, terminal = pty.openpty()
    with os.fdopen(terminal, "w") as stderr:
        run(arguments, stderr=stderr)
    drawn = read_all(controller)

    assert what in drawn and f"{total}/{total}" in drawn and "/s" in drawn
    assert "\x1b[" in drawn and "━" in drawn  # drawn in place, with a bar
    assert f"{what}: " not in drawn  # not the plain lines


def read_all(fd: int) -> str:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the terminal's other end is closed: all is read
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks).decode()


def test_gate_over_several_files_reports_each_and_exits_with_the_highest_code(org, tmp_path):
    setup_org_memory(org)
    passing, failing = tmp_path / "clean.md", tmp_path / "delve.md"
    passing.write_text(f"# Clean\n\n{CLEAN_BODY}")
    failing.write_text("# Delve\n\n" + CLEAN_BODY.replace("Start with the questions", "Delve into the questions"))
    out = StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("gate", str(passing), str(failing), "--org", org.slug, "--source", SOURCE, "--json", stdout=out)
    assert exited.value.code == 1
    assert [json.loads(line)["route"] for line in out.getvalue().splitlines()] == ["pass", "fail"]


def test_an_unknown_org_or_a_missing_one_is_refused_with_the_orgs_there_are(org, other_org):
    arguments = ["import_conversations", str(FIXTURES / "openai-tools.jsonl"), "--format", "openai"]
    with pytest.raises(CommandError) as unknown:
        run([*arguments, "--org", "nowhere"], stderr=StringIO())
    assert str(unknown.value) == "no org with slug 'nowhere'; orgs here: globex, northwind"
    with pytest.raises(CommandError, match="say which org with --org SLUG; orgs here: globex, northwind"):
        run(arguments, stderr=StringIO())
    Org.objects.all().delete()
    with pytest.raises(CommandError, match="there is no org yet"):
        run(arguments, stderr=StringIO())


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_on_a_database_that_is_not_migrated_a_command_says_to_migrate(tmp_path):
    """A fresh data directory before `migrate`: the command names what to run instead of a traceback."""
    empty = f"tollgate_unmigrated_{os.getpid()}"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE {empty}")
    try:
        draft = tmp_path / "post.md"
        draft.write_text("# A post\n\nText.\n")
        answer = subprocess.run(
            [sys.executable, "manage.py", "gate", str(draft)],
            cwd=REPO_ROOT,
            env=os.environ | {"DATABASE_URL": database_url(settings.DATABASES["default"] | {"NAME": empty})},
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP DATABASE {empty}")
    assert answer.returncode == 1
    assert "Traceback" not in answer.stderr
    assert "the database is not set up yet" in answer.stderr and "manage.py migrate" in answer.stderr

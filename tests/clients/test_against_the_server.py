"""The client and the `tollgate` command against the running test server (real HTTP, a real worker, the fake judge):
submit and wait, gate a folder with exit codes and annotations, import, export, the audit trail's pages."""

import json
import subprocess
import sys
from dataclasses import fields
from io import StringIO
from pathlib import Path

import httpx
import pytest
from django.db.models import DateField
from django.db.models.functions import TruncWeek
from django.test import Client
from django.urls import reverse
from tollgate_client import AsyncTollgate, InvalidRequest, Tollgate
from tollgate_client.cli import main
from tollgate_client.models import DraftStatus

from grading.api.keys import api_key_create
from grading.importers import ParseFailure, parse_file
from grading.models import Conversation, Review
from grading.passes.planner import grading_pass
from tests.builders.audit_events import events_at
from tests.builders.conversations import PATH_IDS, support_conversation, verdicts_reply
from tests.builders.corrections import draft_correction
from tests.builders.drafts import CLEAN_BODY, SOURCE, draft_reply, setup_org_memory
from tests.builders.event_loops import run_apart
from tests.builders.judges import configure_judges, judge_config
from tests.builders.processes import wait_until
from tests.builders.queue_items import conversation_item, draft_item
from tests.builders.scored_trials import decide, graded_conversations, judge_per_item
from tests.builders.tokens import token_of
from tests.fakes.openai_server import FakeLLM

pytestmark = pytest.mark.django_db(transaction=True)

MARGINAL = "Marginal drafts say so here."  # the fake judge contradicts itself on a draft holding this: people decide
BANNED = "leverage"  # a banned word: a finding the gate fails, with its position
# The em dash before it is repaired (a banned character with a substitute): the finding's offset is into the repaired
# body, and the command maps it back to the file.
FAILING_BODY = CLEAN_BODY.replace("Start with", f"Now \u2014 to {BANNED} them \u2014 start with")


SET_PASS = {"grounded": "pass", "complete": "pass", "usable": "pass"}
SET_PEOPLE = {0: SET_PASS, 1: {**SET_PASS, "grounded": "fail"}, 2: {**SET_PASS, "complete": "fail"}, 3: SET_PASS}


def judge_by_body(fake_llm: FakeLLM) -> None:
    def reply(request: dict):
        prompt = json.dumps(request.get("messages"))
        return draft_reply(8, passed=False) if MARGINAL in prompt else draft_reply(8)

    fake_llm.set_default(reply)


@pytest.fixture
def key(org) -> str:
    setup_org_memory(org)
    return api_key_create(org=org, name="ci").plaintext


@pytest.fixture
def tollgate(live_server, key):
    with Tollgate(live_server.url, key) as client:
        yield client


def submission(external_id: str, body: str = CLEAN_BODY) -> dict:
    return {"title": "Cutting support costs with self-service", "slug": "cutting-support-costs", "body": body,
            "external_id": external_id, "source_urls": [SOURCE]}  # fmt: skip


def test_it_submits_a_draft_and_waits_for_its_verdict(tollgate, live_server, key, celery_worker, fake_llm):
    judge_by_body(fake_llm)
    status = tollgate.submit_draft(**submission("run-1/a"), wait=True, timeout=60)

    assert (status.route, status.findings, status.score) == ("pass", [], 8)
    assert status.identity["criteria_version"] == 1
    answer = httpx.get(f"{live_server.url}/api/v1/drafts/{status.id}", headers={"Authorization": f"Bearer {key}"})
    # The draft's status is untyped in the OpenAPI document: its model is checked against the answer itself
    # (`waiting` is only in a pending draft's answer).
    assert {f.name for f in fields(DraftStatus)} == set(answer.json()) | {"waiting"}


def test_the_async_client_waits_for_a_failing_verdict_with_its_findings(live_server, key, celery_worker, fake_llm):
    judge_by_body(fake_llm)

    async def submit():
        async with AsyncTollgate(live_server.url, key) as client:
            return await client.submit_draft(**submission("run-1/b", FAILING_BODY), wait=True, timeout=60)

    status = run_apart(submit())
    assert status.route == "fail"
    (finding,) = status.findings
    assert finding.subject == BANNED and finding.spans
    assert "\u2014" not in status.repairs["body"]


def test_a_refused_draft_raises_with_the_servers_field_errors(tollgate):
    with pytest.raises(InvalidRequest) as refused:
        tollgate.submit_draft(**submission("run-1/c") | {"slug": "Not A Slug"})
    assert [e.field for e in refused.value.errors] == ["slug"]


def _folder(tmp_path: Path, *names: str) -> Path:
    folder = tmp_path / "drafts"
    folder.mkdir(exist_ok=True)
    bodies = {
        "pass.md": CLEAN_BODY,
        "fail.md": FAILING_BODY,
        "marginal.md": CLEAN_BODY.replace("Review them every month.", f"Review them every month. {MARGINAL}"),
    }
    for name in names:
        front = f"---\ntitle: Cutting support costs\nsource_urls:\n  - {SOURCE}\n---\n"
        (folder / name).write_text(front + bodies[name])
    return folder


class Terminal(StringIO):
    def isatty(self) -> bool:
        return True


def _gate(live_server, key, *args: str, stderr: StringIO | None = None) -> tuple[int, str]:
    out, err = StringIO(), stderr or StringIO()
    code = main(["gate", "--url", live_server.url, "--token", key, "--timeout", "60", *args], stdout=out, stderr=err)
    return code, out.getvalue()


def test_gate_exits_1_on_a_failing_draft_and_points_at_the_finding(
    tmp_path, live_server, key, celery_worker, fake_llm, monkeypatch
):
    judge_by_body(fake_llm)
    monkeypatch.chdir(tmp_path)
    _folder(tmp_path, "pass.md", "fail.md", "marginal.md")
    text = (tmp_path / "drafts" / "fail.md").read_text()
    line = text[: text.index(BANNED)].count("\n") + 1
    col = text.index(BANNED) - text.rindex("\n", 0, text.index(BANNED))

    terminal, pipe = Terminal(), StringIO()
    code, out = _gate(live_server, key, "drafts", stderr=terminal)
    assert code == 1
    assert (
        "3/3 submitted" in terminal.getvalue()
        and "\r[##############################] 3/3 graded" in terminal.getvalue()
    )
    lines = out.splitlines()
    assert [x for x in lines if x.startswith("drafts/fail.md:")][0].startswith(f"drafts/fail.md:{line}:{col}: ")
    assert "drafts/pass.md: passed, score 8" in lines
    assert any(x.startswith("drafts/marginal.md: need a person") for x in lines)

    code, out = _gate(live_server, key, "--format", "github", "drafts", stderr=pipe)
    assert code == 1
    assert pipe.getvalue() == "tollgate: 3 draft(s): 1 failed, 1 need a person, 1 passed\n"  # no progress in a pipe
    assert f"::error file=drafts/fail.md,line={line},col={col},title=Tollgate::" in out
    assert "::warning file=drafts/marginal.md,title=Tollgate::need a person" in out

    code, out = _gate(live_server, key, "--json", "drafts/pass.md", "drafts/marginal.md")
    assert code == 2
    assert [d["route"] for d in json.loads(out)["drafts"]] == ["pass", "human"]


def test_the_installed_tollgate_command_gates_a_folder_that_passes(tmp_path, live_server, key, celery_worker, fake_llm):
    judge_by_body(fake_llm)
    _folder(tmp_path, "pass.md")
    command = Path(sys.executable).parent / "tollgate"
    assert command.exists(), "the tollgate console script is not installed: make install-dev"
    env = {"PATH": "/usr/bin:/bin", "TOLLGATE_URL": live_server.url, "TOLLGATE_TOKEN": key,
           "TOLLGATE_CONFIG": str(tmp_path / "none.toml")}  # fmt: skip
    done = subprocess.run([command, "gate", "drafts"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (0, "drafts/pass.md: passed, score 8\n"), done.stderr


def test_it_imports_conversations_and_reads_their_review(tmp_path, tollgate, live_server, key, celery_worker, fake_llm):
    lines = [support_conversation("cv-1"), {"external_id": "cv-2", "messages": "not a list"}]
    (tmp_path / "export.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    out, err = StringIO(), StringIO()

    code = main(["conversations", "import", str(tmp_path / "export.jsonl"), "--url", live_server.url, "--token", key],
                stdout=out, stderr=err)  # fmt: skip

    assert code == 1
    assert out.getvalue() == "cv-1: 4 messages on the path, scorable\n"
    assert err.getvalue().startswith("cv-2: not imported: messages: ")
    fake_llm.set_default(verdicts_reply(PATH_IDS))
    grading_pass()
    review = wait_until(lambda: tollgate.review("cv-1"), message="the worker's review of cv-1")
    assert (review.route, review.identity.criteria_version) == ("pass", 1)
    out = StringIO()
    assert main(["conversations", "show", "cv-1", "--url", live_server.url, "--token", key], stdout=out) == 0
    assert out.getvalue().splitlines()[:2] == ["cv-1: 4 messages on the path", "route pass, state current"]


def test_it_imports_an_export_format_through_tollgates_own_importers(live_server, key, org):
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "imports" / "openwebui-branches.json"
    results = parse_file("openwebui", fixture)
    (bad,) = [r for r in results if isinstance(r, ParseFailure)]
    out, err = StringIO(), StringIO()

    command = ["conversations", "import", str(fixture), "--format", "openwebui", "--json"]
    assert main([*command, "--url", live_server.url, "--token", key], stdout=out, stderr=err) == 1

    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    stored = dict(Conversation.objects.filter(org=org).values_list("external_id", "fingerprint"))
    assert {line["external_id"]: line["fingerprint"] for line in lines} == stored
    assert set(stored) == {r.payload["external_id"] for r in results if not isinstance(r, ParseFailure)}
    assert err.getvalue().startswith(f"{bad.external_id}: not imported: {bad.reason}\n")


def test_the_command_shows_the_active_criteria(live_server, key):
    out = StringIO()
    assert main(["criteria", "show", "draft", "--json", "--url", live_server.url, "--token", key], stdout=out) == 0
    version = json.loads(out.getvalue())
    assert (version["kind"], version["criteria_version"], version["active"]) == ("draft", 1, True)


def test_it_exports_corrections_and_pages_through_the_audit_trail(tmp_path, tollgate, live_server, key, org, operator):
    review = draft_item(org)
    draft_correction(review, author=operator, corrected=review.draft.body + "\nOne more line.\n")
    events_at(org, review.finished_at, 5, action="test.paged")

    code = main(["export", "corrections", "-o", str(tmp_path / "c.jsonl"), "--url", live_server.url, "--token", key],
                stdout=StringIO(), stderr=StringIO())  # fmt: skip
    assert code == 0
    (row,) = [json.loads(line) for line in (tmp_path / "c.jsonl").read_text().splitlines()]
    assert row["corrected"].endswith("One more line.\n")

    events = list(tollgate.audit_events(action="test.paged", page_size=2))
    assert len(events) == 5 and len({event.id for event in events}) == 5
    csv = list(tollgate.export_audit_csv(action="test.paged"))
    assert len(csv) == 6  # the header and the five


# --- the reviews export, criteria versions, the queue and regression sets from the command ------------------------


def _command(live_server, token: str, *args: str, stdin=None, stderr=None) -> tuple[int, str, str]:
    out, err = StringIO(), stderr or StringIO()
    code = main([*args, "--url", live_server.url, "--token", token], stdout=out, stderr=err, stdin=stdin or StringIO())
    return code, out.getvalue(), err.getvalue()


def test_export_reviews_writes_what_the_pages_export_gives_the_same_person(tmp_path, live_server, key, org, operator):
    for n in range(3):
        draft_item(org, f"d-{n}")
    Review.objects.update(week=TruncWeek("finished_at", output_field=DateField()))  # counted in this week
    page = Client()
    page.force_login(operator)
    query = {"org": org.slug, "kind": "draft", "format": "csv"}
    expected = b"".join(page.get(reverse("dashboard_export"), query).streaming_content).decode()
    assert expected.count("\n") == 4  # the header and three reviews

    token = token_of(operator, org)
    terminal = Terminal()
    code, _, err = _command(
        live_server, token, "export", "reviews", "--kind", "draft", "-o", str(tmp_path / "r.csv"), stderr=terminal
    )
    assert code == 0, err
    assert "\r4 lines" in err and err.endswith(f"tollgate: 4 line(s) written to {tmp_path / 'r.csv'}\n")
    assert (tmp_path / "r.csv").read_bytes().decode() == expected  # byte for byte, its CRLF line ends too

    async def export_async() -> str:
        async with AsyncTollgate(live_server.url, token) as client:
            return "".join([chunk async for chunk in client.export_reviews(format="csv", kind="draft")])

    assert run_apart(export_async()) == expected

    code, out, _ = _command(live_server, key, "export", "reviews", "--kind", "draft", "--json", "--route", "fail")
    assert code == 0 and out == ""  # none of the three failed
    code, _, err = _command(live_server, key, "export", "reviews", "--check", "nope")
    assert code == 4 and "  query.check: must be one of" in err


def test_a_criteria_admin_clones_edits_and_publishes_a_version_from_the_command(
    tmp_path, live_server, org, criteria_admin, settings, fake_llm
):
    configure_judges(settings, default=judge_config(fake_llm))
    token = token_of(criteria_admin, org)
    code, out, err = _command(live_server, token, "criteria", "clone", "conversation", "--json")
    assert code == 0, err
    clone = json.loads(out)
    assert (clone["number"], clone["state"], clone["based_on"]["number"]) == (2, "draft", 1)

    (tmp_path / "rubric.md").write_text("grounded: every claim has support in the sources.\n")
    (tmp_path / "checks.json").write_text(json.dumps({"checks": [{"key": "Not A Key"}]}))
    version_id = str(clone["id"])
    code, out, err = _command(
        live_server, token, "criteria", "edit", version_id, "--rubric-file", str(tmp_path / "rubric.md")
    )
    assert code == 0, err
    code, _, err = _command(
        live_server, token, "criteria", "edit", version_id, "--checks-file", str(tmp_path / "checks.json")
    )
    assert code == 4 and err.startswith("tollgate: 400: ") and "\n  checks" in err  # each field on its own line

    # A trial from labels nobody gave is empty: done at once.
    code, out, err = _command(live_server, token, "criteria", "trial", version_id, "--source", "labels", "--wait")
    assert (
        code == 0
        and out.startswith("trial ")
        and ": 0 item(s) from labels, 0 judge call(s), 0 graded, finished\n" in out
    ), err

    code, out, err = _command(live_server, token, "criteria", "publish", version_id, stdin=Terminal("n\n"))
    assert code == 5 and out.startswith("publish v2 (judge ") and "in place of v1:" in out
    code, out, err = _command(live_server, token, "criteria", "publish", version_id, "--yes")
    assert (code, out.splitlines()[-1]) == (0, "published v2, replacing v1"), err
    code, out, _ = _command(live_server, token, "criteria", "versions", "conversation")
    assert [line.split(" ")[1:4] for line in out.splitlines()] == [["conversation", "v2", "published,"],
                                                                   ["conversation", "v1", "retired,"]]  # fmt: skip


def test_an_operator_lists_claims_and_decides_from_the_command_and_the_org_key_is_told_why_not(
    live_server, key, org, operator
):
    review = draft_item(org, "d-queue")
    token = token_of(operator, org)
    code, out, err = _command(live_server, token, "queue", "list", "--json")
    assert code == 0, err
    assert [item["review"] for item in json.loads(out)["items"]] == [review.pk]
    code, out, err = _command(live_server, token, "queue", "claim-next", "--kind", "draft")
    assert code == 0 and out.startswith(f"claimed {review.pk}: draft "), err
    code, out, err = _command(
        live_server, token, "queue", "decide", str(review.pk), "--outcome", "approve", "--note", "Reads well"
    )
    assert (code, out) == (0, f"{review.pk}: decided, approve\n"), err
    conversation = conversation_item(org, "cv-queue")
    code, out, err = _command(live_server, token, "queue", "decide", str(conversation.pk), "--check", "nope=pass")
    assert code == 4 and "\n  checks.nope: is not a check this item's criteria version asks\n" in err, err

    code, _, err = _command(live_server, key, "queue", "list")
    assert code == 3 and err.startswith("tollgate: 403: the queue's work is a person's: call it with a personal token")


def test_a_sets_run_under_its_bar_exits_1_and_at_its_bar_0(
    live_server, key, org, operator, settings, fake_llm, celery_worker
):
    configure_judges(settings, default=judge_config(fake_llm))
    conversations = graded_conversations(org, fake_llm, {n: SET_PASS for n in range(4)})
    for n, checks in SET_PEOPLE.items():
        decide(conversations[n], operator, checks)
    code, out, err = _command(live_server, key, "sets", "create", "refunds", "--from-decisions")
    assert (code, out) == (0, "refunds: conversation, 4 item(s), 0 skipped (no expected answer from decisions)\n"), err
    # The judge passes every check now: people failed one check on each of two items, so 12 of 16 answers agree.
    fake_llm.set_default(judge_per_item({n: SET_PASS for n in range(4)}))

    code, out, err = _command(live_server, key, "sets", "run", "refunds", "--version", "1", "--min-agreement", "0.9")
    assert code == 1, err
    lines = out.splitlines()
    assert lines[0].endswith(": done, 4/4 graded, 0 error(s)")
    table = {line.split()[0]: line.split()[1:3] for line in lines[2:7]}
    assert table == {"grounded": ["4", "3"], "complete": ["4", "3"], "usable": ["4", "4"], "pass_fail": ["4", "2"],
                     "overall": ["16", "12"]}  # fmt: skip
    assert "changed: cv-1 grounded: expected fail, answered pass" in lines
    assert lines[-1] == "agreement 75.0% is under the bar 90.0%"

    code, out, err = _command(live_server, key, "sets", "run", "refunds", "--version", "1", "--min-agreement", "0.75")
    assert (code, out.splitlines()[-1]) == (0, "agreement 75.0% holds the bar 75.0%"), err

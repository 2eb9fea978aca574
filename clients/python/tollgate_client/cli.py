"""The `tollgate` command: gate drafts in CI, import conversations, export, read criteria (docs/client.md).

Exit codes: 0 done (`gate`: every draft passed; `sets run --min-agreement`: the run held the bar); 1 `gate`: a draft
failed, `conversations import`: a conversation was not imported, `sets run --min-agreement`: the run's agreement is
under the bar; 2 `gate`: a draft needs a person and none failed; 3 Tollgate could not answer (unreachable, an error,
a refusal such as a 403 or 409, a draft graded `error` or `not_scorable`, a wait that timed out, a bad
configuration); 4 a usage error, or a request the server refused naming its fields (a 400: each printed on a line);
5 `criteria publish`: not confirmed."""

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, is_dataclass
from datetime import date, datetime
from pathlib import Path
from typing import IO, Any

from tollgate_client.client import Tollgate
from tollgate_client.errors import ApiError, InvalidRequest, TollgateError
from tollgate_client.files import DraftFile, DraftFileError, draft_file, draft_paths, spans_in_submitted
from tollgate_client.models import FAIL, HUMAN, PASS, Claim, DraftStatus, RegressionRun

OK, FAILED, NEEDS_PERSON, UNANSWERED, USAGE, NOT_CONFIRMED = 0, 1, 2, 3, 4, 5
IMPORT_FORMATS = ("api", "openai", "chatgpt", "openwebui")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse's own 2 would read as "needs a person"
        self.print_usage(sys.stderr)
        self.exit(USAGE, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    # The connection options and --json are accepted before the command and after it alike.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", default=argparse.SUPPRESS, help="Tollgate's base URL (TOLLGATE_URL)")
    common.add_argument("--token", default=argparse.SUPPRESS, help="an API token (TOLLGATE_TOKEN)")
    common.add_argument("--profile", default=argparse.SUPPRESS, help="the config file's profile (TOLLGATE_PROFILE)")
    common.add_argument("--config", default=argparse.SUPPRESS, help="the config file (TOLLGATE_CONFIG)")
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON")
    parser = _Parser(prog="tollgate", parents=[common], description="Tollgate from a terminal or CI.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    gate = commands.add_parser("gate", parents=[common], help="grade draft files; exit 0 pass, 1 fail, 2 a person")
    gate.add_argument("paths", nargs="+", metavar="PATH", help="draft files, or folders of .md/.markdown/.mdx/.txt")
    gate.add_argument("--format", choices=("text", "github"), default="text", help="github: Actions annotations")
    gate.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for the verdicts (900)")
    gate.add_argument("--run-id", default=None, help="the pipeline run the drafts belong to")
    gate.add_argument("--id-prefix", default="", help="prefixed to each file's path to make its draft's id")
    gate.add_argument("--source-url", action="append", default=[], help="a source URL every draft may cite")
    gate.add_argument("--concurrency", type=_positive, default=4, help="submissions in flight at once (4)")
    gate.set_defaults(run=_gate)

    conversations = commands.add_parser("conversations", parents=[common], help="import and read conversations")
    conversation_commands = conversations.add_subparsers(dest="action", required=True, parser_class=_Parser)
    importing = conversation_commands.add_parser("import", parents=[common], help="import an export file")
    importing.add_argument("file", type=Path)
    importing.add_argument(
        "--format",
        choices=IMPORT_FORMATS,
        default="api",
        help="api: the API's own bodies (a JSON list or JSONL); else the export's format",
    )
    importing.add_argument("--application", default=None, help="for conversations that name none (the format)")
    importing.set_defaults(run=_import)
    showing = conversation_commands.add_parser("show", parents=[common], help="a conversation's review")
    showing.add_argument("external_id")
    showing.set_defaults(run=_conversation)

    export = commands.add_parser("export", parents=[common], help="stream an export to stdout or a file")
    export.add_argument("what", choices=("reviews", "corrections", "audit"))
    export.add_argument("--output", "-o", type=Path, default=None, help="a file instead of stdout")
    export.add_argument(
        "--format", default=None, help="reviews and audit: csv (default) or jsonl; corrections: jsonl (default) or chat"
    )
    export.add_argument("--from", dest="since", default=None, help="reviews, corrections: an ISO week; audit: a date")
    export.add_argument("--to", dest="until", default=None, help="reviews, corrections: an ISO week; audit: a date")
    export.add_argument(
        "--kind", default=None, help="reviews: conversation, draft or any; corrections: draft or conversation"
    )
    export.add_argument("--application", default=None, help="reviews, corrections: one application")
    export.add_argument("--action", default=None, help="audit: an action or a family (claim)")
    export.add_argument("--slice", action="append", default=None, help="reviews: a dimension value, name=value")
    for name, what in _REVIEW_FILTERS.items():
        export.add_argument(f"--{name}", default=None, help=f"reviews: {what}")
    export.add_argument("--repaired", action="store_true", default=None, help="reviews: drafts the gate repaired")
    export.add_argument("--decided", action="store_true", default=None, help="reviews: by week of the decision")
    export.set_defaults(run=_export)

    criteria = commands.add_parser("criteria", parents=[common], help="criteria versions")
    criteria_commands = criteria.add_subparsers(dest="action", required=True, parser_class=_Parser)
    show = criteria_commands.add_parser("show", parents=[common], help="what a version asks (the active one)")
    show.add_argument("kind", choices=("draft", "conversation"))
    show.add_argument("--number", type=int, default=None, help="a version's number instead of the active one")
    show.set_defaults(run=_criteria)
    versions = criteria_commands.add_parser("versions", parents=[common], help="every version of a kind, newest first")
    versions.add_argument("kind", choices=("draft", "conversation"))
    versions.set_defaults(run=_criteria_versions)
    show_version = criteria_commands.add_parser("show-version", parents=[common], help="a version by its id, whole")
    show_version.add_argument("id", type=int)
    show_version.set_defaults(run=_criteria_show_version)
    clone = criteria_commands.add_parser("clone", parents=[common], help="a new unpublished version, cloned")
    clone.add_argument("kind", choices=("draft", "conversation"))
    clone.add_argument(
        "--from", dest="source", type=int, default=None, help="the id of the version to clone (the active)"
    )
    clone.set_defaults(run=_criteria_clone)
    edit = criteria_commands.add_parser("edit", parents=[common], help="replace parts of an unpublished version")
    edit.add_argument("id", type=int)
    edit.add_argument("--rubric-file", type=Path, default=None, help="the rubric, as text")
    edit.add_argument("--checks-file", type=Path, default=None, help="the checks document, as JSON")
    edit.add_argument("--rules-file", type=Path, default=None, help="drafts: the rules document, as JSON")
    edit.add_argument("--routing-file", type=Path, default=None, help="the routing list, as JSON")
    edit.add_argument("--revision", type=int, default=None, help="the revision you read (refused if saved since)")
    edit.set_defaults(run=_criteria_edit)
    trial = criteria_commands.add_parser("trial", parents=[common], help="grade a sample under the version")
    trial.add_argument("id", type=int)
    trial.add_argument("--k", type=_positive, default=20, help="items in the sample (20)")
    trial.add_argument("--source", default="current", help="current (default), audit, decisions or labels")
    trial.add_argument("--wait", action="store_true", help="wait for the trial and print its figures")
    trial.add_argument("--timeout", type=float, default=900.0, help="seconds to wait (900)")
    trial.set_defaults(run=_criteria_trial)
    publish = criteria_commands.add_parser("publish", parents=[common], help="print the plan, then publish as planned")
    publish.add_argument("id", type=int)
    publish.add_argument("--regrade-now", action="store_true", help="run a grading pass at once")
    publish.add_argument("--yes", "-y", action="store_true", help="no confirmation on a terminal")
    publish.set_defaults(run=_criteria_publish)

    queue = commands.add_parser("queue", parents=[common], help="the review queue")
    queue_commands = queue.add_subparsers(dest="action", required=True, parser_class=_Parser)
    service = queue_commands.add_parser("service", parents=[common], help="the queue's service-level figures")
    service.add_argument("--from", dest="since", default=None, help="an ISO week")
    service.add_argument("--to", dest="until", default=None, help="an ISO week")
    service.set_defaults(run=_queue_service)
    listing = queue_commands.add_parser("list", parents=[common], help="your queue (a personal token)")
    _queue_filters(listing)
    listing.add_argument("--limit", type=_positive, default=50, help="rows (50, at most 100)")
    listing.add_argument("--after", type=int, default=None, help="the `next` of the page before")
    listing.set_defaults(run=_queue_list)
    claiming = queue_commands.add_parser("claim-next", parents=[common], help="claim the next item yours to claim")
    _queue_filters(claiming)
    claiming.set_defaults(run=_queue_claim_next)
    deciding = queue_commands.add_parser("decide", parents=[common], help="decide (or answer) an item")
    deciding.add_argument("review", type=int)
    deciding.add_argument("--outcome", default="", help="a draft: approve, reject or send_back")
    deciding.add_argument("--check", action="append", default=[], metavar="KEY=ANSWER", help="a conversation's check")
    deciding.add_argument("--note", default="", help="why (a conversation's decision, a reject, a send back)")
    deciding.add_argument("--fingerprint", default=None, help="of the evidence you read (default: claim it again)")
    deciding.add_argument("--keep-as-learning", action="store_true", help="keep the note as an org learning")
    deciding.set_defaults(run=_queue_decide)

    regression = commands.add_parser("sets", parents=[common], help="regression sets")
    set_commands = regression.add_subparsers(dest="action", required=True, parser_class=_Parser)
    set_list = set_commands.add_parser("list", parents=[common], help="the org's sets, each with its last run")
    set_list.set_defaults(run=_sets_list)
    create = set_commands.add_parser("create", parents=[common], help="build a set with its expected answers")
    create.add_argument("name")
    source = create.add_mutually_exclusive_group(required=True)
    for name in ("decisions", "labels", "corrections"):
        source.add_argument(f"--from-{name}", dest="source", action="store_const", const=name, help=f"from {name}")
    create.add_argument("--kind", choices=("conversation", "draft"), default="conversation")
    create.add_argument("--application", default="", help="items of one application")
    create.add_argument("--since", default=None, help="an ISO week of the item's start")
    create.add_argument("--until", default=None, help="an ISO week of the item's start")
    create.add_argument("--dimension", action="append", default=[], metavar="NAME=VALUE", help="items filed so")
    create.add_argument("--id", dest="ids", action="append", default=None, help="an item's external id (not filters)")
    create.set_defaults(run=_sets_create)
    run = set_commands.add_parser("run", parents=[common], help="run a criteria version over a set")
    run.add_argument("name")
    run.add_argument("--version", type=_positive, required=True, help="the criteria version's number")
    run.add_argument("--min-agreement", type=float, default=None, help="the bar (0.9): waits; exit 1 under it")
    run.add_argument("--wait", action="store_true", help="wait for the run and print its figures")
    run.add_argument("--timeout", type=float, default=900.0, help="seconds to wait (900)")
    run.set_defaults(run=_sets_run)

    whoami = commands.add_parser("whoami", parents=[common], help="the org and key (or person) the token belongs to")
    whoami.set_defaults(run=_whoami)
    return parser


def _positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return number


def main(
    argv: Sequence[str] | None = None,
    *,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
    stdin: IO[str] | None = None,
    client: Callable[..., Tollgate] = Tollgate,
) -> int:
    """Run one command; return its exit code (the console script exits with it)."""
    out, err = stdout or sys.stdout, stderr or sys.stderr
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):  # --help and usage errors
            args = _parser().parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else USAGE
    options = vars(args)
    try:
        connection = {"profile": options.get("profile"), "config": options.get("config")}
        with client(options.get("url"), options.get("token"), **connection) as tollgate:
            output = _Output(out, err, as_json=bool(options.get("json")), ask=stdin or sys.stdin)
            return args.run(tollgate, args, output)
    except ApiError as exc:
        err.write(f"tollgate: {exc.status}: {_printable(exc.detail)}\n")
        for problem in exc.errors:
            err.write(f"  {_printable(problem.field)}: {_printable(problem.message)}\n")
        return USAGE if isinstance(exc, InvalidRequest) else UNANSWERED
    except _Usage as exc:
        err.write(f"tollgate: {_printable(str(exc))}\n")
        return USAGE
    except (TollgateError, DraftFileError) as exc:
        err.write(f"tollgate: {_printable(str(exc))}\n")
        return UNANSWERED
    except KeyboardInterrupt:
        err.write("tollgate: interrupted\n")
        return 130


class _Output:
    def __init__(self, out: IO[str], err: IO[str], *, as_json: bool, ask: IO[str] | None = None):
        self.out, self.err, self.as_json, self.ask = out, err, as_json, ask

    def confirmed(self, question: str) -> bool:
        """Asked on a terminal only: in CI (no terminal) the command was the confirmation."""
        if self.ask is None or not getattr(self.ask, "isatty", lambda: False)():
            return True
        self.err.write(f"{question} [y/N] ")
        self.err.flush()
        return self.ask.readline().strip().lower() in ("y", "yes")

    def json(self, value: Any) -> None:
        self.out.write(json.dumps(value, default=_jsonable, ensure_ascii=False, indent=2) + "\n")

    def line(self, text: str) -> None:
        self.out.write(text + "\n")

    def progress(self, what: str, total: int | None = None) -> "_Progress":
        return _Progress(self.err, what, total)


class _Progress:
    """A one-line counter on stderr, redrawn in place; only on a terminal, so CI logs and pipes stay clean."""

    def __init__(self, stream: IO[str], what: str, total: int | None):
        self.stream, self.what, self.total, self.done = stream, what, total, 0
        self.shown = bool(getattr(stream, "isatty", lambda: False)())

    def advance(self, count: int = 1) -> None:
        self.done += count
        if self.shown:
            of = f"/{self.total}" if self.total is not None else ""
            width = 30
            bar = ""
            if self.total:
                filled = int(width * self.done / self.total)
                bar = f"[{'#' * filled}{'.' * (width - filled)}] "
            self.stream.write(f"\r{bar}{self.done}{of} {self.what}")
            self.stream.flush()

    def __enter__(self) -> "_Progress":
        return self

    def __exit__(self, *exc: object) -> None:
        if self.shown and self.done:
            self.stream.write("\n")


# --- gate ----------------------------------------------------------------------------------------------------------


def _gate(tollgate: Tollgate, args: argparse.Namespace, output: _Output) -> int:
    files = [
        draft_file(path, id_prefix=args.id_prefix, source_urls=args.source_url) for path in draft_paths(args.paths)
    ]
    if not files:
        raise DraftFileError("no draft files (.md, .markdown, .mdx, .txt) under " + " ".join(args.paths))

    def submit(file: DraftFile) -> tuple[int, DraftFile]:
        accepted = tollgate.submit_draft(title=file.title, body=file.body, external_id=file.external_id,
                                         slug=file.slug, source_urls=file.source_urls, run_id=args.run_id)  # fmt: skip
        return accepted.id, file

    by_id: dict[int, DraftFile] = {}
    # A few requests in flight: a submission is one short write each, and a folder of drafts is sent in a fraction
    # of the time one at a time takes (the server's 429s, if it has had enough, are retried as it says).
    with ThreadPoolExecutor(max_workers=args.concurrency) as pool, output.progress("submitted", len(files)) as progress:
        for draft_id, file in pool.map(submit, files):
            by_id[draft_id] = file
            progress.advance()
    verdicts: dict[int, DraftStatus] = {}
    with output.progress("graded", len(files)) as progress:
        for status in tollgate.wait_for_drafts(by_id, timeout=args.timeout):
            verdicts[status.id] = status
            progress.advance()
    results = [_gate_result(by_id[i], verdicts[i]) for i in by_id]
    code = _gate_code([r["route"] for r in results])
    if output.as_json:
        output.json({"exit_code": code, "drafts": results})
    else:
        for result in results:
            _print_result(result, output, github=args.format == "github")
        counts = {route: sum(r["route"] == route for r in results) for route in {r["route"] for r in results}}
        summary = ", ".join(f"{n} {_ROUTE_WORDS.get(route, route)}" for route, n in sorted(counts.items()))
        output.err.write(f"tollgate: {len(results)} draft(s): {summary}\n")
    return code


_ROUTE_WORDS = {PASS: "passed", FAIL: "failed", HUMAN: "need a person"}


def _gate_code(routes: list[str]) -> int:
    if any(route not in (PASS, FAIL, HUMAN) for route in routes):
        return UNANSWERED
    if FAIL in routes:
        return FAILED
    return NEEDS_PERSON if HUMAN in routes else OK


def _gate_result(file: DraftFile, status: DraftStatus) -> dict[str, Any]:
    checked = (status.repairs or {}).get("body") or file.body
    findings = []
    for finding in status.findings:
        starts = list(spans_in_submitted(finding.spans, checked=checked, submitted=file.body))
        line, col = file.position(starts[0]) if starts else (None, None)
        findings.append(
            {"line": line, "col": col, "code": finding.code, "severity": finding.severity, "message": finding.message}
        )
    return {
        "file": file.path.as_posix(),
        "draft_id": status.id,
        "external_id": status.external_id,
        "route": status.route,
        "reason": status.reason or "",
        "score": status.score,
        "findings": findings,
        "judge_issues": status.judge_issues,
        "repaired": status.repairs is not None,
    }


def _print_result(result: dict[str, Any], output: _Output, *, github: bool) -> None:
    path, route = _printable(result["file"]), result["route"]
    level = {FAIL: "error", HUMAN: "warning"}.get(route, "error")
    for finding in result["findings"]:
        message = f"{finding['message']} [{finding['code']}]"
        if github:
            where = f",line={finding['line']},col={finding['col']}" if finding["line"] else ""
            output.line(f"::{level} file={_property(path)}{where},title=Tollgate::{_data(message)}")
        elif finding["line"]:
            output.line(f"{path}:{finding['line']}:{finding['col']}: {_printable(message)}")
        else:
            output.line(f"{path}: {_printable(message)}")
    score = f", score {result['score']:g}" if result["score"] is not None else ""
    reason = f", {result['reason']}" if result["reason"] else ""
    verdict = f"{_ROUTE_WORDS.get(route, route)}{score}{reason}"
    if route == PASS:
        output.line(f"{path}: {verdict}")
    elif github:
        issues = "".join(
            f"\n- {issue.get('issue', issue) if isinstance(issue, dict) else issue}" for issue in result["judge_issues"]
        )
        output.line(f"::{level} file={_property(path)},title=Tollgate::{_data(verdict + issues)}")
    else:
        output.line(f"{path}: {verdict}")


def _data(text: str) -> str:
    """A workflow command's message, escaped as the Actions runner reads it."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


# --- conversations ---------------------------------------------------------------------------------------------


def _import(tollgate: Tollgate, args: argparse.Namespace, output: _Output) -> int:
    parsed = _conversations_in(args.file, args.format)
    application = args.application or args.format
    failures = 0
    with output.progress("conversations", len(parsed)) as progress:
        for name, payload, problem in parsed:
            if problem is None:
                body = dict(payload)
                body["application"] = body.get("application") or application
                try:
                    written = tollgate.submit_conversation(body)
                except ApiError as exc:
                    if exc.status not in (400, 404, 413):
                        raise
                    problem = exc.detail
                else:
                    if output.as_json:
                        output.out.write(json.dumps(asdict(written), default=_jsonable, ensure_ascii=False) + "\n")
                    else:
                        scorable = "scorable" if written.scorable else f"not scorable ({written.not_scorable_reason})"
                        output.line(f"{_printable(name)}: {len(written.active_path)} messages on the path, {scorable}")
            if problem is not None:
                failures += 1
                output.err.write(f"{_printable(name)}: not imported: {_printable(problem)}\n")
            progress.advance()
    if failures:
        output.err.write(f"tollgate: {failures} of {len(parsed)} conversation(s) were not imported\n")
    return FAILED if failures else OK


def _conversations_in(path: Path, file_format: str) -> list[tuple[str, dict | None, str | None]]:
    """(its name, the API body, why not) per conversation in the file; the name is its id, else `#` and its index.
    The export formats are read by Tollgate's own importers (grading/importers), which the command finds where it is
    installed beside the server."""
    if file_format != "api":
        try:
            from grading.importers import ImportFormatError, ParseFailure, parse_file
        except ImportError:
            raise TollgateError(
                f"--format {file_format} needs Tollgate's importers (grading/importers): run it where "
                "Tollgate is installed, or convert the file to the API's bodies (--format api)"
            ) from None
        try:
            results = parse_file(file_format, path)
        except (ImportFormatError, OSError) as exc:
            raise TollgateError(f"{path}: {exc}") from exc
        return [
            (r.external_id or f"#{r.index}", None, r.reason)
            if isinstance(r, ParseFailure)
            else (_name(r.payload, i), r.payload, None)
            for i, r in enumerate(results)
        ]
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise TollgateError(f"{path}: {exc}") from exc
    try:
        document = json.loads(text)
        items = document.get("conversations") if isinstance(document, dict) else document
        if isinstance(document, dict) and items is None:
            items = [document]
        if not isinstance(items, list):
            raise TollgateError(f"{path}: neither a list of conversations nor JSON lines")
        lines: list[Any] = items
    except json.JSONDecodeError:
        lines = []
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    lines.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    lines.append(f"line {number} is not JSON: {exc.msg}")
    return [
        (_name(item, i), item, None)
        if isinstance(item, dict)
        else (f"#{i}", None, str(item) if isinstance(item, str) else "not a JSON object")
        for i, item in enumerate(lines)
    ]


def _name(payload: dict, index: int) -> str:
    external_id = payload.get("external_id")
    return str(external_id) if external_id else f"#{index}"


def _conversation(tollgate: Tollgate, args: argparse.Namespace, output: _Output) -> int:
    detail = tollgate.conversation(args.external_id)
    if output.as_json:
        output.json(asdict(detail))
        return OK
    review = detail.review
    output.line(f"{_printable(detail.external_id)}: {len(detail.active_path)} messages on the path")
    if review is None:
        output.line("not graded yet" if detail.scorable else f"not scorable: {detail.not_scorable_reason}")
        return OK
    output.line(f"route {review.route}{f' ({review.reason})' if review.reason else ''}, state {review.state}")
    for key, answer in review.checks.items():
        output.line(f"  {key}: {_printable(json.dumps(answer, ensure_ascii=False))}")
    return OK


# --- export, criteria, queue ------------------------------------------------------------------------------------


# The dashboard export's filters the command passes as they are (the page's link names them so).
_REVIEW_FILTERS = {
    "set": "counting (default), stale or errors",
    "route": "routes, comma-separated (pass,human)",
    "reason": "a reason's code",
    "check": "a check's key (with --verdict: the machine's answer)",
    "verdict": "the machine's answer on --check",
    "finding": "a finding's code",
    "decision": "people's outcome",
    "sample": "audit, unsure or label (with --check, --machine, --human)",
    "machine": "the machine's answer in an agreement cell",
    "human": "people's answer in an agreement cell",
    "people": "items several people answered (audit, unsure, labelled) or split on",
    "operator": "decisions by this user id",
    "due": "overdue, late or on_time",
}


def _export(tollgate: Tollgate, args: argparse.Namespace, output: _Output) -> int:
    rows: Iterator[Any]
    if args.what == "reviews":
        file_format = args.format or ("jsonl" if output.as_json else "csv")
        if file_format not in ("csv", "jsonl"):
            raise TollgateError("export reviews: --format must be csv or jsonl")
        filters = {name: getattr(args, name) for name in _REVIEW_FILTERS}
        flags = {name: "true" for name in ("repaired", "decided") if getattr(args, name)}
        rows = tollgate.export_reviews(format=file_format, since=args.since, until=args.until, kind=args.kind,
                                       application=args.application, slice=args.slice, **filters, **flags)  # fmt: skip
        if file_format == "csv":
            return _write_text(rows, args, output)
    elif args.what == "corrections":
        rows = tollgate.export_corrections(
            format=args.format or "jsonl",
            since=args.since,
            until=args.until,
            kind=args.kind,
            application=args.application,
        )
    else:
        file_format = args.format or ("jsonl" if output.as_json else "csv")
        if file_format not in ("csv", "jsonl"):
            raise TollgateError("export audit: --format must be csv or jsonl")
        filters = {"since": args.since, "until": args.until, "action": args.action}
        if file_format == "csv":
            rows = tollgate.export_audit_csv(**filters)
        else:
            rows = (asdict(event) for event in tollgate.audit_events(**filters))
    target = args.output.open("w", encoding="utf-8") if args.output else output.out
    count = 0
    try:
        with output.progress("rows") as progress:
            for row in rows:
                line = row if isinstance(row, str) else json.dumps(row, default=_jsonable, ensure_ascii=False)
                target.write(line + "\n")
                count += 1
                progress.advance()
    finally:
        if args.output:
            target.close()
    if args.output:
        output.err.write(f"tollgate: {count} row(s) written to {args.output}\n")
    return OK


def _write_text(chunks: Iterator[str], args: argparse.Namespace, output: _Output) -> int:
    """A CSV as the server wrote it, chunk by chunk (a cell's own line breaks kept)."""
    target = args.output.open("w", encoding="utf-8", newline="") if args.output else output.out
    lines = 0
    try:
        with output.progress("lines") as progress:
            for chunk in chunks:
                target.write(chunk)
                progress.advance(chunk.count("\n"))
                lines += chunk.count("\n")
    finally:
        if args.output:
            target.close()
    if args.output:
        output.err.write(f"tollgate: {lines} line(s) written to {args.output}\n")
    return OK


def _criteria(tollgate: Tollgate, args: argparse.Namespace, output: _Output) -> int:
    version = tollgate.criteria(args.kind, number=args.number)
    if output.as_json:
        output.json(version)
        return OK
    active = "active" if version.get("active") else "not active"
    output.line(f"{args.kind} criteria version {version.get('criteria_version')} ({active})")
    for check in version.get("checks") or []:
        required = " (required)" if check.get("required") else ""
        output.line(f"  {check.get('key')}: {_printable(str(check.get('name', '')))} [{check.get('kind')}]{required}")
    return OK


def _version_line(version: Any) -> str:
    based = f", from v{version.based_on.number}" if version.based_on else ""
    by = f", by {version.author}" if version.author else ""
    checks = ", ".join(version.checks)
    return f"{version.id}: {version.kind} v{version.number} {version.state}{based}{by}, judge {version.judge}: {checks}"


def _criteria_versions(tollgate: Tollgate, args: argparse.Namespace, output: _Output) -> int:
    versions = tollgate.criteria_versions(args.kind)
    if output.as_json:
        output.json([asdict(version) for version in versions])
        return OK
    for version in versions:
        output.line(_printable(_version_line(version)))
    return OK


def _show_version(version: Any, output: _Output) -> None:
    if output.as_json:
        output.json(asdict(version))
        return
    output.line(_printable(_version_line(version)) + f" (revision {version.revision})")
    output.line("rubric:")
    for line in version.rubric.splitlines():
        output.line(f"  {_printable(line)}")
    if version.rules is not None:
        output.line(f"threshold {version.threshold}, band {version.band}")


def _criteria_show_version(tollgate: Tollgate, args: argparse.Namespace, output: _Output) -> int:
    _show_version(tollgate.criteria_version(args.id), output)
    return OK


def _criteria_clone(tollgate: Tollgate, args: argparse.Namespace, output: _Output) -> int:
    _show_version(tollgate.criteria_clone(args.kind, source=args.source), output)
    return OK


def _criteria_edit(tollgate: Tollgate, args: argparse.Namespace, output: _Output) -> int:
    files = {"rubric": args.rubric_file, "checks": args.checks_file, "rules": args.rules_file,
             "routing": args.routing_file}  # fmt: skip
    fields = {name: _read(path, as_json=name != "rubric") for name, path in files.items() if path is not None}
    if not fields:
        raise _Usage("criteria edit: give --rubric-file, --checks-file, --rules-file or --routing-file")
    _show_version(tollgate.criteria_edit(args.id, revision=args.revision, **fields), output)
    return OK


class _Usage(TollgateError):
    """A command asked for nothing it can do: exit 4, as argparse's own usage errors."""


def _read(path: Path, *, as_json: bool) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
        return json.loads(text) if as_json else text
    except (OSError, UnicodeDecodeError) as exc:
        raise TollgateError(f"{path}: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise _Usage(f"{path}: not JSON: {exc.msg} (line {exc.lineno})") from exc


def _criteria_trial(tollgate: Tollgate, args: argparse.Namespace, output: _Output) -> int:
    trial = tollgate.trial_start(args.id, k=args.k, source=args.source)
    figures = None
    if args.wait:
        trial, figures = tollgate.wait_for_trial(args.id, trial.id, timeout=args.timeout)
    if output.as_json:
        output.json({"trial": asdict(trial), "figures": figures})
        return OK
    state = "finished" if trial.finished_at else "running"
    output.line(f"trial {trial.id} of v{trial.version.number}: {trial.items} item(s) from {trial.source}, "
                f"{trial.judge_calls} judge call(s), {trial.graded} graded, {state}")  # fmt: skip
    if figures is not None:
        output.json(figures)
    return OK


def _criteria_publish(tollgate: Tollgate, args: argparse.Namespace, output: _Output) -> int:
    plan = tollgate.publish_plan(args.id)
    if plan.replaces is None:
        raise TollgateError(
            f"criteria publish: no version of the kind is published for v{plan.version.number} to replace"
        )
    lines = [
        f"publish v{plan.version.number} (judge {plan.judge}) in place of v{plan.replaces.number}:",
        f"  {plan.stale} current review(s) stop counting ({plan.decided} decided by people)",
        *(
            f"    {group.application}: {group.reviews} review(s), {group.judge_calls} judge call(s)"
            for group in plan.groups
        ),
        f"  {plan.items} item(s) graded again: {plan.judge_calls} judge call(s)"
        + (f", about {plan.tokens} tokens" if plan.tokens is not None else ""),
        f"  the next pass takes {plan.next_pass_takes_at_least} to {plan.next_pass_takes_at_most}; "
        f"{plan.passes} hourly pass(es) at worst",
        *(f"  warning: {warning.message}" for warning in plan.spend.warnings),
    ]
    if not output.as_json:
        for line in lines:
            output.line(_printable(line))
    if not args.yes and not output.confirmed(f"Publish v{plan.version.number}?"):
        output.err.write("tollgate: not published\n")
        return NOT_CONFIRMED
    published = tollgate.publish(args.id, replaces=plan.replaces.number, regrade_now=args.regrade_now)
    if output.as_json:
        output.json({"plan": asdict(plan), "published": asdict(published)})
    elif published.published_now:
        output.line(f"published v{published.version.number}, replacing v{plan.replaces.number}")
    else:
        output.line(f"v{published.version.number} was published already: nothing changed")
    return OK


def _queue_filters(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kind", default="", help="draft or conversation")
    parser.add_argument("--application", default="")
    parser.add_argument("--reason", default="")
    parser.add_argument("--criteria", type=int, default=None, help="a criteria version's id")
    parser.add_argument("--overdue", action="store_true")
    parser.add_argument("--mine", action="store_true", help="only items assigned to you")
    parser.add_argument("--slice", default="", help="a dimension value, name=value")


def _queue_asked(args: argparse.Namespace) -> dict[str, Any]:
    asked = {"kind": args.kind, "application": args.application, "reason": args.reason, "criteria": args.criteria,
             "overdue": args.overdue or None, "mine": args.mine or None, "slice": args.slice}  # fmt: skip
    return {name: value for name, value in asked.items() if value not in ("", None)}


def _queue_list(tollgate: Tollgate, args: argparse.Namespace, output: _Output) -> int:
    page = tollgate.queue(after=args.after, limit=args.limit, **_queue_asked(args))
    if output.as_json:
        output.json(asdict(page))
        return OK
    for row in page.items:
        flags = [word for word, on in (("overdue", row.overdue), ("yours", row.mine), ("blind", row.blind)) if on]
        held = f", held by {row.held_by}" if row.held_by and not row.mine else ""
        why = f" ({row.reason_label})" if row.reason_label else ""
        extra = f" [{', '.join(flags)}]" if flags else ""
        output.line(_printable(f"{row.review}: {row.kind} {row.title}{why}, {row.criteria}, waiting {row.waiting}"
                               f"{held}{extra}"))  # fmt: skip
    more = f"; more: --after {page.next}" if page.next else ""
    output.err.write(f"tollgate: {page.total_label or page.total} waiting{more}\n")
    return OK


def _claim_lines(claimed: Claim, output: _Output) -> None:
    output.line(_printable(f"claimed {claimed.review}: {claimed.kind} {claimed.title}, until "
                           f"{claimed.expires_at.isoformat()}"))  # fmt: skip
    output.line(f"  fingerprint {claimed.fingerprint}")
    if claimed.outcomes:
        output.line(f"  --outcome {' | '.join(claimed.outcomes)}")
    for check in claimed.checks:
        output.line(_printable(f"  --check {check.key}={'|'.join(check.answers)}  {check.question}"))
    output.line(f"  {claimed.page_url}")


def _queue_claim_next(tollgate: Tollgate, args: argparse.Namespace, output: _Output) -> int:
    claimed = tollgate.claim_next(**_queue_asked(args))
    if output.as_json:
        output.json({"claimed": asdict(claimed) if claimed else None})
    elif claimed is None:
        output.line("nothing left for you to claim")
    else:
        _claim_lines(claimed, output)
    return OK


def _queue_decide(tollgate: Tollgate, args: argparse.Namespace, output: _Output) -> int:
    checks = {}
    for given in args.check:
        key, sep, answer = given.partition("=")
        if not sep or not key:
            raise _Usage(f"queue decide: --check {given!r} is not KEY=ANSWER")
        checks[key.strip()] = answer.strip()
    if bool(args.outcome) == bool(checks):
        raise _Usage("queue decide: give --outcome (a draft) or --check KEY=ANSWER (a conversation), not both")
    result = tollgate.decide(args.review, outcome=args.outcome, checks=checks, note=args.note,
                             fingerprint=args.fingerprint, keep_as_learning=args.keep_as_learning)  # fmt: skip
    if output.as_json:
        output.json(asdict(result))
    elif result.decided:
        output.line(f"{result.review}: decided, {result.outcome}")
    else:
        output.line(f"{result.review}: your answer is in; the item is decided once every place is answered")
    if result.learning_error:
        output.err.write(f"tollgate: the note did not become a learning: {_printable(result.learning_error)}\n")
    return OK


def _sets_list(tollgate: Tollgate, args: argparse.Namespace, output: _Output) -> int:
    found = tollgate.sets()
    if output.as_json:
        output.json([asdict(regression_set) for regression_set in found])
        return OK
    for regression_set in found:
        last = regression_set.last_run
        run = f", last run v{last['criteria_version']} {last['state']}" if last else ""
        if last and last.get("passed") is not None:
            run += ", passed" if last["passed"] else ", under its bar"
        output.line(_printable(f"{regression_set.name}: {regression_set.kind}, {regression_set.items} item(s){run}"))
    return OK


def _sets_create(tollgate: Tollgate, args: argparse.Namespace, output: _Output) -> int:
    body: dict[str, Any] = {"name": args.name, "kind": args.kind, "source": args.source}
    filtered = args.application or args.since or args.until or args.dimension
    if args.ids and filtered:
        raise _Usage("sets create: give --id or filters (--application, --since, --until, --dimension), not both")
    if args.ids:
        body["ids"] = args.ids
    else:
        dimensions = dict(given.partition("=")[::2] for given in args.dimension)
        body["filter"] = {"application": args.application, "since": args.since, "until": args.until,
                          "dimensions": dimensions}  # fmt: skip
    built = tollgate.set_create(**body)
    if output.as_json:
        output.json(asdict(built))
    else:
        output.line(_printable(f"{built.name}: {built.kind}, {built.items} item(s), {built.skipped} skipped "
                               f"(no expected answer from {args.source})"))  # fmt: skip
    return OK


def _sets_run(tollgate: Tollgate, args: argparse.Namespace, output: _Output) -> int:
    """Exit 1 when the run's agreement is under `--min-agreement`, 0 when it holds (it waits for the run)."""
    run = tollgate.set_run_start(args.name, version=args.version, min_agreement=args.min_agreement)
    if args.wait or args.min_agreement is not None:
        run = tollgate.wait_for_run(args.name, run.id, timeout=args.timeout)
    code = OK
    if args.min_agreement is not None:
        code = UNANSWERED if run.passed is None else OK if run.passed else FAILED
    if output.as_json:
        output.json(asdict(run) | {"exit_code": code})
    else:
        _run_lines(run, output)
    return code


def _run_lines(run: RegressionRun, output: _Output) -> None:
    output.line(f"set {_printable(run.set)}, run {run.id} of v{run.criteria_version}: {run.state}, "
                f"{run.graded}/{run.items} graded, {run.errors} error(s)")  # fmt: skip
    if run.state != "done":
        return
    output.line(f"{'check':<24} {'n':>5} {'agreed':>7} {'percent':>8}  interval       kappa")
    for check, figures in [*run.checks.items(), ("overall", run.overall)]:
        output.line(_agreement_row(check, figures))
    for change in run.changed:
        output.line(_printable(f"changed: {change['item']} {change['check']}: expected {change['expected']}, "
                               f"answered {change['answer']}"))  # fmt: skip
    if run.changed_count > len(run.changed):
        output.line(f"... and {run.changed_count - len(run.changed)} more")
    if run.min_agreement is not None:
        verdict = "holds" if run.passed else "is under"
        output.line(f"agreement {_percent(run.overall.get('percent'))} {verdict} the bar {_percent(run.min_agreement)}")


def _agreement_row(check: str, figures: dict[str, Any]) -> str:
    interval = figures.get("percent_interval")
    low_high = f"{_percent(interval[0])}-{_percent(interval[1])}" if interval else "-"
    kappa = figures.get("kappa")
    kappa_text = f"{kappa:.2f}" if isinstance(kappa, int | float) else "-"
    return (f"{_printable(check):<24} {figures.get('n', 0):>5} {figures.get('agreed', 0):>7} "
            f"{_percent(figures.get('percent')):>8}  {low_high:<14} {kappa_text}")  # fmt: skip


def _percent(share: float | None) -> str:
    return f"{share * 100:.1f}%" if isinstance(share, int | float) else "-"


def _queue_service(tollgate: Tollgate, args: argparse.Namespace, output: _Output) -> int:
    figures = tollgate.queue_service(since=args.since, until=args.until)
    output.json(figures)
    return OK


def _whoami(tollgate: Tollgate, args: argparse.Namespace, output: _Output) -> int:
    me = tollgate.whoami()
    if output.as_json:
        output.json(asdict(me))
    else:
        who = f"{me.person} (token {me.key_name})" if me.person else me.key_name
        output.line(f"{who} in {me.org} at {tollgate.base_url}")
    return OK


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def _printable(text: str) -> str:
    # What the server says can hold text from drafts and conversations: a line break would forge an output line,
    # an escape sequence would drive the terminal.
    return "".join(c if c.isprintable() or c == " " else c.encode("unicode_escape").decode() for c in str(text))


if __name__ == "__main__":
    sys.exit(main())

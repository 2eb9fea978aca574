"""The `tollgate` command: gate drafts in CI, import conversations, export, read criteria (docs/client.md).

Exit codes: 0 done (`gate`: every draft passed); 1 `gate`: a draft failed, `conversations import`: a conversation
was not imported; 2 `gate`: a draft needs a person and none failed; 3 Tollgate could not answer (unreachable, an
error, a draft graded `error` or `not_scorable`, a wait that timed out, a bad configuration); 4 a usage error."""

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
from tollgate_client.errors import ApiError, TollgateError
from tollgate_client.files import DraftFile, DraftFileError, draft_file, draft_paths, spans_in_submitted
from tollgate_client.models import FAIL, HUMAN, PASS, DraftStatus

OK, FAILED, NEEDS_PERSON, UNANSWERED, USAGE = 0, 1, 2, 3, 4
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
    export.add_argument("what", choices=("corrections", "audit"))
    export.add_argument("--output", "-o", type=Path, default=None, help="a file instead of stdout")
    export.add_argument("--format", default=None, help="corrections: jsonl (default) or chat; audit: csv or jsonl")
    export.add_argument("--from", dest="since", default=None, help="corrections: an ISO week; audit: a date")
    export.add_argument("--to", dest="until", default=None, help="corrections: an ISO week; audit: a date")
    export.add_argument("--kind", default=None, help="corrections: draft or conversation")
    export.add_argument("--application", default=None, help="corrections: one application")
    export.add_argument("--action", default=None, help="audit: an action or a family (claim)")
    export.set_defaults(run=_export)

    criteria = commands.add_parser("criteria", parents=[common], help="criteria versions")
    criteria_commands = criteria.add_subparsers(dest="action", required=True, parser_class=_Parser)
    show = criteria_commands.add_parser("show", parents=[common], help="what a version asks (the active one)")
    show.add_argument("kind", choices=("draft", "conversation"))
    show.add_argument("--number", type=int, default=None, help="a version's number instead of the active one")
    show.set_defaults(run=_criteria)

    queue = commands.add_parser("queue", parents=[common], help="the review queue")
    queue_commands = queue.add_subparsers(dest="action", required=True, parser_class=_Parser)
    service = queue_commands.add_parser("service", parents=[common], help="the queue's service-level figures")
    service.add_argument("--from", dest="since", default=None, help="an ISO week")
    service.add_argument("--to", dest="until", default=None, help="an ISO week")
    service.set_defaults(run=_queue_service)

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
            return args.run(tollgate, args, _Output(out, err, as_json=bool(options.get("json"))))
    except ApiError as exc:
        err.write(f"tollgate: {exc.status}: {_printable(exc.detail)}\n")
        for problem in exc.errors:
            err.write(f"  {_printable(problem.field)}: {_printable(problem.message)}\n")
        return UNANSWERED
    except (TollgateError, DraftFileError) as exc:
        err.write(f"tollgate: {_printable(str(exc))}\n")
        return UNANSWERED
    except KeyboardInterrupt:
        err.write("tollgate: interrupted\n")
        return 130


class _Output:
    def __init__(self, out: IO[str], err: IO[str], *, as_json: bool):
        self.out, self.err, self.as_json = out, err, as_json

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


def _export(tollgate: Tollgate, args: argparse.Namespace, output: _Output) -> int:
    rows: Iterator[Any]
    if args.what == "corrections":
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

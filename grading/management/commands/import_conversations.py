import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.core.serializers.json import DjangoJSONEncoder
from django.db import DataError
from pydantic import ValidationError

from grading.api.views import conversation_out
from grading.conversations.ingest import conversation_upsert
from grading.core.errors import LimitExceeded
from grading.core.schemas import ConversationIn, describe_errors
from grading.importers import FORMATS, ImportFormatError, ParseFailure, ParseResult, parse_file
from grading.management.orgs import org_from_option
from grading.management.progress import Progress
from grading.models import Org
from grading.reviews.conversation_reads import conversation_state


class Command(BaseCommand):
    help = (
        "Import conversations from an export file. Idempotent: importing the same file twice changes nothing. "
        "A bad conversation is reported by id and does not stop the others; the exit code is 1 if any failed."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--format", required=True, choices=FORMATS, dest="fmt")
        parser.add_argument("--org", default=None, help="org slug (default: the only org)")
        parser.add_argument("--application", default=None, help="application name for conversations that carry none")
        parser.add_argument("--json", action="store_true", dest="as_json", help="print one JSON line per conversation")

    def handle(self, *args, file: Path, fmt: str, org: str | None, application: str | None, as_json: bool, **options):
        the_org = org_from_option(org)
        try:
            results = parse_file(fmt, file)
        except (ImportFormatError, OSError) as exc:
            raise CommandError(f"{file}: {exc}") from exc
        failures = 0
        with Progress(self.stderr, what="conversations", total=len(results)) as progress:
            for result in results:
                failures += not self._import(the_org, result, application or fmt, as_json=as_json, progress=progress)
                progress.advance()
        if failures:
            raise CommandError(f"{failures} of {len(results)} conversation(s) were not imported")

    def _import(self, org: Org, result: ParseResult, application: str, *, as_json: bool, progress: Progress) -> bool:
        """Import one parsed conversation and report it; False if it was not imported."""
        if isinstance(result, ParseFailure):
            self._fail(result.external_id or f"#{result.index}", result.reason, progress)
            return False
        payload = dict(result.payload)
        payload["application"] = payload.get("application") or application
        try:
            write = conversation_upsert(org=org, payload=ConversationIn.model_validate(payload))
        except (ValidationError, LimitExceeded, DataError) as exc:
            # DataError: a row the database refuses (or an older row it cannot give back) fails this
            # conversation, whose write rolled back whole, and not the conversations after it.
            self._fail(payload.get("external_id"), _describe(exc), progress)
            return False
        line = conversation_out(conversation_state(write.conversation, write.messages))  # the API's answer
        if as_json:
            progress.say(self.stdout, json.dumps(line, ensure_ascii=False, cls=DjangoJSONEncoder) + "\n")
        else:
            scorable = "scorable" if line["scorable"] else f"not scorable ({line['not_scorable_reason']})"
            progress.say(
                self.stdout, f"{line['external_id']}: {len(line['active_path'])} messages on the path, {scorable}\n"
            )
        return True

    def _fail(self, external_id: str | None, reason: str, progress: Progress) -> None:
        progress.say(self.stderr, f"{_printable(str(external_id))}: not imported: {_printable(reason)}\n")


def _describe(exc: Exception) -> str:
    if isinstance(exc, LimitExceeded):
        return f"{exc} ({exc.limit})"
    return describe_errors(exc) if isinstance(exc, ValidationError) else str(exc)


def _printable(text: str) -> str:
    # An id from the file is untrusted: a line break in it would forge another report line, and a bidi control
    # would reorder the terminal's line. Unprintable characters are written as escapes.
    return "".join(char if char.isprintable() else char.encode("unicode_escape").decode() for char in text)

import json
import re
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.core.serializers.json import DjangoJSONEncoder
from django.utils.text import slugify
from pydantic import ValidationError

from grading.core.errors import LimitExceeded
from grading.core.schemas import DraftIn, describe_errors
from grading.drafts.gate import draft_grade
from grading.drafts.submit import draft_save
from grading.management.orgs import org_from_option
from grading.management.progress import Progress
from grading.models import Org
from grading.reviews.draft_reads import draft_status

EXIT_CODES = {"pass": 0, "fail": 1, "human": 2, "error": 3}
_H1 = re.compile(r"\A\s*#[ \t]+(?P<title>.+?)[ \t]*#*[ \t]*(?:\r?\n|\Z)")


class Command(BaseCommand):
    help = (
        "Run Markdown/MDX drafts through the gate here and now. Exit code: 0 pass, 1 fail, 2 needs a human, "
        "3 the judge failed (try again later); with several files, the highest of theirs. The title is the file's "
        "leading '# ' heading, else its name."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("files", type=Path, nargs="+", metavar="FILE")
        parser.add_argument("--org", default=None, help="org slug (default: the only org)")
        parser.add_argument("--source", action="append", default=[], dest="sources", help="a source URL (repeatable)")
        parser.add_argument("--json", action="store_true", dest="as_json", help="print the verdict as JSON")

    def handle(self, *args, files: list[Path], org: str | None, sources: list[str], as_json: bool, **options) -> None:
        the_org = org_from_option(org)
        worst = 0
        with Progress(self.stderr, what="drafts", total=len(files)) as progress:
            for file in files:
                status = self._gate(the_org, file, sources)
                if as_json:
                    progress.say(self.stdout, json.dumps(status, cls=DjangoJSONEncoder, ensure_ascii=False) + "\n")
                else:
                    progress.say(self.stdout, _summary(status, heading=f"{file}:" if len(files) > 1 else None))
                worst = max(worst, EXIT_CODES[status["route"]])
                progress.advance()
        sys.exit(worst)

    def _gate(self, org: Org, file: Path, sources: list[str]) -> dict:
        """Save and grade one file; its status as the API gives it."""
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"{file}: cannot read: {exc}") from exc
        heading = _H1.match(text)
        title = heading.group("title") if heading else file.stem.replace("-", " ")
        body = text[heading.end() :] if heading else text
        try:
            payload = DraftIn(
                external_id=f"gate:{file.name}",
                title=title,
                slug=slugify(file.stem) or "draft",
                body=body,
                source_urls=sources,
            )
        except ValidationError as exc:
            raise CommandError(describe_errors(exc)) from exc
        try:
            draft = draft_save(org=org, payload=payload)
        except LimitExceeded as exc:
            raise CommandError(f"{file}: {exc} ({exc.limit})") from exc
        draft_grade(draft_id=draft.pk)
        return draft_status(draft)


def _summary(status: dict, *, heading: str | None) -> str:
    score = f"{status['score']:.1f}" if status["score"] is not None else "no score"
    lines = [heading] if heading else []
    lines.append(f"{status['route']}: {score} {status.get('reason') or ''}".rstrip())
    lines += [f"  [{f['severity']}] {f['code']}: {f['message']}" for f in status["findings"]]
    lines += [f"  [judge] {issue['issue']} Fix: {issue['fix']}" for issue in status["judge_issues"]]
    if status["repairs"]:
        lines.append(status["repairs"]["diff"])
    return "\n".join(lines) + "\n"

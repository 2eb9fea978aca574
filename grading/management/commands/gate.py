import json
import re
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.core.serializers.json import DjangoJSONEncoder
from django.utils.text import slugify
from pydantic import ValidationError

from grading.drafts.gate import draft_grade
from grading.drafts.reads import draft_status
from grading.drafts.submit import draft_save
from grading.errors import LimitExceeded
from grading.management.orgs import org_from_option
from grading.schemas import DraftIn, describe_errors

EXIT_CODES = {"pass": 0, "fail": 1, "human": 2, "error": 3}
_H1 = re.compile(r"\A\s*#[ \t]+(?P<title>.+?)[ \t]*#*[ \t]*(?:\r?\n|\Z)")


class Command(BaseCommand):
    help = (
        "Run a Markdown/MDX draft through the gate here and now. Exit code: 0 pass, 1 fail, 2 needs a human, "
        "3 the judge failed (try again later). The title is the file's leading '# ' heading, else its name."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--org", default=None, help="org slug (default: the only org)")
        parser.add_argument("--source", action="append", default=[], dest="sources", help="a source URL (repeatable)")
        parser.add_argument("--json", action="store_true", dest="as_json", help="print the verdict as JSON")

    def handle(self, *args, file: Path, org: str | None, sources: list[str], as_json: bool, **options) -> None:
        the_org = org_from_option(org)
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
            draft = draft_save(org=the_org, payload=payload)
        except LimitExceeded as exc:
            raise CommandError(f"{file}: {exc} ({exc.limit})") from exc
        review = draft_grade(draft_id=draft.pk)
        status = draft_status(draft)
        if as_json:
            self.stdout.write(json.dumps(status, cls=DjangoJSONEncoder, ensure_ascii=False))
        else:
            self._summary(status)
        sys.exit(EXIT_CODES[review.route])

    def _summary(self, status: dict) -> None:
        score = f"{status['score']:.1f}" if status["score"] is not None else "no score"
        self.stdout.write(f"{status['route']}: {score} {status.get('reason') or ''}".rstrip())
        for finding in status["findings"]:
            self.stdout.write(f"  [{finding['severity']}] {finding['code']}: {finding['message']}")
        for issue in status["judge_issues"]:
            self.stdout.write(f"  [judge] {issue['issue']} Fix: {issue['fix']}")
        if status["repairs"]:
            self.stdout.write(status["repairs"]["diff"])

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from grading.dashboard.labels import file_format_of, labels_import
from grading.management.orgs import org_from_option
from grading.management.progress import Progress


class Command(BaseCommand):
    help = (
        "Import human labels (CSV with a header, or JSONL): item (external id), check (the key of a check the "
        "active criteria version asks, or pass_fail), verdict (the answer: pass, fail, unknown, a category or a "
        "score), labeller, time; optional kind. Each label is bound to the item's fingerprint now. Bad rows are "
        "reported by line and the rest import; importing again changes nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file")
        parser.add_argument("--org", required=True, help="org slug")
        parser.add_argument("--format", choices=["csv", "jsonl"], default=None, help="default: from the extension")

    def handle(self, *args, file: str, org: str, format: str | None, **options) -> None:
        the_org = org_from_option(org)
        path = Path(file)
        try:
            # A byte that is not UTF-8 becomes a lone surrogate, which validation refuses in the row that holds it
            # (named by its line), rather than the whole file being refused.
            text = path.read_bytes().decode("utf-8-sig", errors="surrogateescape")
        except OSError as exc:
            raise CommandError(f"cannot read {file}: {exc}") from exc
        with Progress(self.stderr, what="label rows", total=None) as progress:
            report = labels_import(
                org=the_org,
                text=text,
                file_format=file_format_of(file, format),
                source=f"file:{path.name}",
                on_batch=progress.reached,
            )
        for problem in report.problems:
            self.stderr.write(str(problem))
        self.stdout.write(
            f"{report.created} created, {report.updated} updated, {report.unchanged} unchanged, "
            f"{len(report.problems)} bad row{'s' if len(report.problems) != 1 else ''}"
        )
        if report.problems:
            raise CommandError("some rows were not imported (see above); the others were")

import json

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from grading.core.weeks import iso_week
from grading.dashboard.sampling import audit_sample_send
from grading.management.orgs import org_from_option


class Command(BaseCommand):
    help = (
        "Pick a review cycle's sample and send it to the queue as audit items, whatever the machine decided: per "
        "application and ISO week, the K scorable conversations with the smallest sha256(salt + external_id); per "
        "ISO week, the K judged drafts by the same rule. Usage and old scores play no part. An audit item's page "
        "hides the judge's verdict until the person decided."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--org", required=True, help="org slug")
        parser.add_argument("--per-week", type=int, default=2)
        parser.add_argument("--weeks", type=int, default=8)
        parser.add_argument("--salt", default=None, help="default: SAMPLING_SALT")
        parser.add_argument("--dry-run", action="store_true", help="print the sample, send nothing to the queue")
        parser.add_argument("--json", action="store_true", dest="as_json")

    def handle(
        self, *args, org: str, per_week: int, weeks: int, salt: str | None, dry_run: bool, as_json: bool, **options
    ) -> None:
        if per_week < 1 or weeks < 1:
            raise CommandError("--per-week and --weeks must be at least 1")
        the_org = org_from_option(org)
        sample = audit_sample_send(
            org=the_org,
            per_week=per_week,
            weeks=weeks,
            salt=salt if salt is not None else settings.SAMPLING_SALT,
            send=not dry_run,
        )
        for kind, cells in (("conversation", sample.conversations), ("draft", sample.drafts)):
            for cell in cells:
                week = iso_week(cell.week)
                if as_json:
                    line = {"kind": kind, "application": cell.application, "iso_week": week}
                    self.stdout.write(json.dumps({**line, "external_ids": cell.external_ids}))
                else:
                    where = f"{cell.application} {week}" if cell.application else f"drafts {week}"
                    self.stdout.write(f"{where}: {', '.join(cell.external_ids)}")
        if not as_json:
            sent = (
                "nothing sent (dry run)" if dry_run else f"{len(sample.marked)} newly sent to the queue as audit items"
            )
            self.stdout.write(sent)

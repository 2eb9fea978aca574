import json

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from grading.models import Org
from grading.selectors import sample_conversations


class Command(BaseCommand):
    help = (
        "Pick a review cycle's sample: per application and ISO week, the K scorable conversations with the "
        "smallest sha256(salt + external_id). Usage and old scores play no part."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--org", required=True, help="org slug")
        parser.add_argument("--per-week", type=int, default=2)
        parser.add_argument("--weeks", type=int, default=8)
        parser.add_argument("--salt", default=None, help="default: SAMPLING_SALT")
        parser.add_argument("--json", action="store_true", dest="as_json")

    def handle(self, *args, org: str, per_week: int, weeks: int, salt: str | None, as_json: bool, **options) -> None:
        if per_week < 1 or weeks < 1:
            raise CommandError("--per-week and --weeks must be at least 1")
        the_org = Org.objects.filter(slug=org).first()
        if the_org is None:
            raise CommandError(f"no org with slug {org!r}")
        cells = sample_conversations(
            org=the_org, per_week=per_week, weeks=weeks, salt=salt if salt is not None else settings.SAMPLING_SALT
        )
        for cell in cells:
            if as_json:
                line = {"application": cell.application, "iso_week": f"{cell.iso_year}-W{cell.iso_week:02d}"}
                self.stdout.write(json.dumps({**line, "external_ids": cell.external_ids}))
            else:
                ids = ", ".join(cell.external_ids)
                self.stdout.write(f"{cell.application} {cell.iso_year}-W{cell.iso_week:02d}: {ids}")

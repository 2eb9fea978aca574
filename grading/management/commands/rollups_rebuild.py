from django.core.management.base import BaseCommand, CommandError, CommandParser

from grading.management.orgs import org_from_option
from grading.reviews.rollups import rollups_rebuild


class Command(BaseCommand):
    help = (
        "Rebuild an org's dashboard counters from the raw tables now, every week of them, and put right what they had "
        "wrong. The hourly rebuild recounts the weeks written since the one before, and every week once a day."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--org", help="org slug (default: the only org)")

    def handle(self, *args, org: str | None, **options) -> None:
        rebuild = rollups_rebuild(org_id=org_from_option(org).pk)
        if rebuild is None:
            raise CommandError(
                "Nothing booked: another rebuild of the org booked, or a migration was applied, while this one counted"
                " (the hourly task's, most likely). Run it again."
            )
        self.stdout.write(
            f"{rebuild.rows} counters recounted in {rebuild.seconds:.1f} s; {rebuild.drifted} of them put right"
        )

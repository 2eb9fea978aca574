from django.core.management.base import BaseCommand, CommandParser

from grading.planner import grading_pass
from grading.selectors import stale_current_reviews


class Command(BaseCommand):
    help = "Run one grading pass now: enqueue every conversation whose current review does not match its evidence."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--cap", type=int, default=None, help="judge tasks to enqueue at most (GRADING_PASS_CAP)")

    def handle(self, *args, cap: int | None, **options) -> None:
        run = grading_pass(cap=cap).run
        self.stdout.write(
            f"{run.needing} needed grading, {run.enqueued} enqueued, {run.backlog} left as backlog; "
            f"{stale_current_reviews().count()} current review(s) stale until the workers finish"
        )

from django.core.management.base import BaseCommand, CommandParser

from grading.passes.planner import grading_pass
from grading.reviews.reads import staleness_audit


class Command(BaseCommand):
    help = "Run one grading pass now: enqueue every conversation and draft with no review that counts."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--cap", type=int, default=None, help="judge tasks to enqueue at most (GRADING_PASS_CAP)")

    def handle(self, *args, cap: int | None, **options) -> None:
        run = grading_pass(cap=cap).run
        stale = staleness_audit().stale
        self.stdout.write(
            f"{run.needing} needed grading: {run.enqueued} enqueued ({run.recovered} of them because their task was "
            f"lost), {run.in_flight} already in flight, {run.spend_capped} waiting on a spend cap, {run.backlog} left "
            f"as backlog; "
            f"{stale['conversation']} conversation and {stale['draft']} draft review(s) stale until the workers finish"
        )

"""What the benchmarks share: a clean database on the bench's own private servers, and an org."""

from django.core.management import call_command

from grading.models import Org


def fresh_org(slug: str = "bench") -> Org:
    """Migrate, empty every table (the bench runs on its own data directory, .data/bench), make an org."""
    call_command("migrate", interactive=False, verbosity=0)
    call_command("flush", interactive=False, verbosity=0)
    return Org.objects.create(name="Bench", slug=slug)


def purge_queues() -> None:
    """Drop the tasks a benchmark enqueued: no worker runs during benchmarks."""
    from reviewer.celery import app

    app.control.purge()

import os
import signal
import subprocess
import sys
import time

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from grading.demo import TIMED_OUT_DRAFT
from grading.passes.planner import grading_pass
from reviewer.demo import DEMO_PEOPLE, demo_api_key, demo_seed


class Command(BaseCommand):
    help = "Run the whole system on this machine: migrate, seed a demo org, start the workers, beat and the web app."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--addr", default="127.0.0.1:8000")

    def handle(self, *args, addr: str, **options) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        org = demo_seed()
        key = demo_api_key(org)
        # Queued now, graded by the worker started below: the demo opens with everything graded.
        grading_pass()
        self.stdout.write(self.style.SUCCESS(first_contact(addr, org.slug, key)))
        children = self._start_children(addr)
        # Ctrl-C and `kill` stop the demo and its children. Installed explicitly: a shell that starts us in
        # the background leaves SIGINT ignored, and Python then never raises KeyboardInterrupt.
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: sys.exit(0))
        try:
            self._wait(children)
        finally:
            self._stop(children)

    def _start_children(self, addr: str) -> list[subprocess.Popen]:
        python = sys.executable
        # Judge calls wait on the network, so the judge queue runs threads (many calls in flight in one process,
        # one HTTP client and connection pool for all of them); the grading pass a small prefork pool of its own,
        # so it never holds up a judge call; webhooks wait on receivers: threads, apart from both.
        # docs/production.md: "More workers on more machines".
        judge_threads = str(settings.JUDGE_WORKER_THREADS)
        celery = [python, "-m", "celery", "-A", "reviewer", "--quiet"]  # no banners below the logins
        commands = [
            [*celery, "worker", "-Q", "judge", "-P", "threads", "-c", judge_threads, "-n", "judge@%h", "-l", "warning"],
            [*celery, "worker", "-Q", "default", "-c", "1", "-n", "default@%h", "-l", "warning"],
            [*celery, "worker", "-Q", "webhooks", "-P", "threads", "-c", "8", "-l", "warning", "-n", "webhooks@%h"],
            [*celery, "beat", "-l", "warning"],
            [python, "manage.py", "runserver", addr, "--noreload"],
        ]
        # Each child gets its own process group, so Ctrl-C reaches us once and we stop them in order.
        return [subprocess.Popen(command, env=os.environ.copy(), start_new_session=True) for command in commands]

    def _wait(self, children: list[subprocess.Popen]) -> None:
        try:
            while all(child.poll() is None for child in children):
                time.sleep(0.5)
            failed = next(child for child in children if child.poll() is not None)
            self.stderr.write(f"{' '.join(failed.args[1:])} exited with {failed.returncode}; stopping the demo")
        except SystemExit:
            self.stdout.write("\nstopping…")

    def _stop(self, children: list[subprocess.Popen]) -> None:
        for child in children:
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGTERM)
        for child in children:
            try:
                child.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)


def first_contact(addr: str, org_slug: str, key: str) -> str:
    """What a newcomer needs first: where, who, the key, which judge, and what failed on purpose."""
    judge = settings.JUDGES["default"]["base_url"] or "offline heuristic judge (set JUDGE_BASE_URL for a real one)"
    lines = [
        f"Tollgate demo: http://{addr}/  (org {org_slug})",
        *(f"  {person.role:<15} {person.username} / {person.password}{_limited(person)}" for person in DEMO_PEOPLE),
        f"  API key (shown once): {key}",
        f"  judge: {judge}",
        f"  seeded example: draft {TIMED_OUT_DRAFT} met a judge timeout on purpose, for the dashboard's",
        "  judge-error card; the grading pass started here grades it again",
        "Ctrl-C stops everything started here; the workers' and the web server's own lines follow.",
    ]
    return "\n".join(lines) + "\n"


def _limited(person) -> str:
    return f" (only {', '.join(person.applications)})" if person.applications is not None else ""

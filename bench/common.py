"""What the benchmarks share: an empty database on the bench's own private servers, an org, and the database
server's CPU time."""

import os

from django.core.management import call_command
from django.db import connection

from grading.models import Org


def fresh_org(slug: str = "bench") -> Org:
    """Recreate the schema and migrate (the bench runs on its own data directory, .data/bench, so nothing of
    value is lost; starting from nothing also survives a schema left behind by an older checkout), then make an org."""
    with connection.cursor() as cursor:
        cursor.execute("DROP SCHEMA public CASCADE")
        cursor.execute("CREATE SCHEMA public")
    call_command("migrate", interactive=False, verbosity=0)
    return Org.objects.create(name="Bench", slug=slug)


def purge_queues() -> None:
    """Drop the tasks a benchmark enqueued: no worker runs during benchmarks."""
    from reviewer.celery import app

    app.control.purge()


def backend_cpu() -> float:
    """CPU seconds (user + system) PostgreSQL has spent for this connection, from /proc: its backend's, and those of
    the server's processes that have ended, which its postmaster has reaped. A query run in parallel does part of
    its work in worker processes that end with it (the backend alone showed 0.18 of a parallel count's 0.56 s);
    an autovacuum worker that ends within the span is counted too, so a span's figure may only be too high."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    try:
        backend = _stat_fields(pid)
        postmaster = _stat_fields(int(backend[1]))
    except OSError:
        return float("nan")
    # proc(5): utime, stime; the reaped children's cutime, cstime (fields 14 to 17, here from the state's index 0)
    ticks = int(backend[11]) + int(backend[12]) + int(postmaster[13]) + int(postmaster[14])
    return ticks / os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str]:
    """/proc/<pid>/stat's fields after the command's name (which may hold spaces): the state first."""
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()


def bench_checks(count: int):
    """A conversation version's checks for the benchmarks: today's three, or `count` verdict checks of which the
    first four carry a rule of each kind (phrases, an RE2 pattern, a tool that must be called, every call answered),
    none of which matches the benchmarks' conversations: each is read in full, and the judge's pass stands."""
    from grading.checks.definitions import (
        CONVERSATION_DEFAULTS,
        CheckDefinition,
        CheckSet,
        PatternRule,
        PhrasesRule,
        ToolCalledRule,
        ToolsAnsweredRule,
    )

    if count == len(CONVERSATION_DEFAULTS.checks):
        return CONVERSATION_DEFAULTS
    rules = [
        [PhrasesRule(phrases=["we promise", "guaranteed", "legal advice", *(f"promo code {n}" for n in range(40))])],
        [PatternRule(pattern=r"\b(?:\d[ -]?){13,16}\b", scopes=["assistant", "tool"], note="a card number")],
        [ToolCalledRule(tool="refund")],
        [ToolsAnsweredRule()],
    ]
    return CheckSet(
        checks=[
            CheckDefinition(
                key=f"c{n}",
                name=f"Requirement {n}",
                question=f"Does the assistant meet requirement {n} of the support policy, as the guidance reads it?",
                guidance={"pass": f"Requirement {n} is met in every reply.", "fail": f"A reply breaks it ({n})."},
                rules=rules[n - 1] if n <= len(rules) else [],
            )
            for n in range(1, count + 1)
        ]
    )

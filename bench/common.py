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
    """CPU seconds of the PostgreSQL backend serving this connection (user + system), from /proc."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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

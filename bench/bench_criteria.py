# ruff: noqa: S608 - the bulk-insert SQL is assembled from this module's constants; values are parameters.
"""Criteria admins' reads at scale: the preview of a rules change over 10,000 drafts, and the publish plan at
1,000,000 reviews.

Preview: 10,000 drafts from bench_checks' generator (same seed, ~1,500 words each), each with a current v1 review
holding the findings v1's checks report, and an unpublished v2 with one more banned word and a stricter threshold.
The baseline, measured in the same run on the same bodies, is the checks benchmark's own unit: `check_draft` per
draft. The preview (read the drafts and their reviews, check each body once under v2, compare, predict routes)
should cost no more than the checks themselves; the two alternate PREVIEW_ROUNDS times and the least of each is
reported as a ratio, wall and CPU, with what the preview adds measured apart (its checks replaced by a lookup of
the findings). BENCH_PREVIEW_DRAFTS scales it.

Plan: BENCH_CRITERIA_ITEMS items (default 200,000: half drafts, half conversations over five applications), each
with a current review, and superseded history up to BENCH_CRITERIA_REVIEWS reviews (default 1,000,000),
bulk-inserted with generate_series. The plan of a draft version and of a conversation version is timed (median of
RUNS), and so is the publication's own transaction (rolled back each time), with their query counts, against a
baseline measured in the same run: one count of the kind's current reviews, the least any plan must ask. CPU is
this process's and the database server's (its backends and parallel workers), beside wall time.

Run: `make bench`, or alone: `DEBUG=1 TOLLGATE_DATA_DIR=.data/bench DJANGO_SETTINGS_MODULE=reviewer.settings
.venv/bin/python -c "import django; django.setup(); import bench.bench_criteria as b; b.main()"`.
"""

import os
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from bench.bench_checks import PROOF_TERMS, SEED, WORDS_PER_DRAFT, generate_draft
from bench.common import fresh_org, purge_queues
from grading.checks.checks import check_draft
from grading.criteria import impact as criteria_impact
from grading.criteria.impact import criteria_preview, publish_plan
from grading.models import CriteriaVersion, Draft, ItemKind, Org, Review, ReviewState, Route
from grading.reviews.memory import memory_add
from grading.reviews.versions import criteria_active, criteria_new_version, criteria_publish, criteria_update

PREVIEW_ROUNDS = 2
PREVIEW_DRAFTS = int(os.environ.get("BENCH_PREVIEW_DRAFTS", "10000"))
RUNS = 7
APPLICATIONS = 5


def main() -> None:
    org = fresh_org()
    _bench_preview(org)
    org = fresh_org()
    _bench_plan(org)
    purge_queues()


# --- preview ----------------------------------------------------------------------------------------------------------


def _bench_preview(org: Org) -> None:
    memory_add(org=org, kind="fact", text="Our proof points.", proof_terms=PROOF_TERMS)
    v1 = criteria_active(org=org, kind=ItemKind.DRAFT)
    rules = v1.draft_rules()
    rng = random.Random(SEED)
    drafts = [
        generate_draft(rng, rules.banned_words.terms, rules.filler_phrases.terms, WORDS_PER_DRAFT)
        for _ in range(PREVIEW_DRAFTS)
    ]
    megabytes = sum(len(body.encode()) for body, _ in drafts) / 1e6

    started = time.perf_counter()
    findings = [check_draft(body=b, rules=rules, source_urls=s, proof_terms=PROOF_TERMS) for b, s in drafts]
    _store_drafts(org, v1, drafts, findings)
    seconds = time.perf_counter() - started
    print(f"stored {PREVIEW_DRAFTS:,} drafts ({megabytes:.1f} MB) with current v1 reviews in {seconds:.0f} s")

    v2 = criteria_new_version(org=org, kind=ItemKind.DRAFT)
    document = v2.draft_rules().model_dump(mode="json")
    document["banned_words"]["terms"].append("robustness")  # one of the generator's near misses, in some drafts
    document["threshold"] = 7.5
    v2 = criteria_update(version=v2, rules=document)
    v2_rules = v2.draft_rules()
    criteria_preview(version=v2, limit=10)  # build v2's matcher, as the checks' run below has v2's built

    def checks_alone() -> list:
        return [check_draft(body=b, rules=v2_rules, source_urls=s, proof_terms=PROOF_TERMS) for b, s in drafts]

    # The baseline, the checks benchmark's unit (check_draft per draft, same bodies, same rules), and the preview
    # alternate ROUNDS times; the least of each is reported, the figure least disturbed by others on the machine.
    checks, timings, server = [], [], []
    for _ in range(PREVIEW_ROUNDS):
        checks.append(_timed(checks_alone)[1])
        server_before = _server_cpu()
        preview, timing = _timed(lambda: criteria_preview(version=v2, limit=PREVIEW_DRAFTS))
        server.append(_server_cpu() - server_before)
        timings.append(timing)
    assert preview.compared == PREVIEW_DRAFTS, preview.compared
    # What the preview adds to the checks, measured apart: check_draft replaced by a lookup of the findings
    # computed above (reading, comparing, predicting routes).
    found = dict(zip((b for b, _ in drafts), checks_alone(), strict=True))
    real_check = criteria_impact.check_draft
    criteria_impact.check_draft = lambda *, body, rules, source_urls, proof_terms: found[body]
    try:
        _, added = _timed(lambda: criteria_preview(version=v2, limit=PREVIEW_DRAFTS))
    finally:
        criteria_impact.check_draft = real_check
    print(
        f"preview of v2 over {preview.read:,} drafts: {len(preview.rows):,} would change "
        f"({preview.route_changes:,} route changes); least of {PREVIEW_ROUNDS} rounds"
    )
    per = PREVIEW_DRAFTS / 1000
    wall, cpu = min(t[0] for t in checks), min(t[1] for t in checks)
    preview_wall, preview_cpu, server_cpu = min(t[0] for t in timings), min(t[1] for t in timings), min(server)
    print(f"{'':<40} {'wall ms/draft':>14} {'CPU ms/draft here':>18} {'CPU ms/draft server':>20}")
    print(f"{'checks (check_draft, baseline)':<40} {wall / per:>14.2f} {cpu / per:>18.2f} {'':>20}")
    print(f"{'preview (read, check, compare)':<40} {preview_wall / per:>14.2f} {preview_cpu / per:>18.2f} "
          f"{server_cpu / per:>20.3f}")  # fmt: skip
    print(f"{'preview without its checks (the overhead)':<40} {added[0] / per:>14.2f} {added[1] / per:>18.2f}")
    print(
        f"preview / checks: {preview_wall / wall:.2f}x wall, {preview_cpu / cpu:.2f}x CPU in this process, "
        f"{(preview_cpu + server_cpu) / cpu:.2f}x with the database server's CPU; the overhead alone is "
        f"{added[1] / cpu:.1%} of the checks' CPU"
    )


def _store_drafts(org: Org, version: CriteriaVersion, drafts: list[tuple[str, list[str]]], findings: list) -> None:
    now = timezone.now()
    rng = random.Random(SEED + 1)
    rows = Draft.objects.bulk_create(
        [
            Draft(
                org=org,
                external_id=f"d-{n}",
                title=f"Draft {n}",
                slug=f"draft-{n}",
                body=body,
                source_urls=sources,
                fingerprint=f"fp1:bench-{n}",
            )
            for n, (body, sources) in enumerate(drafts)
        ],  # fmt: skip
        batch_size=1_000,
    )
    reviews = []
    for draft, found in zip(rows, findings, strict=True):
        remaining = [f.as_json() for f in found if f.severity == "fatal"]  # the fixable ones were repaired
        score = rng.choice([5.0, 6.0, 7.0, 7.0, 8.0, 9.0])
        route = Route.FAIL if remaining or score < 7 else Route.PASS
        reviews.append(
            Review(org=org, kind=ItemKind.DRAFT, draft=draft, fingerprint=draft.fingerprint, criteria_version=version,
                   judge={"backend": "openai", "model": "bench"}, judge_key="bench", memory_snapshot="mem1:bench",
                   started_at=now, finished_at=now, stages=1, route=route, score=max(1.0, score - len(remaining)),
                   judge_score=score, judge_passed=score >= 7, findings=remaining, state=ReviewState.CURRENT,
                   usage={"prompt_tokens": 3000, "completion_tokens": 200, "total_tokens": 3200})
        )  # fmt: skip
    Review.objects.bulk_create(reviews, batch_size=1_000)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE grading_draft")
        cursor.execute("VACUUM ANALYZE grading_review")


# --- publish plan -----------------------------------------------------------------------------------------------------


def _bench_plan(org: Org) -> None:
    items = int(os.environ.get("BENCH_CRITERIA_ITEMS", "200000"))
    total = int(os.environ.get("BENCH_CRITERIA_REVIEWS", "1000000"))
    started = time.perf_counter()
    _populate(org, items, total)
    reviews = Review.objects.count()
    print(f"\npopulated {items:,} items and {reviews:,} reviews in {time.perf_counter() - started:.0f} s")
    print(f"{'':<44} {'median ms':>10} {'CPU ms here':>12} {'CPU ms server':>14} {'vs count':>9} {'queries':>8}")
    for kind in (ItemKind.DRAFT, ItemKind.CONVERSATION):
        version = criteria_new_version(org=org, kind=kind)
        count = _measure(lambda kind=kind: Review.objects.counting().filter(org=org, kind=kind).count())
        plan = _measure(lambda version=version: publish_plan(version=version))
        publish = _measure(lambda version=version: _publish_rolled_back(version))
        stale = publish_plan(version=version).stale
        for name, (median, cpu_here, cpu_server, queries) in (
            (f"{kind} current reviews count (baseline)", count),
            (f"{kind} publish plan ({stale:,} going stale)", plan),
            (f"{kind} publish itself (rolled back)", publish),
        ):
            print(
                f"{name:<44} {median:>10.1f} {cpu_here:>12.1f} {cpu_server:>14.1f} {median / count[0]:>8.1f}x "
                f"{queries:>8}"
            )


class _RolledBack(Exception):
    pass


def _publish_rolled_back(version: CriteriaVersion) -> None:
    """The publication's transaction (locks, the stale count, the flags, the audit event), then undone, so that
    every run publishes the same version over the same rows."""
    try:
        with transaction.atomic():
            criteria_publish(version=version)
            raise _RolledBack
    except _RolledBack:
        pass


def _measure(work: Callable[[], object]) -> tuple[float, float, float, int]:
    """Median wall ms, and median CPU ms of this process and of the database server, over RUNS; the query count."""
    work()
    with CaptureQueriesContext(connection) as queries:
        work()
    walls, here, server = [], [], []
    for _ in range(RUNS):
        server_before = _server_cpu()
        _, (wall, cpu) = _timed(work)
        server.append((_server_cpu() - server_before) * 1000)
        walls.append(wall * 1000)
        here.append(cpu * 1000)
    return statistics.median(walls), statistics.median(here), statistics.median(server), len(queries)


def _timed(work: Callable[[], object]) -> tuple[object, tuple[float, float]]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = work()
    return result, (time.perf_counter() - wall, time.process_time() - cpu)


_TICKS = os.sysconf("SC_CLK_TCK")


def _server_cpu() -> float:
    """CPU seconds used so far by the database server's processes (the postmaster's children: this connection's
    backend and any parallel workers), read from /proc; 0 when the server is not on this machine."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    try:
        postmaster = int(Path(f"/proc/{backend}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except OSError:
        return 0.0
    # Parallel workers exit when their query ends: the kernel then adds their CPU to the postmaster's cutime and
    # cstime, so those count too, beside every live child's utime and stime.
    fields = Path(f"/proc/{postmaster}/stat").read_text().rsplit(")", 1)[1].split()
    total = int(fields[13]) + int(fields[14])
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the process ended meanwhile
        if int(fields[1]) == postmaster:
            total += int(fields[11]) + int(fields[12])
    return total / _TICKS


def _populate(org: Org, items: int, total_reviews: int) -> None:
    """Half drafts, half conversations over APPLICATIONS applications, each with one current review (usage recorded),
    then superseded history spread over them up to `total_reviews`."""
    params = {
        "org": org.pk,
        "dc": criteria_active(org=org, kind=ItemKind.DRAFT).pk,
        "cc": criteria_active(org=org, kind=ItemKind.CONVERSATION).pk,
        "half": items // 2,
        "apps": APPLICATIONS,
        "history": max(0, total_reviews - items),
        "items": items,
    }
    with connection.cursor() as cursor:
        for statement in _POPULATE_SQL:
            cursor.execute(statement, params)
        for table in ("grading_draft", "grading_conversation", "grading_review", "grading_criteriaversion"):
            cursor.execute(f"VACUUM ANALYZE {table}")


_REVIEW_COLUMNS = """org_id, kind, conversation_id, draft_id, fingerprint, criteria_version_id, judge, judge_key,
    memory_snapshot, started_at, finished_at, stages, route, reason, detail, checks, score, judge_score, judge_passed,
    spread, sub_scores, findings, judge_issues, repairs, memory_used, usage, state, audit, criteria_fingerprint,
    confidences, confidence_source, application, slice, sent"""
_USAGE = """'{"prompt_tokens": 3000, "completion_tokens": 200, "total_tokens": 3200}'::jsonb"""
_POPULATE_SQL = [
    """INSERT INTO grading_draft (org_id, external_id, title, slug, body, source_urls, run_id, callback_url,
            fingerprint, created_at, updated_at, grading_task_id, end_user, metadata)
        SELECT %(org)s, 'd-' || g, 'Draft ' || g, 'draft-' || g, 'A body.', '[]'::jsonb, '', '', 'fp1:d-' || g,
            now() - interval '30 days', now() - g * interval '1 second', '', '', '{}'::jsonb
        FROM generate_series(1, %(half)s) g""",
    """INSERT INTO grading_conversation (org_id, external_id, application, closed, started_at, last_activity_at,
            fingerprint, active_path_ids, branch_count, message_count, updated_at, grading_task_id, end_user, metadata)
        SELECT %(org)s, 'c-' || g, 'app-' || (g %% %(apps)s), true, now() - interval '40 days',
            now() - interval '39 days' + g * interval '1 second', 'fp1:c-' || g, '[]'::jsonb, 1, 6, now(), '', '',
            '{}'::jsonb
        FROM generate_series(1, %(half)s) g""",
    f"""INSERT INTO grading_review ({_REVIEW_COLUMNS})
        SELECT %(org)s, 'draft', NULL, d.id, d.fingerprint, %(dc)s, '{{}}'::jsonb, 'bench', 'mem1:bench', now(), now(),
            1, CASE WHEN d.id %% 4 = 0 THEN 'fail' ELSE 'pass' END, '', '', '{{}}'::jsonb, 7.5, 7.5, true, NULL,
            '{{}}'::jsonb, '[]'::jsonb, '[]'::jsonb, NULL, '{{}}'::jsonb, {_USAGE}, 'current', false, '',
            '{{}}'::jsonb, '', '', '{{}}'::jsonb, ''
        FROM grading_draft d WHERE d.org_id = %(org)s""",
    f"""INSERT INTO grading_review ({_REVIEW_COLUMNS})
        SELECT %(org)s, 'conversation', c.id, NULL, c.fingerprint, %(cc)s, '{{}}'::jsonb, 'bench', '', now(), now(),
            1 + (c.id %% 3 = 0)::int, CASE WHEN c.id %% 5 = 0 THEN 'fail' ELSE 'pass' END, '', '', '{{}}'::jsonb,
            NULL, NULL, NULL, NULL, '{{}}'::jsonb, '[]'::jsonb, '[]'::jsonb, NULL, '{{}}'::jsonb, {_USAGE}, 'current',
            false, '', '{{}}'::jsonb, '', c.application, '{{}}'::jsonb, ''
        FROM grading_conversation c WHERE c.org_id = %(org)s""",
    # Superseded history: older reviews of other evidence, spread over every item.
    f"""INSERT INTO grading_review ({_REVIEW_COLUMNS})
        SELECT r.org_id, r.kind, r.conversation_id, r.draft_id, 'fp1:old-' || h, r.criteria_version_id, r.judge,
            'old-' || h, r.memory_snapshot, r.started_at - interval '1 day', r.finished_at - interval '1 day',
            r.stages, r.route, '', '', r.checks, r.score, r.judge_score, r.judge_passed, r.spread, r.sub_scores,
            r.findings, r.judge_issues, r.repairs, r.memory_used, r.usage, 'superseded', false, '', '{{}}'::jsonb, '',
            r.application, r.slice, ''
        FROM generate_series(1, %(history)s) h
        JOIN grading_review r
          ON r.id = (SELECT min(id) FROM grading_review WHERE org_id = %(org)s) + (h %% %(items)s)""",
]

# ruff: noqa: S608 - the bulk-insert SQL is assembled from this module's constants; values are parameters.
"""The stakeholders' dashboard at 1,000,000 reviews: the page and the JSON from the rollups against a trivial view
in the same run, the same figures from a live GROUP BY over the raw tables (results compared, time ratio), the
rollup rebuild (and, as its yardstick, the same counters from the upkeep's Python form over every review: the figures
keep a SQL form for the rebuild because of it), and the export's rows per second and peak memory.

Rows are bulk-inserted with INSERT ... SELECT generate_series: conversations of five applications over 26 ISO
weeks and drafts, each with one counting review (routes, checks and the judge's confidences, decisions, the audit
mark, labels and thumbs mixed in: three labellers on two conversations in three, and five people's answers on every
item for people, for the people-against-people figures), and superseded
history up to the total. Requests go through Django's test client in process (every
middleware, a signed-in stakeholder, real PostgreSQL). CPU is reported beside wall time: this process's, and the
database backend's (read from /proc for the backend serving this connection; the bench's server is local).

BENCH_DASHBOARD_REVIEWS (default 1000000) scales it. BENCH_DASHBOARD_CHECKS=12 gives the conversation version
twelve checks (issue 39: today's three, five verdicts of its own, two categories and two scores), answered on every
review and by every decision and answer, against today's three (the default): run both and read each page against
the trivial view of its own run.

`phases()`, for `bench.compare`, offers the export as the page and the API stream it, at BENCH_DASHBOARD_REVIEWS or
50,000 reviews: the conversations people decide (five answers each), those the machine passed or failed (none), and
every conversation as JSONL.
"""

import json
import os
import re
import resource
import statistics
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from functools import partial
from importlib import import_module

from django.contrib.auth import get_user_model
from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, transaction
from django.http import HttpRequest, HttpResponse
from django.template import RequestContext, Template
from django.test import Client
from django.test.utils import override_settings
from django.urls import NoReverseMatch, clear_url_caches, path, reverse
from django.utils import timezone

from bench.common import backend_cpu, fresh_org
from grading.api.keys import api_key_create
from grading.checks.definitions import AnswerKind, CheckDefinition, CheckSet
from grading.core.weeks import monday, monday_sql
from grading.dashboard.certified import certified_figures
from grading.dashboard.figures import dashboard_figures, iso_week, scope_for
from grading.models import COUNTING_STATES, CriteriaVersion, ItemKind, Review, state_now
from grading.models.criteria import default_checks
from grading.reviews.rollups import (
    ERASED,
    _contributions_read,
    _contributions_select,
    live_counters,
    rollups_rebuild,
    stored_counters,
)
from grading.reviews.versions import criteria_active
from reviewer import urls as reviewer_urls
from reviewer.access import EVERY_ROLE, role_required
from reviewer.dashboards import export, reads
from reviewer.models import Membership, Role

RUNS = 15
WARMUP = 3
WEEKS = 26
ANSWERERS = 5  # every item for people is answered by five people (reviewer slots), the first three also decide


@role_required(*EVERY_ROLE)
def trivial(request: HttpRequest) -> HttpResponse:
    """The yardstick: the same middleware, sign-in and role check, and the site layout around one word."""
    template = Template('{% extends "_base.html" %}{% block content %}ok{% endblock %}')
    return HttpResponse(template.render(RequestContext(request, {})))


urlpatterns = [path("bench/trivial/", trivial), *reviewer_urls.urlpatterns]


@contextmanager
def _clock(out: dict):
    wall, cpu, db = time.perf_counter(), time.process_time(), backend_cpu()
    yield
    out["wall"] = time.perf_counter() - wall
    out["cpu"] = time.process_time() - cpu
    out["db_cpu"] = backend_cpu() - db


def main() -> None:
    total = int(os.environ.get("BENCH_DASHBOARD_REVIEWS", "1000000"))
    org = fresh_org()
    started = time.perf_counter()
    counts = _populate(org, total)
    print(
        f"populated {counts['conversations']:,} conversations and {counts['drafts']:,} drafts with a counting review "
        f"each, {counts['reviews']:,} reviews in all, {counts['decisions']:,} decisions, {counts['labels']:,} labels, "
        f"{counts['answers']:,} answers, "
        f"{counts['feedback']:,} thumbs in {time.perf_counter() - started:.0f} s"
    )
    clock: dict = {}
    with _clock(clock):
        rebuild = rollups_rebuild(org_id=org.pk)
    print(
        f"rollup rebuild (the live GROUP BY in one snapshot, its drift booked): {clock['wall']:.1f} s wall, "
        f"{clock['cpu']:.1f} s CPU here, {clock['db_cpu']:.1f} s database CPU; {rebuild.rows:,} counters"
    )
    in_python: dict = {}
    with _clock(in_python):
        counted = _rebuild_in_python(org.pk)
    stored = {k: v for k, v in stored_counters(org_ids=[org.pk]).items() if k[5] not in ("thumbs", ERASED)}
    print(
        f"the same counters from the upkeep's Python form over every review (`contributions`, the rebuild done the "
        f"other way): {in_python['wall']:.1f} s wall, {in_python['cpu']:.1f} s CPU here, "
        f"{in_python['db_cpu']:.1f} s database CPU; {'equal' if counted == stored else 'DIFFERENT'}"
    )
    _bench_counting(org)

    client, key = _stakeholder(org)
    half_year = _half_year()
    with override_settings(ROOT_URLCONF=__name__):
        clear_url_caches()
        try:
            results = [(name, *_measure(client, url, extra)) for name, url, extra in _pages(key)]
        finally:
            clear_url_caches()
    baseline = results[0][1]
    print(f"{'request':<40} {'median ms':>10} {'p90 ms':>8} {'vs trivial':>11} {'cpu ms':>8} {'db cpu ms':>10}")
    for name, median, p90, cpu, db_cpu in results:
        print(f"{name:<40} {median:>10.1f} {p90:>8.1f} {median / baseline:>10.1f}x {cpu:>8.1f} {db_cpu:>10.1f}")

    scope = scope_for(org, since=half_year["from"], until=half_year["to"])
    from_rollup, from_live = {}, {}
    with _clock(from_rollup):
        rollup_figures = _comparable(dashboard_figures(scope))
    with _clock(from_live):
        live_figures = _comparable(dashboard_figures(scope, rows=live_counters(org_ids=[org.pk])))
    same = rollup_figures == live_figures
    print(
        f"figures for {WEEKS} weeks: from the rollup {from_rollup['wall'] * 1000:.1f} ms "
        f"(db cpu {from_rollup['db_cpu'] * 1000:.0f} ms); from a live GROUP BY over the raw tables "
        f"{from_live['wall'] * 1000:.0f} ms (db cpu {from_live['db_cpu'] * 1000:.0f} ms): "
        f"{from_live['wall'] / from_rollup['wall']:.0f}x slower; results {'equal' if same else 'DIFFERENT'}"
    )
    if not same:
        raise SystemExit("the rollup's figures differ from the live GROUP BY")
    for sample, people in json.loads(rollup_figures)["agreement"]["conversation"]["people"].items():
        grounded = people["checks"]["grounded"]
        pairs = grounded.get("pairs", [])
        print(
            f"people against people on grounded ({sample}), from the rollup's counters: {grounded['answers']:,} "
            f"answers on {grounded['items']:,} items, Fleiss' kappa {grounded['fleiss_kappa']:.3f}, "
            f"Krippendorff's alpha {grounded['krippendorff_alpha']:.3f}"
            + (f"; Cohen's kappa for {len(pairs)} pairs of people, n {pairs[0]['n']:,} each" if pairs else "")
        )
    _bench_export(org, scope)


PHASE_REQUESTS = 10


@contextmanager
def phases() -> Iterator[dict[str, Callable[[], None]]]:
    """For `bench.compare`: the org populated once at `BENCH_DASHBOARD_REVIEWS` (1,000,000 by default) and its
    counters rebuilt, then each request of `main`'s table but the list, `PHASE_REQUESTS` requests a phase, and the
    certified panel over 26 weeks (one request: it read every review of its scope before it read counters), and the
    export streamed whole three ways (`--phase export` alone, at a smaller BENCH_DASHBOARD_REVIEWS, keeps a run
    short). With `BENCH_DASHBOARD_FIGURES=<directory>`, each side first writes what the dashboard's JSON answers (8
    and 26 weeks) and the certified panel's figures to `<directory>/<its database>.json`, to compare the two sides'
    files."""
    org = fresh_org()
    _populate(org, int(os.environ.get("BENCH_DASHBOARD_REVIEWS", "1000000")))
    rollups_rebuild(org_id=org.pk)
    client, key = _stakeholder(org)
    with override_settings(ROOT_URLCONF=__name__):
        clear_url_caches()
        try:
            if directory := os.environ.get("BENCH_DASHBOARD_FIGURES"):
                path = os.path.join(directory, f"{connection.settings_dict['NAME']}.json")
                _figures_written(org, path, _page_cards(client))
            named = {f"{name} ({PHASE_REQUESTS} requests)": partial(_requests, client, url, extra, PHASE_REQUESTS)
                     for name, url, extra in _pages(key) if "behind" not in name}  # fmt: skip
            certified = f"/dashboard/certified/?{_query(_half_year())}"
            named[f"certified panel, {WEEKS} weeks (1 request)"] = partial(_requests, client, certified, {}, 1)
            # Naming the export's phases streams three whole exports first (minutes at 1,000,000 reviews): a run of
            # the pages alone leaves them out (BENCH_DASHBOARD_EXPORT=0).
            yield named | (_export_phases(org) if os.environ.get("BENCH_DASHBOARD_EXPORT") != "0" else {})
        finally:
            clear_url_caches()


def _stakeholder(org) -> tuple[Client, str]:
    """A signed-in stakeholder's client and an API key of the org."""
    user = get_user_model().objects.create_user(username="bench-stakeholder", password="unused-bench-password")
    Membership.objects.create(user=user, org=org, role=Role.STAKEHOLDER)
    client = Client(SERVER_NAME="localhost")
    client.force_login(user)
    return client, api_key_create(org=org, name="bench").plaintext


def _half_year() -> dict[str, str]:
    this_week = monday(timezone.now())
    return {"from": iso_week(this_week - timedelta(weeks=WEEKS - 1)), "to": iso_week(this_week)}


def _query(weeks: dict[str, str]) -> str:
    return "&".join(f"{k}={v}" for k, v in weeks.items())


def _pages(key: str) -> list[tuple[str, str, dict]]:
    """The requests measured: name, URL and the request's extra headers."""
    this_week, query = iso_week(monday(timezone.now())), _query(_half_year())
    return [
        ("trivial view (layout only)", "/bench/trivial/", {}),
        ("dashboard page, last 8 weeks", "/dashboard/", {}),
        (f"dashboard page, {WEEKS} weeks", f"/dashboard/?{query}", {}),
        (f"JSON /api/v1/dashboard, {WEEKS} weeks", f"/api/v1/dashboard?{query}",
         {"HTTP_AUTHORIZATION": f"Bearer {key}"}),
        ("reviews behind a number (1 week)", f"/dashboard/reviews/?from={this_week}&to={this_week}&route=pass", {}),
    ] + [
        (f"statistics {of}, {WEEKS} weeks", f"/dashboard/statistics/?{query}&of={of}", {"HTTP_HX_REQUEST": "true"})
        for of in _statistics_sections()
    ] + [
        (f"section {name}, {WEEKS} weeks", f"{reverse(f'dashboard_{name}')}?{query}", {"HTTP_HX_REQUEST": "true"})
        for name in _sections_apart()
    ]  # fmt: skip


def _statistics_sections() -> list[str]:
    """The page's statistics sections loaded when opened (none before 2431fa3: the page held them)."""
    try:
        reverse("dashboard_statistics")
    except NoReverseMatch:
        return []
    return ["judge", "people"]


def _sections_apart() -> list[str]:
    """The page's sections loaded apart on load, each its own request (none before speed/dashboard4: the page held
    them): the queue's health and service-level targets, the draft gate's weeks, the judge's spend."""
    try:
        reverse("dashboard_queue")
    except NoReverseMatch:
        return []
    return ["queue", "service", "gate", "spend"]


# Each card of the page (and of its statistics sections) from its id to the next card or the end of its section.
_CARD = re.compile(r'<(?:div|table) class="card[^"]*" id="([^"]+)"')


def _cards(html: str) -> dict[str, str]:
    starts = [(m.start(), m.group(1)) for m in _CARD.finditer(html)] + [(len(html), "")]
    cards = {}
    for (start, name), (end, _) in zip(starts, starts[1:], strict=False):
        block = html[start:end]
        for stop in ("</details>", "\n<details", "\n<h2", "\n\n"):
            block = block.split(stop, 1)[0]
        cards[name] = _UNSTEADY.sub("", block).strip()
    return cards


# What differs between two sides' pages whatever their code: the CSRF token, and the times of each side's rebuild.
_UNSTEADY = re.compile(r"[A-Za-z0-9]{64}|\d{4}-\d{2}-\d{2} \d{2}:\d{2}")


def _page_cards(client: Client) -> dict[str, str]:
    """What each card of the dashboard page over 26 weeks shows, with its statistics sections' and the sections it
    loads apart, wherever they are loaded from (a section's card after the page's placeholder of it): two commits'
    pages are compared card by card."""
    cards = {}
    for name, url, extra in _pages(""):
        if name.startswith((f"dashboard page, {WEEKS}", "statistics", "section")):
            cards |= _cards(client.get(url, **extra).content.decode())
    return cards


def _requests(client: Client, url: str, extra: dict, count: int) -> None:
    for _ in range(count):
        assert client.get(url, **extra).status_code == 200, url


def _figures_written(org, path: str, cards: dict[str, str]) -> None:
    """What the dashboard's JSON holds for the last 8 and 26 weeks, less what ticks between reads and when the
    rebuild ran, the certified panel's figures over 26 weeks and the page's `cards`, as one file."""
    half_year = _half_year()
    scopes = {"8 weeks": scope_for(org), f"{WEEKS} weeks": scope_for(org, since=half_year["from"],
                                                                     until=half_year["to"])}  # fmt: skip
    figures = {name: json.loads(_comparable(dashboard_figures(scope))) for name, scope in scopes.items()}
    for written in figures.values():
        written["staleness"].pop("mismatched_checked_at")  # when this side's rebuild ran
    figures["certified"] = certified_figures(scopes[f"{WEEKS} weeks"])
    figures["cards"] = cards
    with open(path, "w") as out:
        json.dump(figures, out, cls=DjangoJSONEncoder, sort_keys=True, indent=1)


def _export_phases(org) -> dict[str, Callable[[], None]]:
    """The export streamed whole, as the page and the API stream it: named with its rows, for a rate per row."""
    this_week = monday(timezone.now())
    scope = scope_for(org, since=iso_week(this_week - timedelta(weeks=WEEKS - 1)), until=iso_week(this_week))
    exports = {
        "export CSV, conversations people decide (five answers each)": ("csv", "human"),
        "export CSV, conversations passed or failed (no answers)": ("csv", "pass,fail"),
        "export JSONL, every conversation": ("jsonl", ""),
    }
    named = {}
    for name, (file_format, route) in exports.items():
        f = reads.ReviewFilter(kind=ItemKind.CONVERSATION, route=route or "")
        rows = sum(1 for _ in _export_lines(org, scope, f, file_format)) - (file_format == "csv")
        named[f"{name}: {rows:,} rows"] = partial(_export_lines_consumed, org, scope, f, file_format)
    return named


def _export_lines(org, scope, f: reads.ReviewFilter, file_format: str) -> Iterator[str]:
    """The lines of an export as the page's view and the API stream them (no reader: an org key)."""
    reviews = reads.reviews_behind(org, scope, f)
    checks = reads.checks_asked(org, f.kind)
    columns = export.columns_for(checks)
    rows = export.export_rows(reviews, f=f, reader_id=None, checks=checks)
    return export.as_csv(rows, columns) if file_format == "csv" else export.as_jsonl(rows, columns)


def _export_lines_consumed(org, scope, f: reads.ReviewFilter, file_format: str) -> None:
    for _ in _export_lines(org, scope, f, file_format):
        pass


def _bench_counting(org) -> None:
    """Which reviews count now (`ReviewState`), the rule every list and count picks reviews by: its SQL form (a
    count through `counting()`) against deciding it in Python (`state_now`) for every review of the org, which is
    what a list would have to read to find its page without the filter."""
    in_sql: dict = {}
    with _clock(in_sql):
        filtered = Review.objects.filter(org=org).counting().count()
    in_python: dict = {}
    with _clock(in_python):
        rows = Review.objects.filter(org=org).values_list("state", "criteria_version__is_active")
        decided = sum(
            1 for stored, active in rows.iterator(chunk_size=10_000)
            if state_now(stored, criteria_active=active) in COUNTING_STATES
        )  # fmt: skip
    print(
        f"which reviews count: the filter in SQL (counting().count()) {in_sql['wall'] * 1000:.0f} ms wall, "
        f"{in_sql['db_cpu'] * 1000:.0f} ms database CPU; decided in Python for every review "
        f"{in_python['wall']:.1f} s wall, {in_python['cpu']:.1f} s CPU here; "
        f"{'equal' if filtered == decided else 'DIFFERENT'} ({decided:,})"
    )


def _rebuild_in_python(org_id: int) -> dict:
    """Every counter the org's reviews contribute, computed by the upkeep's form (grading/figures/definitions.py
    `contributions`, over the rows the upkeep reads), streamed from a server-side cursor: what the hourly rebuild
    would cost with one form of the figures."""
    total: Counter = Counter()
    with transaction.atomic(), connection.chunked_cursor() as cursor:
        cursor.execute(_contributions_select("grading_review") + "WHERE r.org_id = %s", [org_id])
        while rows := cursor.fetchmany(5_000):
            total.update(_contributions_read(rows))
    return {key: value for key, value in total.items() if value}


def _comparable(figures: dict) -> str:
    figures = dict(figures)
    figures.pop("generated_at")
    figures["queue"] = {k: v for k, v in figures["queue"].items() if k != "oldest_wait_seconds"}  # ticks between reads
    figures["staleness"] = {k: v for k, v in figures["staleness"].items() if k != "rollup"}  # about the rollup itself
    return json.dumps(figures, cls=DjangoJSONEncoder, sort_keys=True)


def _measure(client: Client, url: str, extra: dict) -> tuple[float, float, float, float]:
    for _ in range(WARMUP):
        assert client.get(url, **extra).status_code == 200, url
    timings, cpus, db_cpus = [], [], []
    for _ in range(RUNS):
        clock: dict = {}
        with _clock(clock):
            response = client.get(url, **extra)
        assert response.status_code == 200
        timings.append(clock["wall"] * 1000)
        cpus.append(clock["cpu"] * 1000)
        db_cpus.append(clock["db_cpu"] * 1000)
    timings.sort()
    return (
        statistics.median(timings),
        timings[int(len(timings) * 0.9) - 1],
        statistics.median(cpus),
        statistics.median(db_cpus),
    )


def _bench_export(org, scope) -> None:
    """Stream the export (conversations over the whole range): rows per second untraced; then Python's peak
    allocation under tracemalloc for a tenth of the rows and for all of them (flat if it streams)."""
    reviews = reads.reviews_behind(org, scope, reads.ReviewFilter(kind=ItemKind.CONVERSATION))
    checks = reads.checks_asked(org, ItemKind.CONVERSATION)
    columns = export.columns_for(checks)
    clock: dict = {}
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with _clock(clock):
        rows = (
            sum(
                line.count("\n")
                for line in export.as_csv(
                    export.export_rows(reviews, f=reads.ReviewFilter(), reader_id=None, checks=checks), columns
                )
            )
            - 1
        )
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        f"export CSV: {rows:,} rows in {clock['wall']:.1f} s = {rows / clock['wall']:,.0f} rows/s "
        f"({clock['cpu'] / rows * 1e6:.0f} µs CPU per row here, db cpu {clock['db_cpu']:.1f} s); "
        f"peak RSS grew by {(rss_after - rss_before) / 1024:.0f} MiB"
    )
    peaks = []
    for limit in (rows // 10, rows):
        ids = reviews.order_by("pk").values_list("pk", flat=True)
        upper = ids[limit - 1 : limit].get()
        tracemalloc.start()
        consumed = sum(
            1
            for _ in export.as_jsonl(
                export.export_rows(
                    reviews.filter(pk__lte=upper), f=reads.ReviewFilter(), reader_id=None, checks=checks
                ),
                columns,
            )
        )
        peaks.append((consumed, tracemalloc.get_traced_memory()[1]))
        tracemalloc.stop()
    print(
        "export JSONL peak Python allocation: "
        + ", ".join(f"{n:,} rows {peak / 2**20:.1f} MiB" for n, peak in peaks)
        + f" (chunks of {export.CHUNK} rows from a server-side cursor)"
    )


def _now() -> datetime:
    """What the rows are dated back from: the hour begun (`BENCH_DASHBOARD_NOW`, an ISO time, fixes it), so two
    processes populating a minute apart (bench.compare's sides) write the same rows."""
    if fixed := os.environ.get("BENCH_DASHBOARD_NOW"):
        return datetime.fromisoformat(fixed)
    return timezone.now().replace(minute=0, second=0, microsecond=0)


def _populate(org, total: int, *, sliced: bool = False) -> dict[str, int]:
    """The org's rows (see the module's docstring). `sliced`: each conversation carries a release and an environment
    of 20 values each (`SLICES`), and its review is filed under both, as `review_record` files it when the org
    slices by them (bench/bench_slices.py); otherwise items carry no metadata."""
    drafts = total * 15 // 100
    conversations = total * 60 // 100
    history = max(0, total - drafts - conversations)
    operators = [get_user_model().objects.get_or_create(username=f"bench-operator-{n}")[0].pk for n in range(ANSWERERS)]
    version = criteria_active(org=org, kind=ItemKind.CONVERSATION)
    CriteriaVersion.objects.filter(pk=version.pk).update(checks=CHECK_SET.model_dump(mode="json"))
    params = {
        "org": org.pk,
        "cc": version.pk,
        "dc": criteria_active(org=org, kind=ItemKind.DRAFT).pk,
        "conversations": conversations,
        "drafts": drafts,
        "history": history,
        "days": WEEKS * 7,
        "ops": operators,
        "sliced": sliced,
        "now": _now(),
    }
    with connection.cursor() as cursor:
        for statement in _POPULATE_SQL:
            cursor.execute(statement, params)
    _pass_probabilities_filled()
    with connection.cursor() as cursor:
        out = {}
        for table, name in (("grading_review", "reviews"), ("grading_decision", "decisions"),
                            ("grading_label", "labels"), ("grading_answer", "answers"),
                            ("grading_feedback", "feedback")):  # fmt: skip
            cursor.execute(f"VACUUM ANALYZE {table}")
            cursor.execute(f"SELECT count(*) FROM {table}")
            out[name] = cursor.fetchone()[0]
        cursor.execute("VACUUM ANALYZE grading_conversation")
        cursor.execute("VACUUM ANALYZE grading_draft")
    return {"conversations": conversations, "drafts": drafts, **out}


def _pass_probabilities_filled() -> None:
    """The rows are written past the grading path, which stores each review's pass probability: filled as the
    migration filled the reviews written before it was stored (none to fill on a commit from before it, a base side
    of bench.compare)."""
    try:
        migration = import_module("grading.migrations.0044_review_pass_probability")
    except ModuleNotFoundError:
        return
    migration.pass_probabilities_fill(CriteriaVersion, Review)


_REVIEW_COLUMNS = """org_id, kind, conversation_id, draft_id, fingerprint, criteria_version_id, judge, judge_key,
    memory_snapshot, started_at, finished_at, stages, route, reason, detail, checks, score, judge_score, judge_passed,
    spread, sub_scores, findings, judge_issues, repairs, memory_used, usage, state, audit, application, week,
    submitted_at, criteria_fingerprint, confidences, confidence_source, slice, sent"""
SLICES = 20  # values of each of the two dimensions, when sliced
# A conversation's metadata by its number g: release r0..r19 by g, environment e0..e19 by g / 20 (every pair seen).
_METADATA = f"""CASE WHEN %(sliced)s THEN jsonb_build_object('release', 'r' || (g %% {SLICES}),
    'environment', 'e' || (g / {SLICES} %% {SLICES})) ELSE '{{}}'::jsonb END"""
_JUDGE = """'{"backend": "openai", "model": "bench", "prompt_hash": "b3nch000", "temperature": 0}'::jsonb"""
_CHECK = """jsonb_build_object('verdict', {v}, 'message_ids', '["m2"]'::jsonb, 'rationale', 'bench')"""
# Conversation g: route by g % 10 (0-5 pass, 6-7 fail, 8-9 a person: 8 decided, 9 waiting); every 97th pass is in
# the audit sample (decided); started over the last 26 weeks, one an hour back from now.
_CONVERSATION_ROUTE = "CASE WHEN g %% 10 < 6 THEN 'pass' WHEN g %% 10 < 8 THEN 'fail' ELSE 'human' END"

# The conversation version's checks: today's three, or twelve (BENCH_DASHBOARD_CHECKS=12).
_OWN = [
    *(CheckDefinition(key=f"own_{n}", name=f"Own {n}", question="A verdict of the version's own?") for n in range(5)),
    *(
        CheckDefinition(
            key=key, name=key, question="Which?", kind=AnswerKind.CATEGORY, categories=["a", "b", "c"], required=False
        )
        for key in ("intent", "tone")
    ),
    *(
        CheckDefinition(key=key, name=key, question="How good?", kind=AnswerKind.SCORE, required=False)
        for key in ("helpful", "clarity")
    ),
]
TWELVE = int(os.environ.get("BENCH_DASHBOARD_CHECKS", "3")) == 12
CHECK_SET = CheckSet(checks=[*default_checks(ItemKind.CONVERSATION).checks, *(_OWN if TWELVE else [])])
# Each check of its own answered on every review (by g, the conversation's number) and by every decision and answer
# (by the review's id): mostly alike, the categories and scores spread.
_ANSWER_OF = {
    "verdict": "CASE WHEN ({n}) %% 9 = 0 THEN 'fail' ELSE 'pass' END",
    "category": "(ARRAY['a', 'b', 'c'])[1 + ({n}) %% 3]",
    "score": "(1 + ({n}) %% 5)::text",
}
_OWN_REVIEW_CHECKS = "".join(
    f", '{c.key}', " + _CHECK.format(v=_ANSWER_OF[c.kind].format(n=f"x.g + {i}")) for i, c in enumerate(_OWN) if TWELVE
)
_OWN_PEOPLE_CHECKS = "".join(
    f", '{c.key}', " + _ANSWER_OF[c.kind].format(n=f"r.id + {i}") for i, c in enumerate(_OWN) if TWELVE
)

# How sure the judge was of each answer, by g: 0.55 to 0.99 in hundredths (few of them a float's exact value), so the
# judge's pass probabilities (certified panel) are spread and seldom a multiple of the counters' fixed point.
_SURE = "round(0.55 + (x.g %% {n}) / 100.0, 2)"
_CONVERSATION_CONFIDENCES = (
    f"jsonb_build_object('grounded', {_SURE.format(n=45)}, 'complete', {_SURE.format(n=37)}, 'usable', "
    f"{_SURE.format(n=29)})"
)

_POPULATE_SQL = [
    f"""INSERT INTO grading_conversation (org_id, external_id, application, closed, started_at, last_activity_at,
            fingerprint, active_path_ids, branch_count, message_count, updated_at, grading_task_id, end_user, metadata)
        SELECT %(org)s, 'c-' || g, 'app-' || (g %% 5), true,
            %(now)s - (g %% (%(days)s * 24)) * interval '1 hour' - interval '1 hour',
            %(now)s - (g %% (%(days)s * 24)) * interval '1 hour' - interval '50 minutes',
            'fp1:c-' || g, '["m1", "m2"]'::jsonb, 1, 2, %(now)s, '', '', {_METADATA}
        FROM generate_series(1, %(conversations)s) g""",
    f"""INSERT INTO grading_review ({_REVIEW_COLUMNS})
        SELECT %(org)s, 'conversation', c.id, NULL, c.fingerprint, %(cc)s, {_JUDGE}, 'bench', '',
            c.last_activity_at, c.last_activity_at + interval '20 seconds', 1, x.route,
            CASE WHEN x.route = 'human' THEN 'unknown_check' ELSE '' END, '',
            jsonb_build_object(
                'grounded', {_CHECK.format(v="CASE WHEN x.route = 'fail' THEN 'fail' ELSE 'pass' END")},
                'complete', {_CHECK.format(v="CASE WHEN x.route = 'human' THEN 'unknown' ELSE 'pass' END")},
                'usable', {_CHECK.format(v="'pass'")}{_OWN_REVIEW_CHECKS}),
            NULL, NULL, NULL, NULL, '{{}}'::jsonb, '[]'::jsonb, '[]'::jsonb, NULL, '{{}}'::jsonb,
            jsonb_build_object('prompt_tokens', 2000 + x.g %% 700, 'completion_tokens', 150, 'total_tokens', 2150),
            CASE WHEN x.g %% 10 = 9 THEN 'waiting' WHEN x.g %% 10 = 8 OR x.audit THEN 'decided' ELSE 'current' END,
            x.audit, c.application, {monday_sql("c.started_at")}, c.last_activity_at, '', {_CONVERSATION_CONFIDENCES},
            'logprobs', c.metadata, ''
        FROM grading_conversation c
        CROSS JOIN LATERAL (SELECT substr(c.external_id, 3)::int AS g) n
        CROSS JOIN LATERAL (SELECT n.g, {_CONVERSATION_ROUTE.replace("g %%", "n.g %%")} AS route,
                            n.g %% 97 = 0 AND n.g %% 10 < 6 AS audit) x
        WHERE c.org_id = %(org)s""",
    """INSERT INTO grading_draft (org_id, external_id, title, slug, body, source_urls, run_id, callback_url,
            fingerprint, created_at, updated_at, grading_task_id, end_user, metadata)
        SELECT %(org)s, 'd-' || g, 'Draft ' || g, 'draft-' || g, 'body', '[]'::jsonb, '', '', 'fp1:d-' || g,
            %(now)s - (g %% (%(days)s * 24)) * interval '1 hour' - interval '2 hours',
            %(now)s - (g %% (%(days)s * 24)) * interval '1 hour' - interval '2 hours', '', '', '{}'::jsonb
        FROM generate_series(1, %(drafts)s) g""",
    # Draft g: 0-5 pass (every 7th repaired), 6-7 fail (a finding), 8 a person (every other one decided), 9 error.
    f"""INSERT INTO grading_review ({_REVIEW_COLUMNS})
        SELECT %(org)s, 'draft', NULL, d.id, d.fingerprint, %(dc)s, {_JUDGE}, 'bench', 'mem1:bench',
            d.updated_at + interval '1 minute', d.updated_at + interval '90 seconds', 1, x.route,
            CASE x.route WHEN 'human' THEN 'band' WHEN 'error' THEN 'JudgeUnavailable' ELSE '' END, '', '{{}}'::jsonb,
            CASE WHEN x.route = 'error' THEN NULL ELSE 5 + x.g %% 5 END, NULL, x.route = 'pass', NULL,
            CASE WHEN x.route = 'error' THEN '{{}}'::jsonb
                 ELSE jsonb_build_object('aeo', 1 + x.g %% 5, 'writing', 1 + x.g %% 4, 'org_fit', 2 + x.g %% 3) END,
            CASE WHEN x.route = 'fail' THEN jsonb_build_array(jsonb_build_object('code',
                (ARRAY['banned_word', 'filler_phrase', 'h2_not_question', 'internal_links'])[1 + x.g %% 4],
                'message', 'bench', 'severity', 'fatal', 'spans', '[]'::jsonb)) ELSE '[]'::jsonb END,
            '[]'::jsonb,
            CASE WHEN x.route = 'pass' AND x.g %% 7 = 0
                 THEN '{{"diff": "", "body": "", "applied": [{{"code": "dash"}}]}}'::jsonb END,
            '{{}}'::jsonb, '{{"prompt_tokens": 3000, "completion_tokens": 200, "total_tokens": 3200}}'::jsonb,
            CASE WHEN x.route = 'human' AND x.g %% 20 = 8 THEN 'decided' WHEN x.route = 'human' THEN 'waiting'
                 ELSE 'current' END,
            false, '', {monday_sql("d.updated_at + interval '90 seconds'")}, d.updated_at, '',
            CASE WHEN x.route = 'error' THEN '{{}}'::jsonb
                 ELSE jsonb_build_object('pass_fail', {_SURE.format(n=45)}) END,
            CASE WHEN x.route = 'error' THEN '' ELSE 'logprobs' END, '{{}}'::jsonb, ''
        FROM grading_draft d
        CROSS JOIN LATERAL (SELECT substr(d.external_id, 3)::int AS g) n
        CROSS JOIN LATERAL (SELECT n.g, CASE WHEN n.g %% 10 < 6 THEN 'pass' WHEN n.g %% 10 < 8 THEN 'fail'
                                              WHEN n.g %% 10 = 8 THEN 'human' ELSE 'error' END AS route) x
        WHERE d.org_id = %(org)s""",
    # Superseded history on conversations: older reviews of other evidence, kept, never counting.
    f"""INSERT INTO grading_review ({_REVIEW_COLUMNS})
        SELECT r.org_id, r.kind, r.conversation_id, NULL, 'fp1:old-' || h, r.criteria_version_id, r.judge,
            'old-' || h, '', r.started_at - interval '1 day', r.finished_at - interval '1 day', 1, 'pass', '', '',
            r.checks, NULL, NULL, NULL, NULL, '{{}}'::jsonb, '[]'::jsonb, '[]'::jsonb, NULL, '{{}}'::jsonb, r.usage,
            'superseded', false, r.application, r.week, r.submitted_at, '', '{{}}'::jsonb, '', r.slice, ''
        FROM generate_series(1, %(history)s) h
        JOIN grading_review r ON r.id = (SELECT min(id) FROM grading_review WHERE org_id = %(org)s
            AND kind = 'conversation') + (h %% %(conversations)s)""",
    f"""INSERT INTO grading_decision (org_id, review_id, basis, outcome, checks, note, decided_by_id, decided_at)
        SELECT r.org_id, r.id, 'one',
            CASE WHEN r.kind = 'draft' THEN 'approve' WHEN r.id %% 3 = 0 THEN 'fail' ELSE 'pass' END,
            CASE WHEN r.kind = 'draft' THEN '{{}}'::jsonb
                 ELSE jsonb_build_object('grounded', CASE WHEN r.id %% 3 = 0 THEN 'fail' ELSE 'pass' END,
                                         'complete', 'pass', 'usable', 'pass'{_OWN_PEOPLE_CHECKS}) END,
            'bench', (%(ops)s::int[])[1 + r.id %% 3], r.finished_at + (r.id %% 600) * interval '1 minute'
        FROM grading_review r WHERE r.org_id = %(org)s AND r.state = 'decided'""",
    # Five people's answers on every item for people, decided or not (all its places answered): the queue's
    # people-against-people figures. They mostly agree; one in four splits on grounded, one in five on a draft.
    f"""INSERT INTO grading_answer (org_id, review_id, person_id, fingerprint, outcome, checks, note, answered_at,
            slots)
        SELECT r.org_id, r.id, (%(ops)s::int[])[who], r.fingerprint,
            CASE WHEN r.kind = 'draft' THEN CASE WHEN (r.id + who) %% 5 = 0 THEN 'reject' ELSE 'approve' END
                 WHEN (r.id + who) %% 4 = 0 THEN 'fail' ELSE 'pass' END,
            CASE WHEN r.kind = 'draft' THEN '{{}}'::jsonb
                 ELSE jsonb_build_object('grounded', CASE WHEN (r.id + who) %% 4 = 0 THEN 'fail' ELSE 'pass' END,
                                         'complete', 'pass', 'usable', 'pass'{_OWN_PEOPLE_CHECKS}) END,
            '', r.finished_at + interval '1 minute', cardinality(%(ops)s::int[])
        FROM grading_review r CROSS JOIN generate_series(1, cardinality(%(ops)s::int[])) who
        WHERE r.org_id = %(org)s AND r.state IN ('decided', 'waiting')""",
    """INSERT INTO grading_label (org_id, kind, conversation_id, draft_id, fingerprint, check_name, verdict, labeller,
            source, labelled_at, created_at)
        SELECT c.org_id, 'conversation', c.id, NULL, c.fingerprint, 'grounded',
            CASE WHEN (c.id + who) %% 7 = 0 THEN 'unknown' WHEN c.id %% 4 = 0 THEN 'fail' ELSE 'pass' END,
            (ARRAY['qa', 'ann', 'bo'])[who], 'file:bench.csv', %(now)s, %(now)s
        FROM grading_conversation c CROSS JOIN generate_series(1, 3) who
        WHERE c.org_id = %(org)s AND c.id %% 3 <> 0""",
    """INSERT INTO grading_feedback (conversation_id, message_external_id, value, created_at)
        SELECT c.id, 'm2', CASE WHEN c.id %% 10 = 0 THEN 'up' ELSE 'down' END, %(now)s
        FROM grading_conversation c WHERE c.org_id = %(org)s AND c.id %% 10 IN (0, 3)""",
]

"""The dashboard sliced by two dimensions of 20 values each against none, at 1,000,000 reviews: two orgs populated
alike by bench_dashboard's bulk inserts (conversations of five applications over 26 weeks and drafts, decisions,
labels, answers, thumbs), in one of which each conversation carries a release and an environment and its review is
filed under both, as `review_record` files it when the org declares them. Each page as a ratio to a trivial view
measured in the same run (every middleware, a signed-in stakeholder, real PostgreSQL), CPU beside wall time: the
dashboard of each org, a slice's dashboard, the reviews behind a number in a slice, the comparison page of two
releases and its JSON. Then the hourly rebuild of each org (the sliced org books every counter three times), the
upkeep's Python form per review in each (what every grading write adds), and a slice's figures from its counters
against a live GROUP BY over the raw tables (equal, and how much faster).

BENCH_SLICES_REVIEWS (default 1000000) sets each org's reviews.

`phases()`, for `bench.compare`, offers the sliced org alone (populated and rebuilt once, at BENCH_SLICES_REVIEWS):
the trivial view, the comparison page of `release=r3` against `release=r7` over 26 weeks, its JSON, and the
dashboard of `release=r7` over 26 weeks, `PHASE_REQUESTS` requests a phase. With `BENCH_SLICES_FIGURES=<directory>`,
each side first writes what those requests answer (the JSON, the pages' HTML less the CSRF token and the rebuild's
time) and how many queries each makes to `<directory>/<its database>.json`, to compare the two sides' files.
"""

import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import date, timedelta
from functools import partial

from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext, override_settings
from django.urls import clear_url_caches
from django.utils import timezone

from bench.bench_dashboard import _UNSTEADY, WEEKS, _clock, _comparable, _measure, _populate
from bench.common import fresh_org
from grading.api.keys import api_key_create
from grading.core.weeks import monday
from grading.dashboard.figures import dashboard_figures, iso_week, scope_for
from grading.models import Org
from grading.reviews.rollups import _contributions_read, _contributions_select, live_counters, rollups_rebuild
from reviewer.models import Membership, Role

UPKEEP_SAMPLE = 20_000  # reviews read through the upkeep's Python form in each org


def main() -> None:
    total = int(os.environ.get("BENCH_SLICES_REVIEWS", "1000000"))
    plain = fresh_org("plain")
    sliced = Org.objects.create(name="Sliced", slug="sliced", dimensions=["release", "environment"])
    for org, is_sliced in ((plain, False), (sliced, True)):
        started = time.perf_counter()
        _populate(org, total, sliced=is_sliced)
        print(f"{org.slug}: {total:,} reviews populated in {time.perf_counter() - started:.0f} s")
        clock: dict = {}
        with _clock(clock):
            rebuild = rollups_rebuild(org_id=org.pk)
        print(
            f"{org.slug}: rollup rebuild {clock['wall']:.1f} s wall, {clock['cpu']:.1f} s CPU here, "
            f"{clock['db_cpu']:.1f} s database CPU; {rebuild.rows:,} counters"
        )
    for org in (plain, sliced):
        clock = {}
        with _clock(clock):
            booked = _upkeep(org.pk)
        print(
            f"{org.slug}: the upkeep's Python form over {UPKEEP_SAMPLE:,} reviews: "
            f"{clock['cpu'] / UPKEEP_SAMPLE * 1e6:.0f} µs CPU per review, {booked:,} counters booked"
        )

    client, key = _reader(plain, sliced)
    this_week, weeks, compare = _weeks()
    one_week = f"from={iso_week(this_week)}&to={iso_week(this_week)}"
    pages = [
        ("trivial view (layout only)", "/bench/trivial/", {}),
        ("dashboard, no dimensions, 8 weeks", "/dashboard/?org=plain", {}),
        ("dashboard, two dimensions, 8 weeks", "/dashboard/?org=sliced", {}),
        ("dashboard, release=r7, 8 weeks", "/dashboard/?org=sliced&slice=release%3Dr7", {}),
        (f"dashboard, no dimensions, {WEEKS} weeks", f"/dashboard/?org=plain&{weeks}", {}),
        (f"dashboard, release=r7, {WEEKS} weeks", f"/dashboard/?org=sliced&slice=release%3Dr7&{weeks}", {}),
        ("reviews behind a number, release=r7", f"/dashboard/reviews/?org=sliced&{one_week}&route=pass"
         "&slice=release%3Dr7", {}),
        (f"compare r3 against r7, {WEEKS} weeks", f"/dashboard/compare/?org=sliced&{compare}", {}),
        (f"JSON /api/v1/dashboard/compare, {WEEKS} weeks", f"/api/v1/dashboard/compare?{compare}",
         {"HTTP_AUTHORIZATION": f"Bearer {key}"}),
    ]  # fmt: skip
    with override_settings(ROOT_URLCONF="bench.bench_dashboard"):
        clear_url_caches()
        try:
            results = [(name, *_measure(client, url, extra)) for name, url, extra in pages]
        finally:
            clear_url_caches()
    baseline = results[0][1]
    print(f"{'request':<44} {'median ms':>10} {'p90 ms':>8} {'vs trivial':>11} {'cpu ms':>8} {'db cpu ms':>10}")
    for name, median, p90, cpu, db_cpu in results:
        print(f"{name:<44} {median:>10.1f} {p90:>8.1f} {median / baseline:>10.1f}x {cpu:>8.1f} {db_cpu:>10.1f}")

    scope = scope_for(sliced, since=iso_week(this_week - timedelta(weeks=WEEKS - 1)), slices=["release=r7"])
    from_rollup, from_live = {}, {}
    with _clock(from_rollup):
        rollup_figures = _comparable(dashboard_figures(scope))
    with _clock(from_live):
        live_figures = _comparable(dashboard_figures(scope, rows=live_counters(org_ids=[sliced.pk])))
    same = rollup_figures == live_figures
    quality = json.loads(rollup_figures)["quality"]["total"]
    print(
        f"release=r7 over {WEEKS} weeks ({quality['scored']:,} scored conversations): from its counters "
        f"{from_rollup['wall'] * 1000:.1f} ms; from a live GROUP BY {from_live['wall'] * 1000:.0f} ms "
        f"({from_live['wall'] / from_rollup['wall']:.0f}x slower); results {'equal' if same else 'DIFFERENT'}"
    )
    if not same:
        raise SystemExit("a slice's figures from its counters differ from the live GROUP BY")


def _reader(*orgs: Org) -> tuple[Client, str]:
    """A stakeholder of the orgs, signed in, and an API key of the last (the sliced one)."""
    user = get_user_model().objects.create_user(username="bench-stakeholder", password="unused-bench-password")
    for org in orgs:
        Membership.objects.create(user=user, org=org, role=Role.STAKEHOLDER)
    client = Client(SERVER_NAME="localhost")
    client.force_login(user)
    return client, api_key_create(org=orgs[-1], name="bench").plaintext


def _weeks() -> tuple[date, str, str]:
    """This week's Monday, the query of the last `WEEKS` weeks, and that of comparing r3 against r7 over them."""
    this_week = monday(timezone.now())
    weeks = f"from={iso_week(this_week - timedelta(weeks=WEEKS - 1))}&to={iso_week(this_week)}"
    return this_week, weeks, f"dimension=release&a=r3&b=r7&{weeks}"


PHASE_REQUESTS = 10


@contextmanager
def phases() -> Iterator[dict[str, Callable[[], None]]]:
    """For `bench.compare`: the sliced org populated at `BENCH_SLICES_REVIEWS` and its counters rebuilt, then the
    trivial view, the comparison page, its JSON and a slice's dashboard, `PHASE_REQUESTS` requests a phase (the
    module's docstring)."""
    org = fresh_org("sliced")
    org.dimensions = ["release", "environment"]
    org.save(update_fields=["dimensions"])
    _populate(org, int(os.environ.get("BENCH_SLICES_REVIEWS", "1000000")), sliced=True)
    rollups_rebuild(org_id=org.pk)
    client, key = _reader(org)
    _, weeks, compare = _weeks()
    pages = {
        "trivial view (layout only)": ("/bench/trivial/", {}),
        f"compare r3 against r7, {WEEKS} weeks": (f"/dashboard/compare/?org=sliced&{compare}", {}),
        f"JSON /api/v1/dashboard/compare, {WEEKS} weeks": (f"/api/v1/dashboard/compare?{compare}",
                                                           {"HTTP_AUTHORIZATION": f"Bearer {key}"}),
        f"dashboard, release=r7, {WEEKS} weeks": (f"/dashboard/?org=sliced&slice=release%3Dr7&{weeks}", {}),
    }  # fmt: skip
    with override_settings(ROOT_URLCONF="bench.bench_dashboard"):
        clear_url_caches()
        try:
            if directory := os.environ.get("BENCH_SLICES_FIGURES"):
                _answers_written(client, pages, os.path.join(directory, f"{connection.settings_dict['NAME']}.json"))
            yield {
                f"{name} ({PHASE_REQUESTS} requests)": partial(_requests, client, url, extra)
                for name, (url, extra) in pages.items()
            }
        finally:
            clear_url_caches()


def _requests(client: Client, url: str, extra: dict) -> None:
    for _ in range(PHASE_REQUESTS):
        assert client.get(url, **extra).status_code == 200, url


def _answers_written(client: Client, pages: dict[str, tuple[str, dict]], path: str) -> None:
    """Each request's answer (JSON parsed; HTML less what differs between two sides whatever their code:
    bench_dashboard's `_UNSTEADY`) and its queries, as one file."""
    answers = {}
    for name, (url, extra) in pages.items():
        with CaptureQueriesContext(connection) as queries:
            response = client.get(url, **extra)
        assert response.status_code == 200, url
        if response["Content-Type"].startswith("application/json"):
            body = json.loads(response.content)
        else:
            body = _UNSTEADY.sub("", response.content.decode())  # the CSRF token, the rebuild's time
        answers[name] = {"queries": len(queries), "body": body}
    with open(path, "w") as out:
        json.dump(answers, out, sort_keys=True, indent=1)


def _upkeep(org_id: int) -> int:
    """What the first UPKEEP_SAMPLE reviews of the org contribute, by the form every grading write books."""
    with transaction.atomic(), connection.chunked_cursor() as cursor:
        cursor.execute(
            _contributions_select("grading_review") + "WHERE r.org_id = %s ORDER BY r.id LIMIT %s",
            [org_id, UPKEEP_SAMPLE],
        )
        return len(_contributions_read(cursor.fetchall()))

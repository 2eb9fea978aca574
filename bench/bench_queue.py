# ruff: noqa: S608 - the bulk-insert SQL is assembled from this module's constants; values are parameters.
"""The review queue at scale: the queue page and both item pages over 100,000 open items and 1,000,000 reviews.

Rows are bulk-inserted with INSERT ... SELECT generate_series (the ORM would take minutes). Of the reviews:
the open items (half drafts, half conversations of 6 messages, each with a current review routed to humans);
decided items (current human reviews with a decision: they must not slow the queue down); items the machine
passed; and superseded history on all of them. Each page is requested through Django's test client in process
(every middleware, a signed-in operator, real PostgreSQL) and reported as the median server time, its ratio
to a trivial view measured in the same run, and its SQL query count.

Then the queue page and `claim_next` of operators whose memberships reach part of the org (one application of five;
three and the drafts): one queue index range per version and application, so no dearer than the whole queue.

Then service-level targets date every waiting item (the UPDATE timed), 20 pools of 5 operators (every membership
scoped to two applications and the drafts) get a rule each and every tenth item by hand, and the queue pages and
claim next are measured again: in due order, for a whole-org operator and a pool member. At the end, the escalation
sweep over the dated items: time and queries for a window where 1% go overdue, with none and with half of them
overdue before (it must cost the same).

Then two people are asked to decide half the items (reviewer slots, a share of 50%), a quarter of all waiting items
carry one answer, and the queue pages and `claim_next` are measured again: with places open, the queue must cost
what it cost before.

Two rules are measured against their other form (bench/README.md, "Rules kept in two forms"): a change of targets,
`due_times_refresh` (the one form: `due_time` per waiting review, one UPDATE from arrays), against the same rule as
one UPDATE with a CASE per target, which it replaced; and claim next with the rules' reservations in force (every
waiting item routed an hour ago) for an operator reaching one application whose items are all reserved for a pool
they are not in: `reserved_q` in the scan (kept) against deciding the reservations for the rows in hand
(`reservations_of` over the lane, a batch of `SCAN_BATCH` at a time, as claim next decides places; its p90 column
is the longest of five runs).

BENCH_QUEUE_ITEMS (open items, default 100000) and BENCH_QUEUE_REVIEWS (all reviews, default 1000000) scale it.

`phases()` offers the first table's pages and claim next to `bench.compare` (a commit against another), at a tenth of
that scale unless the two variables say otherwise: each phase `PHASE_REQUESTS` requests, claims rolled back. With
BENCH_QUEUE_SHOWN=<file> it first writes what the queue shows its operators and what claim next hands them (`_shown`):
two commits' files are equal (but for the reservations' clock times) when a change left what people see alone.
"""

import json
import os
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from datetime import timedelta
from functools import partial

from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.models import Case, DateTimeField, ExpressionWrapper, F, Q, When
from django.http import HttpRequest, HttpResponse
from django.template import RequestContext, Template
from django.test import Client
from django.test.utils import CaptureQueriesContext, override_settings
from django.urls import clear_url_caches, path
from django.utils import timezone

from bench.common import backend_cpu, fresh_org
from grading.models import CriteriaVersion, ItemKind, Review, ServiceTarget, SlotsFor
from grading.reviews.targets import due_times_refresh, selected_q, targets_of
from grading.reviews.versions import criteria_active
from reviewer import urls as reviewer_urls
from reviewer.access import role_required
from reviewer.models import Assignment, AssignmentRule, Escalation, Membership, Pool, Role
from reviewer.queue.assignments import reservations_of
from reviewer.queue.display import queue_page
from reviewer.queue.escalation import escalation_sweep
from reviewer.queue.reads import SCAN_BATCH, Lane, QueueFilters, key_of
from reviewer.queue.services import claim_next

RUNS = 25
HTMX_LIST = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "queue-list"}
WARMUP = 5
PHASE_REQUESTS = 10
MESSAGES_PER_CONVERSATION = 6


@role_required(Role.OPERATOR)
def trivial(request: HttpRequest) -> HttpResponse:
    """The yardstick: the same middleware, sign-in and role check, and the site layout around one word."""
    template = Template('{% extends "_base.html" %}{% block content %}ok{% endblock %}')
    return HttpResponse(template.render(RequestContext(request, {})))


urlpatterns = [path("bench/trivial/", trivial), *reviewer_urls.urlpatterns]


def main() -> None:
    items = int(os.environ.get("BENCH_QUEUE_ITEMS", "100000"))
    reviews = int(os.environ.get("BENCH_QUEUE_REVIEWS", "1000000"))
    org = fresh_org()
    started = time.perf_counter()
    counts = _populate(org, items, reviews)
    seconds = time.perf_counter() - started
    print(
        f"populated {counts['open']:,} open items, {counts['decided']:,} decided, {counts['passed']:,} passed by the "
        f"machine; {counts['reviews']:,} reviews, {counts['messages']:,} messages in {seconds:.0f} s"
    )
    user, client = _operator(org)
    with override_settings(ROOT_URLCONF=__name__):
        clear_url_caches()
        try:
            pages = _pages(user, org)
            results = [(name, *_measure(client, url, extra)) for name, url, extra in pages]
            for name, applications, drafts in LIMITED:
                limited, limited_client = _limited_operator(org, applications, drafts)
                results.append((f"queue page, {name}", *_measure(limited_client, "/queue/", {})))
                results.append((f"claim next, {name}", *_measure_claim_next(limited, org)))
            dated, teams = _targets_and_teams(org)
            print(f"then: targets date every waiting item; {teams['pools']} pools of {teams['members']}, every"
                  f" membership scoped, a rule per pool, {teams['assigned']:,} items assigned by hand")  # fmt: skip
            for name, (wall, cpu, db_cpu, written) in dated.items():
                print(f"  {name}: {wall:.2f} s wall, {cpu:.2f} s CPU here, {db_cpu:.2f} s database CPU,"
                      f" {written:,} reviews")  # fmt: skip
            results.append(("queue page, targets (due order)", *_measure(client, "/queue/", {})))
            results.append(
                ("queue page, page 2, targets", *_measure(client, f"/queue/?after={_page_end(user, org)}", {}))
            )
            member, member_client = teams["member"]
            results.append(("queue page, pool member, scoped", *_measure(member_client, "/queue/", {})))
            results.append(("claim next, pool member, scoped", *_measure_claim_next(member, org)))
            results.append(("claim next, targets", *_measure_claim_next(user, org)))
            places = _ask_two_people(org)
            print(f"then: two people decide half the items (a share of 50%); {places:,} waiting items answered once")
            results += [
                (f"{name}, places open", *_measure(client, url, extra)) for name, url, extra in pages[1:3] + pages[5:6]
            ]
            results.append(("claim next, places open", *_measure_claim_next(user, org)))
            outsider = _rules_in_force(org)
            results.append(("claim next, reserved for others (scan)", *_measure_claim_next(outsider, org, found=False)))
            results.append(("  the same, decided for rows in hand", *_measure_walk(outsider, org)))
        finally:
            clear_url_caches()
    baseline, cpu_baseline = results[0][1], results[0][3]
    print(
        f"{'page':<36} {'median ms':>10} {'p90 ms':>8} {'vs trivial':>11} {'cpu ms':>8} {'cpu vs trivial':>15} "
        f"{'queries':>8}"
    )
    for name, median, p90, cpu, queries in results:
        print(
            f"{name:<36} {median:>10.1f} {p90:>8.1f} {median / baseline:>10.1f}x {cpu:>8.1f} "
            f"{cpu / cpu_baseline:>14.1f}x {queries:>8}"
        )
    print("(cpu: this process's CPU per request, the web side; the database's own time is in the wall figures)")
    print(f"{'escalation sweep':<52} {'median ms':>10} {'cpu ms':>8} {'queries':>8}")
    for name, median, cpu, queries in sweep_bench(org):
        print(f"{name:<52} {median:>10.1f} {cpu:>8.1f} {queries:>8}")


@contextmanager
def phases() -> Iterator[dict[str, Callable[[], None]]]:
    """For `bench.compare`: the items populated once at a tenth of `main`'s scale (unless the variables say), dated by
    the targets and reserved by the pools' rules and assignments as in `main`'s third table (due order, every
    membership of the pools scoped), then each page of the first table, the queue pages of a pool member and of an
    operator reaching three applications and the drafts, and claim next of a whole-org operator and of the pool
    member, `PHASE_REQUESTS` requests a phase."""
    org = fresh_org()
    _populate(org, int(os.environ.get("BENCH_QUEUE_ITEMS", "10000")),
              int(os.environ.get("BENCH_QUEUE_REVIEWS", "100000")))  # fmt: skip
    user, client = _operator(org)
    _, teams = _targets_and_teams(org, yardstick=False)
    member, member_client = teams["member"]
    limited, limited_client = _limited_operator(org, *LIMITED[1][1:])
    if shown := os.environ.get("BENCH_QUEUE_SHOWN"):
        with open(shown, "w") as out:
            json.dump(_shown([user, member, limited]), out, indent=1, default=str, sort_keys=True)
    with override_settings(ROOT_URLCONF=__name__):
        clear_url_caches()
        try:
            named = {f"{name} ({PHASE_REQUESTS} requests)": partial(_requests, client, url, extra)
                     for name, url, extra in _pages(user, org)}  # fmt: skip
            yield named | {
                f"queue page, pool member, scoped ({PHASE_REQUESTS} requests)": partial(
                    _requests, member_client, "/queue/", {}
                ),
                f"queue page, {LIMITED[1][0]} ({PHASE_REQUESTS} requests)": partial(
                    _requests, limited_client, "/queue/", {}
                ),
                f"claim next ({PHASE_REQUESTS} claims, rolled back)": partial(_claims, user),
                f"claim next, pool member ({PHASE_REQUESTS} claims, rolled back)": partial(_claims, member),
            }
        finally:
            clear_url_caches()


def _shown(users) -> dict:
    """What the queue shows each of `users` and whom claim next hands which item (rolled back), at a moment fixed by
    the data (two hours after the last review): every filter's first page, the next and back again, as plain data.
    Two commits' files are equal when the queue shows the same (`BENCH_QUEUE_SHOWN`), but for the clock times a
    reservation ends at ("until 15:00"), which follow each side's set-up time."""
    now = Review.objects.order_by("-finished_at").values_list("finished_at", flat=True)[0] + timedelta(hours=2)
    shown = {}
    for user in users:
        for name, filters in (("all", QueueFilters()), ("assigned to me", QueueFilters(mine=True)),
                              ("app-2", QueueFilters(kind=ItemKind.CONVERSATION, application="app-2")),
                              ("overdue", QueueFilters(overdue=True))):  # fmt: skip
            pages = [queue_page(user=user, filters=filters, now=now)]
            if pages[0].next_cursor:
                pages.append(queue_page(user=user, filters=filters, after=pages[0].next_cursor, now=now))
                pages.append(queue_page(user=user, filters=filters, before=pages[1].previous_cursor, now=now))
            shown[f"{user.username}, {name}"] = [
                {"rows": [asdict(row) for row in page.rows], "counts": [asdict(count) for count in page.counts],
                 "total": page.total_label, "oldest": page.oldest, "next": page.next_cursor,
                 "previous": page.previous_cursor, "applications": page.applications, "slices": page.slices}
                for page in pages
            ]  # fmt: skip
            with transaction.atomic():
                claim = claim_next(user=user, filters=filters, now=now)
                shown[f"{user.username}, {name}, claim next"] = claim and claim.review_id
                transaction.set_rollback(True)
    return shown


def _operator(org):
    user = get_user_model().objects.create_user(username="bench-operator", password="unused-bench-password")
    Membership.objects.create(user=user, org=org, role=Role.OPERATOR)
    client = Client(SERVER_NAME="localhost")
    client.force_login(user)
    return user, client


def _pages(user, org) -> list[tuple[str, str, dict]]:
    """The first table's pages: name, URL and the request's extra headers."""
    waiting = Review.objects.filter(org=org, state="waiting").order_by("finished_at")
    draft_review = waiting.filter(kind=ItemKind.DRAFT).first()
    conversation_review = waiting.filter(kind=ItemKind.CONVERSATION).first()
    return [
        ("trivial view (layout only)", "/bench/trivial/", {}),
        ("queue page", "/queue/", {}),
        ("queue list partial (htmx refresh)", "/queue/", HTMX_LIST),
        ("queue, conversations of one app", "/queue/?kind=conversation&application=app-1", {}),
        ("queue, page 2", f"/queue/?after={_page_end(user, org)}", {}),
        ("draft item page", f"/queue/items/{draft_review.pk}/", {}),
        ("conversation item page", f"/queue/items/{conversation_review.pk}/", {}),
    ]


def _requests(client: Client, url: str, extra: dict) -> None:
    for _ in range(PHASE_REQUESTS):
        assert client.get(url, **extra).status_code == 200, url


def _claims(user) -> None:
    for _ in range(PHASE_REQUESTS):
        with transaction.atomic():
            assert claim_next(user=user) is not None
            transaction.set_rollback(True)


POOLS, MEMBERS = 20, 5


def _timed(write) -> tuple[float, float, float, int]:
    """Wall, CPU here and database CPU of `write()` (which returns how many rows it wrote), in seconds."""
    wall, cpu, db_cpu = time.perf_counter(), time.process_time(), backend_cpu()
    written = write()
    return time.perf_counter() - wall, time.process_time() - cpu, backend_cpu() - db_cpu, written


def _due_times_in_one_update(org_id: int) -> int:
    """The yardstick of `due_times_refresh`: the same rule as one UPDATE with a CASE branch per target, the SQL form
    it replaced."""
    due = Case(
        *[
            When(selected_q(target), then=ExpressionWrapper(
                F("routed_at") + timedelta(minutes=target.minutes), output_field=DateTimeField()))
            for target in targets_of(org_id)
        ],
        default=None,
        output_field=DateTimeField(),
    )  # fmt: skip
    return Review.objects.filter(org_id=org_id, state="waiting").update(due_at=due)


def _targets_and_teams(org, *, yardstick: bool = True) -> tuple[dict, dict]:
    """Targets for both kinds (every waiting item dated: `due_times_refresh` timed, and the CASE UPDATE beside it
    unless not `yardstick`); 20 pools of 5 operators whose memberships each reach two applications and the drafts; a
    rule per pool (its application, for four hours); and every tenth waiting item assigned by hand to a pool."""
    Review.objects.filter(org=org, state="waiting").update(routed_at=F("finished_at"))  # as the migration does
    ServiceTarget.objects.create(org=org, position=1, kind=ItemKind.DRAFT, minutes=60)
    ServiceTarget.objects.create(org=org, position=2, kind=ItemKind.CONVERSATION, minutes=24 * 60)
    dated: dict[str, tuple[float, float, float, int]] = {}
    if not yardstick:
        with transaction.atomic():
            due_times_refresh(org.pk)
    for _ in range(3 if yardstick else 0):  # alternately, each on a table the other has just rewritten; fastest kept
        for name, write in (("one UPDATE with a CASE per target", lambda: _due_times_in_one_update(org.pk)),
                            ("due_times_refresh", lambda: due_times_refresh(org.pk))):  # fmt: skip
            with transaction.atomic():
                timed = _timed(write)
            dated[name] = min(dated.get(name, timed), timed)
    users = get_user_model().objects.bulk_create(
        [get_user_model()(username=f"bench-pool-{n}") for n in range(POOLS * MEMBERS)]
    )
    Membership.objects.bulk_create([
        Membership(user=u, org=org, role=Role.OPERATOR, applications=[f"app-{n % 5}", f"app-{(n + 1) % 5}"])
        for n, u in enumerate(users)
    ])  # fmt: skip
    pools = []
    for n in range(POOLS):
        pool = Pool.objects.create(org=org, name=f"pool-{n}")
        pool.members.add(*users[n * MEMBERS : (n + 1) * MEMBERS])
        AssignmentRule.objects.create(org=org, position=n + 1, application=f"app-{n % 5}", pool=pool, hours=4)
        pools.append(pool)
    waiting = list(Review.objects.filter(org=org, state="waiting").values_list("pk", flat=True)[::10])
    now = timezone.now()
    Assignment.objects.bulk_create(
        [Assignment(org=org, review_id=pk, pool=pools[n % POOLS], assigned_at=now) for n, pk in enumerate(waiting)]
    )
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE grading_review")
        cursor.execute("VACUUM ANALYZE reviewer_assignment")
    member = users[0]
    client = Client(SERVER_NAME="localhost")
    client.force_login(member)
    return dated, {"pools": POOLS, "members": MEMBERS, "assigned": len(waiting), "member": (member, client)}


def _rules_in_force(org):
    """Every waiting item routed an hour ago, so the rules (four hours) reserve every conversation for a pool; and an
    operator reaching app-1 alone, in no pool: each of their items is reserved for pool-1 or assigned by hand."""
    Review.objects.filter(org=org, state="waiting").update(routed_at=timezone.now() - timedelta(hours=1))
    user = get_user_model().objects.create_user(username="bench-outsider", password="unused-bench-password")
    Membership.objects.create(user=user, org=org, role=Role.OPERATOR, applications=["app-1"], drafts=False)
    return user


def _measure_walk(user, org) -> tuple[float, float, float, int]:
    """Claim next's scan deciding reservations for the rows in hand: the lane read in queue order a batch at a time
    (`SCAN_BATCH`), each batch's reservations read (`reservations_of`: assignments, rules, pool members), until a row
    is free for the person (none is). A few runs: each takes seconds."""
    version = CriteriaVersion.objects.get(org=org, kind=ItemKind.CONVERSATION, is_active=True)
    rows = (
        Lane(version, "app-1").reviews(QueueFilters()).order_by(F("due_at").asc(nulls_last=True), "finished_at", "pk")
    )
    timings, cpu, queries = [], [], []

    def counted(execute, *args):
        queries[-1] += 1
        return execute(*args)

    for run in range(1 + 5):
        queries.append(0)
        with connection.execute_wrapper(counted), transaction.atomic():
            started, started_cpu = time.perf_counter(), time.process_time()
            now, after, found = timezone.now(), None, None
            while found is None:
                batch = list((rows.filter(_after(after)) if after else rows)[:SCAN_BATCH])
                reserved = reservations_of(batch, now)
                found = next((r for r in batch if r.pk not in reserved or reserved[r.pk].allows(user.pk)), None)
                if len(batch) < SCAN_BATCH:
                    break
                after = key_of(1, batch[-1])
            assert found is None
            if run:
                timings.append((time.perf_counter() - started) * 1000)
                cpu.append((time.process_time() - started_cpu) * 1000)
    timings.sort()
    return statistics.median(timings), timings[-1], statistics.median(cpu), queries[-1]


def _after(key) -> Q:
    """The rows after `key` in queue order (due time, none last; then finished_at, id), as claim next's scan reads
    them (reviewer/queue/reads.py `_beyond_sql`)."""
    _, due, finished, pk = key
    tail = Q(finished_at__gte=finished) & (Q(finished_at__gt=finished) | Q(pk__gt=pk))
    if due is None:
        return Q(due_at__isnull=True) & tail
    return Q(due_at__gt=due) | Q(due_at__isnull=True) | (Q(due_at=due) & tail)


def sweep_bench(org) -> list[tuple[str, float, float, int]]:
    """The overdue sweep over the dated items: a window in which 1% of them go overdue with none overdue before,
    and one as wide in items with half of them overdue before: time, CPU and queries, each run rolled back."""
    dues = list(Review.objects.filter(org=org, state="waiting", due_at__isnull=False).order_by("due_at")
                .values_list("due_at", flat=True))  # fmt: skip
    step = len(dues) // 100
    results = []
    connection.queries_log.clear()  # a full log (the walk's thousands of queries) would count none
    for label, start in (("none overdue before", 0), ("half overdue before", len(dues) // 2)):
        timings, cpu, queries = [], [], 0
        for run in range(WARMUP + RUNS):
            with transaction.atomic():
                escalation, _ = Escalation.objects.update_or_create(
                    org=org, defaults={"swept_until": dues[start] - timedelta(microseconds=1), "warn_minutes": 15}
                )
                with CaptureQueriesContext(connection) as captured:
                    started, started_cpu = time.perf_counter(), time.process_time()
                    swept = escalation_sweep(escalation, dues[start + step])
                    if run >= WARMUP:
                        timings.append((time.perf_counter() - started) * 1000)
                        cpu.append((time.process_time() - started_cpu) * 1000)
                queries = len(captured)
                transaction.set_rollback(True)
        noticed = len(swept.notices["overdue"])
        results.append((f"sweep, {noticed:,} newly overdue, {label}", statistics.median(timings),
                        statistics.median(cpu), queries))  # fmt: skip
    return results


# Operators whose memberships reach part of the org: one application of five and no drafts; three and the drafts.
LIMITED = [("one app only", ["app-1"], False), ("three apps and drafts", ["app-1", "app-2", "app-3"], True)]


def _limited_operator(org, applications: list[str], drafts: bool):
    name = f"bench-limited-{len(applications)}"
    user = get_user_model().objects.create_user(username=name, password="unused-bench-password")
    Membership.objects.create(user=user, org=org, role=Role.OPERATOR, applications=applications, drafts=drafts)
    client = Client(SERVER_NAME="localhost")
    client.force_login(user)
    return user, client


def _ask_two_people(org) -> int:
    """Both active versions ask two people of a 50% share of their items (by review id: every other waiting item
    has places), and one person has answered half of those: their places are half filled."""
    CriteriaVersion.objects.filter(org=org, is_active=True).update(slots=2, slots_for=SlotsFor.SHARE, slots_share=50)
    answerer = get_user_model().objects.create_user(username="bench-answerer", password="unused-bench-password")
    with connection.cursor() as cursor:
        cursor.execute(
            """INSERT INTO grading_answer (org_id, review_id, person_id, fingerprint, outcome, checks, note,
                    answered_at, slots)
                SELECT r.org_id, r.id, %s, r.fingerprint, CASE WHEN r.kind = 'draft' THEN 'approve' ELSE 'pass' END,
                    CASE WHEN r.kind = 'draft' THEN '{}'::jsonb ELSE
                        '{"grounded": "pass", "complete": "pass", "usable": "pass"}'::jsonb END, '', now(), 2
                FROM grading_review r WHERE r.org_id = %s AND r.state = 'waiting' AND r.id %% 100 < 25""",
            [answerer.pk, org.pk],
        )
        answered = cursor.rowcount
        cursor.execute("VACUUM ANALYZE grading_answer")
    return answered


def _measure_claim_next(user, org, *, found: bool = True) -> tuple[float, float, float, int]:
    """`claim_next` in a transaction rolled back after each run, so every run finds the same queue."""
    timings, cpu, queries = [], [], 0
    for run in range(WARMUP + RUNS):
        with CaptureQueriesContext(connection) as captured, transaction.atomic():
            started, started_cpu = time.perf_counter(), time.process_time()
            assert (claim_next(user=user) is not None) == found
            if run >= WARMUP:
                timings.append((time.perf_counter() - started) * 1000)
                cpu.append((time.process_time() - started_cpu) * 1000)
            transaction.set_rollback(True)
        queries = len(captured)
    timings.sort()
    return statistics.median(timings), timings[int(len(timings) * 0.9) - 1], statistics.median(cpu), queries


def _page_end(user, org) -> int:
    return queue_page(user=user).next_cursor


def _measure(client: Client, url: str, extra: dict) -> tuple[float, float, float, int]:
    for _ in range(WARMUP):
        assert client.get(url, **extra).status_code == 200, url
    connection.queries_log.clear()  # each request start clears it (reset_queries): begin from empty
    with CaptureQueriesContext(connection) as queries:
        client.get(url, **extra)
    timings, cpu = [], []
    for _ in range(RUNS):
        started, started_cpu = time.perf_counter(), time.process_time()
        response = client.get(url, **extra)
        timings.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - started_cpu) * 1000)
        assert response.status_code == 200
    timings.sort()
    return statistics.median(timings), timings[int(len(timings) * 0.9) - 1], statistics.median(cpu), len(queries)


def _populate(org, items: int, total_reviews: int) -> dict[str, int]:
    """Items in groups, each with one current review; the remaining reviews are superseded history.

    open: current, routed to humans, undecided (half drafts, half conversations); decided: the same plus a
    claim and a decision (operators' past work, still current); passed: current machine passes.
    """
    draft_criteria = criteria_active(org=org, kind=ItemKind.DRAFT)
    conversation_criteria = criteria_active(org=org, kind=ItemKind.CONVERSATION)
    operator = get_user_model().objects.create_user(username="bench-past-operator", password="unused-bench-password")
    decided = items // 2
    passed = max(0, min(items * 2, total_reviews - items - decided) // 2)
    history = max(0, total_reviews - items - decided - passed)
    params = {
        "org": org.pk,
        "dc": draft_criteria.pk,
        "cc": conversation_criteria.pk,
        "open": items,
        "decided": decided,
        "passed": passed,
        "history": history,
        "operator": operator.pk,
        "messages": MESSAGES_PER_CONVERSATION,
    }
    with connection.cursor() as cursor:
        for statement in _POPULATE_SQL:
            cursor.execute(statement, params)
        for table in ("grading_draft", "grading_conversation", "grading_message", "grading_review",
                      "grading_criteriaversion", "reviewer_claim", "grading_decision"):  # fmt: skip
            cursor.execute(f"VACUUM ANALYZE {table}")
        cursor.execute("SELECT count(*) FROM grading_review")
        reviews = cursor.fetchone()[0]
        cursor.execute("SELECT count(*) FROM grading_message")
        messages = cursor.fetchone()[0]
    return {"open": items, "decided": decided, "passed": passed, "reviews": reviews, "messages": messages}


# Item n of every group: group "o" (open), "d" (decided), "p" (passed). Even n are drafts, odd n conversations.
_ITEMS = """
    SELECT 'o' AS grp, g AS n FROM generate_series(1, %(open)s) g
    UNION ALL SELECT 'd', g FROM generate_series(1, %(decided)s) g
    UNION ALL SELECT 'p', g FROM generate_series(1, %(passed)s) g
"""
_REVIEW_COLUMNS = """org_id, kind, conversation_id, draft_id, fingerprint, criteria_version_id, judge, judge_key,
    memory_snapshot, started_at, finished_at, stages, route, reason, detail, checks, score, judge_score,
    judge_passed, spread, sub_scores, findings, judge_issues, repairs, memory_used, usage, state, application, audit,
    criteria_fingerprint, confidences, confidence_source, slice, sent"""
_JUDGE = """'{"backend": "openai", "model": "bench", "prompt_hash": "b3nch000", "temperature": 0}'::jsonb"""
_CHECKS = """'{"grounded": {"verdict": "pass", "message_ids": ["m2"], "rationale": "supported by m2"},
    "complete": {"verdict": "unknown", "message_ids": ["m5"], "rationale": "the follow-up is open"},
    "usable": {"verdict": "pass", "message_ids": ["m6"], "rationale": "works"}}'::jsonb"""
_MEMORY = """'{"snapshot": "mem1:bench", "learnings": [{"id": 1, "kind": "learning", "text": "Lead with the answer."}],
    "strategy": null, "facts": []}'::jsonb"""
# Decided items are the oldest (operators work oldest first, so the queue's head is a long decided prefix that
# the queries must not wade through); open items follow, one every few seconds; machine passes are anywhere.
_AGE = """(now() - CASE left({item}.external_id, 1) WHEN 'd' THEN interval '60 days' WHEN 'o' THEN interval '30 days'
    ELSE interval '45 days' END + substr({item}.external_id, 3)::int * interval '5 seconds')"""
_BODY = "## How do you cut support costs?\n\nRoute repeat questions to docs and measure deflection weekly. " * 20

_POPULATE_SQL = [
    f"""INSERT INTO grading_draft (org_id, external_id, title, slug, body, source_urls, run_id, callback_url,
            fingerprint, created_at, updated_at, grading_task_id, end_user, metadata)
        SELECT %(org)s, grp || '-' || n, 'Draft ' || grp || n, 'draft-' || grp || '-' || n, '{_BODY}', '[]'::jsonb,
            '', '', 'fp1:' || grp || '-' || n, now(), now(), '', '', '{{}}'::jsonb
        FROM ({_ITEMS}) items WHERE n %% 2 = 0""",
    f"""INSERT INTO grading_conversation (org_id, external_id, application, closed, started_at, last_activity_at,
            fingerprint, active_path_ids, branch_count, message_count, updated_at, grading_task_id, end_user, metadata)
        SELECT %(org)s, grp || '-' || n, 'app-' || (n %% 5), true, now() - interval '40 days',
            now() - interval '39 days', 'fp1:' || grp || '-' || n, '[]'::jsonb, 1, %(messages)s, now(), '', '',
            '{{}}'::jsonb
        FROM ({_ITEMS}) items WHERE n %% 2 = 1""",
    """INSERT INTO grading_message (conversation_id, external_id, parent_external_id, role, content, created_at,
            hidden, truncated, twin)
        SELECT c.id, 'm' || k, CASE WHEN k = 1 THEN NULL ELSE 'm' || (k - 1) END,
            CASE WHEN k %% 2 = 1 THEN 'user' ELSE 'assistant' END,
            to_jsonb('message ' || k || ' of ' || c.external_id || ': please refund order 1182, it arrived broken.'),
            c.started_at + k * interval '1 minute', false, false, 0
        FROM grading_conversation c, generate_series(1, %(messages)s) k
        WHERE c.org_id = %(org)s AND c.external_id NOT LIKE 'p-%%'""",
    # The current review of every item: routed to humans for open and decided items, a pass otherwise.
    f"""INSERT INTO grading_review ({_REVIEW_COLUMNS})
        SELECT %(org)s, 'draft', NULL, d.id, d.fingerprint, %(dc)s, {_JUDGE}, 'bench', 'mem1:bench',
            {_AGE.format(item="d")} - interval '5 seconds', {_AGE.format(item="d")}, 1,
            CASE WHEN d.external_id LIKE 'p-%%' THEN 'pass' ELSE 'human' END,
            CASE WHEN d.external_id LIKE 'p-%%' THEN ''
                 ELSE (ARRAY['band', 'judge_contradiction', 'spread'])[1 + d.id %% 3] END,
            '', '{{}}'::jsonb, 6.7, 6.7, false, 0.6, '{{"aeo": 4, "writing": 3, "org_fit": 4}}'::jsonb, '[]'::jsonb,
            '[{{"issue": "The opening warms up", "fix": "Answer first."}}]'::jsonb, NULL, {_MEMORY},
            '{{"prompt_tokens": 3000, "completion_tokens": 200}}'::jsonb,
            CASE left(d.external_id, 1) WHEN 'o' THEN 'waiting' WHEN 'd' THEN 'decided' ELSE 'current' END, '', false,
            '', '{{}}'::jsonb, '', '{{}}'::jsonb, ''
        FROM grading_draft d WHERE d.org_id = %(org)s""",
    f"""INSERT INTO grading_review ({_REVIEW_COLUMNS})
        SELECT %(org)s, 'conversation', c.id, NULL, c.fingerprint, %(cc)s, {_JUDGE}, 'bench', '',
            {_AGE.format(item="c")} - interval '5 seconds', {_AGE.format(item="c")}, 1,
            CASE WHEN c.external_id LIKE 'p-%%' THEN 'pass' ELSE 'human' END,
            CASE WHEN c.external_id LIKE 'p-%%' THEN '' ELSE 'unknown_check' END,
            '', {_CHECKS}, NULL, NULL, NULL, NULL, '{{}}'::jsonb, '[]'::jsonb, '[]'::jsonb, NULL, '{{}}'::jsonb,
            '{{"prompt_tokens": 3000, "completion_tokens": 200}}'::jsonb,
            CASE left(c.external_id, 1) WHEN 'o' THEN 'waiting' WHEN 'd' THEN 'decided' ELSE 'current' END,
            c.application, false, '', '{{}}'::jsonb, '', '{{}}'::jsonb, ''
        FROM grading_conversation c WHERE c.org_id = %(org)s""",
    # Superseded history, spread over every item: older, not current, each of its own identity.
    f"""INSERT INTO grading_review ({_REVIEW_COLUMNS})
        SELECT r.org_id, r.kind, r.conversation_id, r.draft_id, 'fp1:old-' || h, r.criteria_version_id, r.judge,
            'old-' || h, r.memory_snapshot, r.started_at - interval '1 day', r.finished_at - interval '1 day', 1,
            'pass', '', '', r.checks, r.score, r.judge_score, r.judge_passed, r.spread, r.sub_scores, r.findings,
            r.judge_issues, r.repairs, r.memory_used, r.usage, 'superseded', r.application, false, '',
            '{{}}'::jsonb, '', '{{}}'::jsonb, ''
        FROM generate_series(1, %(history)s) h
        JOIN LATERAL (SELECT * FROM grading_review WHERE org_id = %(org)s AND state <> 'superseded'
                      AND id = (SELECT min(id) FROM grading_review) + (h %% (%(open)s + %(decided)s + %(passed)s))) r
          ON true""",
    """INSERT INTO reviewer_claim (org_id, review_id, holder_id, claimed_at, expires_at, ended_at, "end", reason)
        SELECT r.org_id, r.id, %(operator)s, r.finished_at, r.finished_at + interval '15 minutes',
            r.finished_at + interval '5 minutes', 'decided', ''
        FROM grading_review r WHERE r.state = 'decided'""",
    """INSERT INTO grading_decision (org_id, review_id, basis, outcome, checks, note, decided_by_id, decided_at)
        SELECT cl.org_id, cl.review_id, 'one', CASE WHEN r.kind = 'draft' THEN 'approve' ELSE 'pass' END,
            '{}'::jsonb, 'looked fine', %(operator)s, cl.ended_at
        FROM reviewer_claim cl JOIN grading_review r ON r.id = cl.review_id""",
]

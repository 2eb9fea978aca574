"""The stakeholders' dashboard: quality with its unknowns, the gate's outcomes, the staleness audit, the
judge against people on the blind audit sample, queue health; the reviews behind every number, and a reader's page
of each item; the export.

Read only: every view is GET (anything else is 405), and each reads one org the person belongs to (any role).
The figures are grading's (`dashboard_figures`, the same function the JSON API calls) over the rollups.
"""

from collections.abc import Callable

from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from grading.dashboard.certified import certified_figures
from grading.dashboard.compare import dimension_values
from grading.dashboard.figures import (
    GATE_METRICS,
    JUDGE,
    PAGE_METRICS,
    PEOPLE,
    QUEUE_METRICS,
    SECTIONS,
    SERVICE_METRICS,
    STATISTICS_METRICS,
    InvalidScope,
    Scope,
    agreement_figures,
    agreement_headline,
    counters_for,
    dashboard_figures,
    gate_figures,
    queue_figures,
)
from grading.dashboard.regrade import org_regrade_progress
from grading.figures.definitions import PASS_FAIL, slice_key
from grading.models import ItemKind, Org
from grading.models.reach import Reach
from grading.reviews.spend import spend_overview
from reviewer.access import EVERY_ROLE, found, memberships_of, reaches_of, role_required
from reviewer.criteria.reads import admin_org_ids, unpublished_versions
from reviewer.dashboards import display, export, reads
from reviewer.dashboards.service import service_figures
from reviewer.dashboards.views import bad_filter, corrections
from reviewer.models import Role
from reviewer.queue.assignments import QUEUE_ROLES, org_assignees
from reviewer.queue.forms import AssignForm
from reviewer.queue.item_reads import item_page
from reviewer.queue.reads import review_for_reader
from reviewer.queue.sending import SENDER_ROLES, sendable


def _org_and_scope(request: HttpRequest, orgs=None):
    org = reads.dashboard_org(memberships_of(request), request.GET.get("org"), orgs=orgs)
    if org is None:
        raise Http404("No such org among yours.")
    return org, reads.scope_from(org, request.GET, reads.reader_reach(memberships_of(request), org))


def _reviews_asked(request: HttpRequest) -> tuple[Org, Scope, reads.ReviewFilter]:
    """The org, scope and filter of the reviews behind a number, from the query: the list shows them and the export
    writes them, so the two read them alike."""
    org, scope = _org_and_scope(request)
    return org, scope, reads.filter_from(request.GET, org)


def slice_choices(org, reach: Reach) -> list[tuple[str, list[tuple[str, str]]]]:
    """A select per dimension of the org's: its name, and each value seen within the reader's reach as (the slice's
    key, the value)."""
    return [
        (name, [(slice_key(name, value), value) for value in values])
        for name, values in dimension_values(reach, list(org.dimensions)).items()
    ]


@require_GET
@role_required(*EVERY_ROLE)
def dashboard(request: HttpRequest) -> HttpResponse:
    orgs = reads.dashboard_orgs(memberships_of(request))
    try:
        org, scope = _org_and_scope(request, orgs)
    except InvalidScope as exc:
        return bad_filter(request, exc.field, exc.message)
    applications = reads.org_applications(org, scope.reach)
    if scope.application and scope.application not in applications:  # a typo would read as an all-zero page
        return bad_filter(request, "application", f"{org.name} has no application named {scope.application!r}.")
    dimensions = slice_choices(org, scope.reach or Reach(org.pk))
    counters = counters_for(scope, metrics=PAGE_METRICS)  # one read of the scope's counters for every panel
    # The statistics of agreement wait folded under their sections, each loaded when opened (`dashboard_statistics`):
    # the first screen says in words only what the audit sample's conversations give. The queue's section, at the
    # page's foot, loads apart (`dashboard_queue`).
    figures = dashboard_figures(scope, counters=counters, sections=[s for s in SECTIONS if s not in PAGE_APART])
    agreement = agreement_headline(counters)
    links = display.Links(org.slug, scope)
    quality, gate = display.quality_panel(figures, links), display.gate_totals(figures, links)
    context = {
        "org": org,
        "orgs": orgs,
        "scope": scope,
        "applications": applications,
        "dimensions": dimensions,
        "figures": figures,
        "quality": quality,
        "gate": gate,
        "in_words": display.in_words(figures, quality, gate, links, agreement=agreement),
        "staleness": display.staleness_panel(figures, links),
        "regrade": display.regrade_panel(figures["staleness"]["regrade"], org_slug=org.slug),
        "headline": display.headline_agreement(agreement),
        # Spend against the caps is the org's as a whole: shown to readers of the whole org only (`dashboard_spend`).
        "spend_shown": scope.reach is None or not scope.reach.limited,
        "links": links,
        "export_csv": links.export("csv"),
        "export_jsonl": links.export("jsonl"),
        "export_drafts_csv": links.export("csv", kind="draft"),
        "corrections_url": corrections.figures_url(org, scope),
        "corrections_export": corrections.export_links(org, memberships_of(request), scope.as_query()),
        "nav_active": "dashboard",
    }
    return render(request, "reviewer/dashboards/index.html", context)


# The figures' sections the page leaves to requests of their own: the statistics (`dashboard_statistics`) and the
# queue's (`dashboard_queue`, and its service-level targets: `dashboard_service`).
PAGE_APART = ("agreement", "queue")


def _apart(request: HttpRequest, section: str, title: str, build: Callable[[Org, Scope, display.Links], dict]):
    """A part of the page for its scope that the page loads apart (htmx, on load), from `build`'s context and
    `_<section>.html`; followed as a plain link, without JavaScript, it is a page of its own under `title`."""
    try:
        org, scope = _org_and_scope(request)
    except InvalidScope as exc:
        return bad_filter(request, exc.field, exc.message)
    links = display.Links(org.slug, scope)
    partial = f"reviewer/dashboards/_{section}.html"
    context = {
        "org": org,
        "scope": scope,
        **build(org, scope, links),
        "back_url": links.page(),
        "nav_active": "dashboard",
    }
    if request.htmx:
        return render(request, partial, context)
    return render(request, "reviewer/dashboards/section.html", context | {"title": title, "section": partial})


@require_GET
@role_required(*EVERY_ROLE)
def dashboard_queue(request: HttpRequest) -> HttpResponse:
    """The page's queue health: what waits, and the decisions of each week with the time to them. It reads the queue
    as well as its own counters (`QUEUE_METRICS`), which nothing above it shows."""

    def build(org: Org, scope: Scope, links: display.Links) -> dict:
        return {
            "queue": display.queue_panel({"queue": queue_figures(counters_for(scope, metrics=QUEUE_METRICS))}, links)
        }

    return _apart(request, "queue", "Queue health", build)


@require_GET
@role_required(*EVERY_ROLE)
def dashboard_service(request: HttpRequest) -> HttpResponse:
    """The page's service-level targets, under its queue health: the share decided within target each week, what is
    overdue now, each person's workload. It reads the queue and its claims as well as its own counters
    (`SERVICE_METRICS`)."""

    def build(org: Org, scope: Scope, links: display.Links) -> dict:
        counters = counters_for(scope, metrics=SERVICE_METRICS)
        return {"service": display.service_panel(service_figures(scope, counters=counters), links)}

    return _apart(request, "service", "Service-level targets", build)


@require_GET
@role_required(*EVERY_ROLE)
def dashboard_gate(request: HttpRequest) -> HttpResponse:
    """The page's draft gate section: the outcomes week by week, the findings, sub-scores and how operators decided
    (the page's first screen shows the totals)."""

    def build(org: Org, scope: Scope, links: display.Links) -> dict:
        return {"gate": display.gate_panel({"gate": gate_figures(counters_for(scope, metrics=GATE_METRICS))}, links)}

    return _apart(request, "gate", "Draft gate", build)


@require_GET
@role_required(*EVERY_ROLE)
def dashboard_spend(request: HttpRequest) -> HttpResponse:
    """The judge's spend against the org's caps, in the page's staleness audit. Spend is the org's as a whole: shown
    to readers of the whole org only (the page offers it to no one else)."""

    def build(org: Org, scope: Scope, links: display.Links) -> dict:
        whole_org = scope.reach is None or not scope.reach.limited
        return {"spend": spend_overview(org_id=org.pk) if whole_org else None}

    return _apart(request, "spend", "Judge spend against caps", build)


@require_GET
@role_required(*EVERY_ROLE)
def dashboard_certified(request: HttpRequest) -> HttpResponse:
    """The quality rate against people, with its interval from the audit sample (grading/dashboard/certified.py), for
    the page's scope. It reads people's audit decisions and the audited reviews besides the counters, so the page
    loads it apart."""

    def build(org: Org, scope: Scope, links: display.Links) -> dict:
        return {"certified": display.certified_panel(certified_figures(scope))}

    return _apart(request, "certified", "Quality against people", build)


# The page's statistics sections, each loaded when opened: the judge against people, people against people; each
# the part of the agreement figures it shows, from that part's counters alone.
STATISTICS = {
    "judge": ("Judge against people", display.agreement_panel, JUDGE),
    "people": ("People against people", display.people_panel, PEOPLE),
}


@require_GET
@role_required(*EVERY_ROLE)
def dashboard_statistics(request: HttpRequest) -> HttpResponse:
    """One statistics section of the page (`of`: judge or people) for the page's scope: κ, α, their intervals and
    the confusion tables of every sample and kind. The page folds them and loads one when it is opened (htmx);
    followed as a plain link, without JavaScript, it is a page of its own."""
    try:
        org, scope = _org_and_scope(request)
    except InvalidScope as exc:
        return bad_filter(request, exc.field, exc.message)
    of = request.GET.get("of", "")
    if of not in STATISTICS:
        return bad_filter(request, "of", f"must be one of {', '.join(STATISTICS)}")
    title, panel, part = STATISTICS[of]
    counters = counters_for(scope, metrics=STATISTICS_METRICS[part])
    links = display.Links(org.slug, scope)
    context = {
        "org": org,
        "scope": scope,
        "of": of,
        "title": title,
        "blocks": panel({"agreement": agreement_figures(counters, parts=(part,))}, links),
        "back_url": links.page(),
        "nav_active": "dashboard",
    }
    template = "_statistics.html" if request.htmx else "statistics.html"
    return render(request, f"reviewer/dashboards/{template}", context)


@require_GET
@role_required(*EVERY_ROLE)
def dashboard_regrade(request: HttpRequest) -> HttpResponse:
    """The re-grade panel alone (of one kind with `kind`), which htmx refreshes while a re-grade runs."""
    org = reads.dashboard_org(memberships_of(request), request.GET.get("org"))
    if org is None:
        raise Http404("No such org among yours.")
    kind = request.GET.get("kind", "")
    if kind and kind not in ItemKind.values:
        return bad_filter(request, "kind", f"must be one of {', '.join(ItemKind.values)}")
    reach = reads.reader_reach(memberships_of(request), org)
    progress = [p.as_json() for p in org_regrade_progress(org, reach) if not kind or p.kind == kind]
    panel = display.regrade_panel(progress, org_slug=org.slug, kind=kind)
    return render(request, "reviewer/dashboards/_regrade.html", {"regrade": panel})


@require_GET
@role_required(*EVERY_ROLE)
def dashboard_reviews(request: HttpRequest) -> HttpResponse:
    """The reviews behind one number, newest first, a page at a time."""
    try:
        org, scope, review_filter = _reviews_asked(request)
    except (InvalidScope, reads.InvalidFilter) as exc:
        return bad_filter(request, exc.field, exc.message)
    after = request.GET.get("after", "")
    if after and not after.isdigit():
        return bad_filter(request, "after", "must be a review id")
    reviews = reads.reviews_behind(org, scope, review_filter)
    page = reads.review_page(reviews, f=review_filter, after=int(after) if after else None)
    links = display.Links(org.slug, scope)
    queue_reach = reaches_of(request.user, *QUEUE_ROLES).get(org.pk)
    lead_reach = reaches_of(request.user, Role.LEAD).get(org.pk)
    send_reach = reaches_of(request.user, *SENDER_ROLES).get(org.pk)
    url = display.item_urls(queue_reach=queue_reach)
    rows = [
        (
            review,
            url(review),
            display.assignable(review, lead_reach=lead_reach),
        )
        for review in page.rows
    ]
    people, pools = org_assignees(org.pk) if any(row[2] for row in rows) else ([], [])
    query = request.GET.copy()
    next_url = ""
    if page.next_after:
        query["after"] = str(page.next_after)
        next_url = "?" + query.urlencode()
    context = {
        "org": org,
        "scope": scope,
        "filter": review_filter,
        "described": _describe(review_filter, scope),
        "page": page,
        "rows": rows,
        "assign_form": AssignForm(people=people, pools=pools) if people or pools else None,
        "sendable": {review.pk for review in page.rows if sendable(review, send_reach=send_reach)},
        "next_url": next_url,
        "back_url": links.page(),
        "export_csv": links.export("csv", **_filter_fields(review_filter)),
        "export_jsonl": links.export("jsonl", **_filter_fields(review_filter)),
        "example_versions": _example_versions(request, org, review_filter),
        "nav_active": "dashboard",
    }
    return render(request, "reviewer/dashboards/reviews.html", context)


def _example_versions(request: HttpRequest, org, review_filter: reads.ReviewFilter) -> list:
    """On a list of disagreements (one cell of an agreement table where the machine and people differ), a criteria
    admin of the org may add each item to the examples of a version not yet published: those versions."""
    disagreement = review_filter.check and review_filter.machine and review_filter.machine != review_filter.human
    if not disagreement or org.pk not in admin_org_ids(request.user):
        return []
    return unpublished_versions(org_id=org.pk, kind=review_filter.kind)


def _filter_fields(review_filter: reads.ReviewFilter) -> dict:
    return {name: getattr(review_filter, name) for name in review_filter.__dataclass_fields__}


_PEOPLE_WORDS = {
    "audit": "in the audit sample, answered in the queue by everyone asked",
    "unsure": "among the items the machine was unsure about, answered in the queue by everyone asked",
    "label": "labelled by two or more people",
}


_DUE_WORDS = {
    "overdue": "overdue now: their service-level target passed undecided",
    "late": "decided after their due time",
    "on_time": "decided within their service-level target",
}


def _describe(f: reads.ReviewFilter, scope: Scope) -> str:
    parts = [{"conversation": "conversation", "draft": "draft", "any": "all"}[f.kind] + " reviews"]
    parts.append({"counting": "that count", "stale": "that went stale", "errors": "where the judge failed"}[f.set])
    if f.route:
        parts.append("routed " + " or ".join(f.route.split(",")))
    if f.reason:
        parts.append(f"because {f.reason}")
    if f.check and f.verdict:
        parts.append(f"with {f.check} {f.verdict}")
    if f.finding:
        parts.append(f"with finding {f.finding}")
    if f.repaired:
        parts.append("repaired, then passed")
    if f.decision:
        parts.append(f"decided {f.decision}")
    if f.sample:
        parts.append(f"in the {f.sample} sample: machine {f.machine or 'any'}, people {f.human or 'any'}")
    if f.people:
        sample = next(sample for sample, values in reads.PEOPLE_LISTS.items() if f.people in values)
        split = " where they gave different verdicts" if f.people == reads.PEOPLE_LISTS[sample][1] else ""
        parts.append(f"{_PEOPLE_WORDS[sample]} on {f.check or PASS_FAIL}{split}")
    if f.operator is not None:
        parts.append("decided by that operator")
    if f.due:
        parts.append(_DUE_WORDS[f.due])
    if f.set != "stale" and f.due != "overdue":
        parts.append(f"{scope.as_query()['from']} to {scope.as_query()['to']}")
    if scope.application:
        parts.append(f"application {scope.application}")
    if scope.slice:
        parts.append(scope.slice.replace("=", " ", 1))
    return ", ".join(parts)


@require_GET
@role_required(*EVERY_ROLE)
def dashboard_export(request: HttpRequest) -> HttpResponse:
    """The reviews the page (or a number) shows, with their whole identity and decisions, as CSV or JSONL,
    streamed: the response starts at once and memory stays flat however many rows there are."""
    try:
        org, scope, review_filter = _reviews_asked(request)
    except (InvalidScope, reads.InvalidFilter) as exc:
        return bad_filter(request, exc.field, exc.message)
    file_format = request.GET.get("format", "csv")
    if file_format not in ("csv", "jsonl"):
        return bad_filter(request, "format", "must be csv or jsonl")
    reviews = reads.reviews_behind(org, scope, review_filter)
    checks = reads.checks_asked(org, review_filter.kind)
    rows = export.export_rows(reviews, f=review_filter, reader_id=request.user.pk, checks=checks)
    columns = export.columns_for(checks)
    if file_format == "csv":
        response = StreamingHttpResponse(export.as_csv(rows, columns), content_type="text/csv; charset=utf-8")
    else:
        response = StreamingHttpResponse(
            export.as_jsonl(rows, columns), content_type="application/x-ndjson; charset=utf-8"
        )
    name = f"tollgate-{org.slug}-{review_filter.kind}-reviews-{scope.as_query()['from']}-{scope.as_query()['to']}"
    response["Content-Disposition"] = f'attachment; filename="{name}.{file_format}"'
    return response


@require_GET
@role_required(*EVERY_ROLE)
def dashboard_item(request: HttpRequest, pk: int) -> HttpResponse:
    """A reader's page of the item of review `pk`, where a list's row leads whoever does not decide it in the queue:
    the queue's item page from the same read (reviewer/queue/item_reads.py, `reading`), blind review held there, in
    a frame with no decision form, claim, lease or assignment. Within the reader's reach (any role); else a 404.
    For htmx, the corrections part the page refreshes while the gate grades a corrected draft."""
    reaches = list(reaches_of(request.user, *EVERY_ROLE).values())
    review = found(review_for_reader(reaches=reaches, review_id=pk), "item among those you may read")
    page = item_page(review, user=request.user, now=timezone.now(), reading=True)
    template = page.template
    if request.htmx and request.htmx.target == "corrections" and review.kind == ItemKind.DRAFT:
        template = "reviewer/queue/_correction.html#corrections"
    return render(request, template, {"page": page, "nav_active": "dashboard"})

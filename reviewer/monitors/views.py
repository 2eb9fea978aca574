"""The monitors' pages (/monitors/). Anyone with a role in an org sees the monitors their reach covers (a monitor of
one application is within reach of a person limited to it; a monitor of every conversation is not), with state,
history and the items behind each figure; org admins and leads of a whole org (as for the queue's set-up) create,
change and remove them, through grading/monitors/services.py, audited with the person as actor. A bad form or a
refused setting is a 400 naming the field, with nothing written; another org's monitor is a 404."""

from __future__ import annotations

from datetime import datetime

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count, OuterRef, Subquery
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from grading.models import ItemKind, Monitor, MonitorEvaluation, MonitorFigure, MonitorState, Org
from grading.models.reach import Reach, within
from grading.monitors.figures import figure_reviews
from grading.monitors.notices import figure_text
from grading.monitors.services import MonitorInvalid, monitor_create, monitor_delete, monitor_update, settings_of
from grading.reviews.blind import verdicts_hidden
from reviewer.access import EVERY_ROLE, found, memberships_of, org_named, reaches_from, role_required, setup_orgs_of
from reviewer.dashboards.display import item_urls
from reviewer.models import Role
from reviewer.monitors.display import ItemRow, history_html, item_values, items_html, monitors_html
from reviewer.monitors.forms import MonitorForm, MonitorRemoveForm, PageForm, shown_settings
from reviewer.pages import bad_request
from reviewer.queue.assignments import QUEUE_ROLES

SETUP_ROLES = (Role.LEAD, Role.ORG_ADMIN)
HISTORY_SHOWN = 100
# The list and the items behind a figure are shown this many a page (why: bench/README.md, bench_monitors), the items
# as values of only the fields their rows show (`display.ItemRow`).
MONITORS_SHOWN = 50
ITEMS_SHOWN = 50
# The list's count of monitors per state, worst first ("": not evaluated yet).
STATES_SHOWN = [(state, MonitorState(state).label) for state in ("alert", "warning", "no_data", "ok")]
STATES_SHOWN.append(("", "not evaluated yet"))


def _reaches(request: HttpRequest, *roles: Role) -> dict[int, Reach]:
    """From the memberships the request read once (`role_required` read them first)."""
    return reaches_from(memberships_of(request), *(roles or EVERY_ROLE))


def _visible(monitor: Monitor, reaches: dict[int, Reach]) -> bool:
    reach = reaches.get(monitor.org_id)
    return reach is not None and reach.covers(monitor.kind, monitor.application)


def _get_monitor_for_user(request: HttpRequest, pk: int) -> Monitor:
    """The monitor, when one of the person's orgs has it and their reach covers its slice; else 404."""
    monitor = Monitor.objects.select_related("org").filter(pk=pk).first()
    if monitor is None or not _visible(monitor, _reaches(request)):
        raise Http404("No such monitor.")
    return monitor


def _get_monitor_to_change(request: HttpRequest, pk: int) -> Monitor:
    org_ids = _setup_org_ids(request)
    return found(Monitor.objects.select_related("org").filter(pk=pk, org_id__in=org_ids).first(), "monitor")


def _setup_org_ids(request: HttpRequest) -> list[int]:
    org_ids = setup_orgs_of(memberships_of(request))
    if not org_ids:
        raise PermissionDenied("A lead of part of an org does not set up its monitors: ask an org admin.")
    return org_ids


@require_GET
@role_required(*EVERY_ROLE)
def monitors(request: HttpRequest) -> HttpResponse:
    """The monitors within the person's reach, `MONITORS_SHOWN` a page (`?page=`), under how many are in each state
    (all of them, not the page's)."""
    form = PageForm(request.GET)
    if not form.is_valid():
        return bad_request(form)
    page = form.cleaned_data["page"] or 1
    mine = Monitor.objects.filter(within(_reaches(request).values()))
    states = dict(mine.order_by().values_list("state").annotate(Count("pk")))
    shown = (page - 1) * MONITORS_SHOWN
    rows = list(mine.select_related("org").order_by("org__slug", "name", "pk")[shown : shown + MONITORS_SHOWN])
    latest = _latest_evaluations(rows)
    total = sum(states.values())
    last = max(1, -(-total // MONITORS_SHOWN))
    context = {
        "monitor_rows": monitors_html([(m, latest.get(m.pk), _figure_shown(m, latest.get(m.pk))) for m in rows]),
        "states": [(label, states[state]) for state, label in STATES_SHOWN if states.get(state)],
        "total": total,
        "pages": {
            "page": page,
            "last": last,
            "first_row": shown + 1,
            "last_row": min(shown + MONITORS_SHOWN, total),
            "previous": page - 1 if page > 1 else None,
            "next": page + 1 if page < last else None,
        },
        "sets_up": bool(setup_orgs_of(memberships_of(request))),
        "nav_active": "monitors",
    }
    return render(request, "reviewer/monitors/index.html", context)


def _latest_evaluations(rows: list[Monitor]) -> dict[int, MonitorEvaluation]:
    """Each monitor's latest evaluation, found down its own (monitor, -at) index: a DISTINCT ON over the monitors'
    history reads all of it (30 days of an evaluation every five minutes each)."""
    latest = MonitorEvaluation.objects.filter(monitor=OuterRef("pk")).order_by("-at").values("pk")[:1]
    latest_ids = Monitor.objects.filter(pk__in=[monitor.pk for monitor in rows]).values(latest=Subquery(latest))
    return {evaluation.monitor_id: evaluation for evaluation in MonitorEvaluation.objects.filter(pk__in=latest_ids)}


def _figure_shown(monitor: Monitor, evaluation: MonitorEvaluation | None) -> str:
    return figure_text(monitor.figure, evaluation.value) if evaluation else ""


@require_GET
@role_required(*EVERY_ROLE)
def monitor_detail(request: HttpRequest, pk: int) -> HttpResponse:
    monitor = _get_monitor_for_user(request, pk)
    history = list(monitor.evaluations.order_by("-at")[:HISTORY_SHOWN])
    context = {
        "monitor": monitor,
        "figure": MonitorFigure(monitor.figure).label,
        "levels": {
            name: figure_text(monitor.figure, getattr(monitor, name))
            for name in ("warning_level", "alert_level", "margin")
        },  # fmt: skip
        "history_rows": history_html(
            [(evaluation, figure_text(monitor.figure, evaluation.value)) for evaluation in history],
            items_url=reverse("monitor_items", args=[monitor.pk]),
        ),
        "changes": monitor.org_id in setup_orgs_of(memberships_of(request)),
        "nav_active": "monitors",
    }
    return render(request, "reviewer/monitors/detail.html", context)


@require_GET
@role_required(*EVERY_ROLE)
def monitor_items(request: HttpRequest, pk: int) -> HttpResponse:
    """The reviews behind one evaluation's figure (`?evaluation=ID`; none: the figure now), newest first, as they
    count now. Blind review holds: an item people decide blind is withheld (the list is picked by what the machine
    said), and said so."""
    monitor = _get_monitor_for_user(request, pk)
    form = PageForm(request.GET)
    if not form.is_valid():
        return bad_request(form)
    page = form.cleaned_data["page"] or 1
    at: datetime = timezone.now()
    evaluation_id = request.GET.get("evaluation", "")
    evaluation = None
    if evaluation_id:
        if not evaluation_id.isdigit() or len(evaluation_id) > 18:
            return HttpResponse("Bad request: evaluation must be an evaluation's id.", status=400,
                                content_type="text/plain")  # fmt: skip
        evaluation = found(monitor.evaluations.filter(pk=int(evaluation_id)).first(), "evaluation")
        at = evaluation.at
    first = (page - 1) * ITEMS_SHOWN
    item = "draft" if monitor.kind == ItemKind.DRAFT else "conversation"
    reviews = list(
        figure_reviews(monitor, at)
        .annotate(verdicts_hidden=verdicts_hidden(item, of=item))
        .order_by("-finished_at", "-pk")
        .values_list(*item_values(item))[first : first + ITEMS_SHOWN + 1]  # one more: is there a next page
    )
    more, reviews = len(reviews) > ITEMS_SHOWN, [ItemRow._make(row) for row in reviews[:ITEMS_SHOWN]]
    shown = [review for review in reviews if not review.verdicts_hidden]
    url = item_urls(queue_reach=_reaches(request, *QUEUE_ROLES).get(monitor.org_id))
    query = f"evaluation={evaluation.pk}&" if evaluation else ""
    context = {
        "monitor": monitor,
        "evaluation": evaluation,
        "at": at,
        "item_rows": items_html([(review, url(review)) for review in shown]),
        "withheld": len(reviews) - len(shown),
        "pages": {
            "page": page,
            "first_row": first + 1,
            "last_row": first + len(reviews),
            "previous": f"?{query}page={page - 1}" if page > 1 else None,
            "next": f"?{query}page={page + 1}" if more else None,
        },
        "nav_active": "monitors",
    }
    return render(request, "reviewer/monitors/items.html", context)


@require_http_methods(["GET", "POST"])
@role_required(*SETUP_ROLES)
def monitor_new(request: HttpRequest) -> HttpResponse:
    org_ids = _setup_org_ids(request)
    orgs = list(Org.objects.filter(pk__in=org_ids).order_by("slug"))
    if request.method == "GET":
        return _render_form(request, MonitorForm(initial={"org": orgs[0].pk}), orgs=orgs)
    form = MonitorForm(request.POST)
    if not form.is_valid():
        return _render_form(request, form, orgs=orgs, status=400)
    org = org_named(org_ids, form.cleaned_data["org"])
    try:
        monitor = monitor_create(org=org, given=form.settings(), actor=request.user)
    except MonitorInvalid as refusal:
        form.add_error(refusal.field, refusal.message)
        return _render_form(request, form, orgs=orgs, status=400)
    messages.success(
        request, f"Monitor {monitor.name} created: the next evaluation (within five minutes) sets its state."
    )
    return redirect("monitor_detail", pk=monitor.pk)


@require_http_methods(["GET", "POST"])
@role_required(*SETUP_ROLES)
def monitor_edit(request: HttpRequest, pk: int) -> HttpResponse:
    monitor = _get_monitor_to_change(request, pk)
    if request.method == "GET":
        form = MonitorForm(initial=shown_settings(settings_of(monitor)) | {"org": monitor.org_id})
        return _render_form(request, form, monitor=monitor)
    form = MonitorForm(request.POST)
    if not form.is_valid():
        return _render_form(request, form, monitor=monitor, status=400)
    try:
        changed = monitor_update(monitor=monitor, given=form.settings(), actor=request.user)
    except MonitorInvalid as refusal:
        form.add_error(refusal.field, refusal.message)
        return _render_form(request, form, monitor=monitor, status=400)
    messages.success(request, f"Changed: {', '.join(changed)}." if changed else "Nothing changed.")
    return redirect("monitor_detail", pk=monitor.pk)


@require_POST
@role_required(*SETUP_ROLES)
def monitor_remove(request: HttpRequest, pk: int) -> HttpResponse:
    monitor = _get_monitor_to_change(request, pk)
    form = MonitorRemoveForm(request.POST)
    if not form.is_valid() or form.cleaned_data["monitor"] != monitor.pk:
        return (
            bad_request(form)
            if form.errors
            else HttpResponse(
                "Bad request: monitor: names another monitor than the one removed.",
                status=400,
                content_type="text/plain",
            )
        )
    monitor_delete(monitor=monitor, actor=request.user)
    messages.success(request, f"Monitor {monitor.name} removed, with its history.")
    return redirect("monitors")


def _render_form(
    request: HttpRequest,
    form: MonitorForm,
    *,
    orgs: list[Org] | None = None,
    monitor: Monitor | None = None,
    status: int = 200,
) -> HttpResponse:
    context = {"form": form, "orgs": orgs or [], "monitor": monitor, "nav_active": "monitors"}
    return render(request, "reviewer/monitors/form.html", context, status=status)

"""The audit page (/audit/): an org admin reads who did what, when, to which object and item in their org, filtered
by person or key, action, object, item and time, newest first, a page at a time (keyset: the "older" link carries
the cursor); and downloads the same events as CSV, streamed.

Read only: both views are GET. The org is one the person is an org admin of (`?org=`, else their first); any other
org does not exist as far as they can tell (404)."""

from django.http import Http404, HttpRequest, HttpResponse, QueryDict, StreamingHttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from grading.models import ApiKey, Org
from grading.reviews.audit_reads import NO_FILTERS, InvalidAuditFilter, audit_csv, audit_filters_from, audit_page
from reviewer.access import org_asked, orgs_for, role_required
from reviewer.audit import display
from reviewer.models import Membership, Role

# The filters the page's form sends (grading/reviews/audit_reads.py `audit_filters_from` reads them).
FILTERS = ("actor", "api_key", "action", "object_type", "object_id", "item_kind", "item_id", "since", "until")


def _admin_org(request: HttpRequest, orgs: list[Org]) -> Org:
    org = org_asked(orgs, request.GET.get("org"))
    if org is None:
        raise Http404("No such org among those you administer.")
    return org


def _query(params: QueryDict, **changes: str) -> str:
    """The page's query string with `changes` (an empty value drops the parameter)."""
    query = params.copy()
    for name, value in changes.items():
        query.pop(name, None)
        if value:
            query[name] = value
    return query.urlencode()


@require_GET
@role_required(Role.ORG_ADMIN)
def audit(request: HttpRequest) -> HttpResponse:
    orgs = list(orgs_for(request.user, Role.ORG_ADMIN))
    org = _admin_org(request, orgs)
    context = {
        "org": org,
        "orgs": orgs,
        "values": {name: request.GET.get(name, "") for name in FILTERS},
        "api_keys": ApiKey.objects.filter(org=org).order_by("name", "pk"),
        "people": Membership.objects.filter(org=org)
        .order_by("user__username")
        .values_list("user__username", flat=True)
        .distinct(),
        "actions": display.action_choices(request.GET.get("action", "")),
        "object_types": display.object_choices(),
        "nav_active": "audit",
    }
    try:
        filters = audit_filters_from(request.GET)
        page = audit_page(org.pk, filters, reader_id=request.user.pk, before=request.GET.get("before", ""))
    except InvalidAuditFilter as exc:
        context["error"] = exc
        return render(request, "reviewer/audit/index.html", context, status=400)
    criteria_admin = orgs_for(request.user, Role.CRITERIA_ADMIN).filter(pk=org.pk).exists()
    context |= {
        "filtered": filters != NO_FILTERS,
        "rows": display.event_rows(page.events, org_slug=org.slug, criteria_admin=criteria_admin),
        "older_url": "?" + _query(request.GET, before=page.older) if page.older else "",
        "newest_url": "?" + _query(request.GET, before="") if request.GET.get("before") else "",
        "csv_url": reverse("audit_csv") + "?" + _query(request.GET, before="", org=org.slug),
    }
    return render(request, "reviewer/audit/index.html", context)


@require_GET
@role_required(Role.ORG_ADMIN)
def audit_csv_export(request: HttpRequest) -> HttpResponse:
    """Every event the page's filters keep, newest first, as CSV: streamed, so the download starts at once and
    memory stays flat however long the trail."""
    org = _admin_org(request, list(orgs_for(request.user, Role.ORG_ADMIN)))
    try:
        filters = audit_filters_from(request.GET)
    except InvalidAuditFilter as exc:
        return HttpResponse(f"{exc.field}: {exc.message}\n", status=400, content_type="text/plain; charset=utf-8")
    lines = audit_csv(org.pk, filters, reader_id=request.user.pk)
    response = StreamingHttpResponse(lines, content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="audit-{org.slug}.csv"'
    return response

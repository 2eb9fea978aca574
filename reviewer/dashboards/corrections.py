"""Corrections on the dashboard: their export (grading/dashboard/corrections.py).

A correction holds the item's text (the draft's body, the agent's message) and the person's, so its export is for
the people who read items: operators and leads within their queue reach, criteria admins across the org. Anyone
else of the org (a stakeholder, an org admin) gets a 403; another org is a 404, as an org that does not exist.
"""

from urllib.parse import urlencode

from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from grading.dashboard.corrections import (
    FORMATS,
    InvalidCorrectionFilter,
    as_jsonl,
    correction_filter_from,
    corrections_behind,
    export_corrections,
)
from grading.dashboard.figures import InvalidScope, scope_for
from grading.models import ItemKind, Org
from grading.models.reach import Reach
from reviewer.access import org_asked, orgs_for, reaches_of, role_required
from reviewer.models import Role

# The roles whose members read items: what a correction holds.
ITEM_READERS = (Role.OPERATOR, Role.LEAD, Role.CRITERIA_ADMIN)


def text_reach(user, org: Org) -> Reach | None:
    """What of `org` the person may export corrections of (the union of their item-reading memberships); None when
    they read no items there."""
    return reaches_of(user, *ITEM_READERS).get(org.pk)


def _bad_filter(request: HttpRequest, field: str, message: str) -> HttpResponse:
    context = {"field": field, "message": message, "nav_active": "dashboard"}
    return render(request, "reviewer/dashboards/bad_filter.html", context, status=400)


@require_GET
@role_required(*ITEM_READERS)
def corrections_export(request: HttpRequest) -> HttpResponse:
    """The corrections of the page's scope, filtered, streamed as JSONL (`format=jsonl`) or as chat fine-tuning
    examples (`format=chat`, expected replies only)."""
    org = org_asked(list(orgs_for(request.user, *ITEM_READERS)), request.GET.get("org"))
    if org is None:
        raise Http404("No such org among yours.")
    reach = text_reach(request.user, org)
    try:
        scope = scope_for(
            org, since=request.GET.get("from"), until=request.GET.get("to"),
            application=request.GET.get("application"), reach=reach,
        )  # fmt: skip
        correction_filter = correction_filter_from(request.GET)
    except (InvalidScope, InvalidCorrectionFilter) as exc:
        return _bad_filter(request, exc.field, exc.message)
    file_format = request.GET.get("format", "jsonl")
    if file_format not in FORMATS:
        return _bad_filter(request, "format", f"must be {' or '.join(FORMATS)}")
    if file_format == "chat" and correction_filter.kind == ItemKind.DRAFT:
        return _bad_filter(request, "format", "chat holds the expected replies of conversations, not drafts")
    corrections = corrections_behind(scope, correction_filter)
    rows = export_corrections(corrections, f=correction_filter, file_format=file_format)
    response = StreamingHttpResponse(as_jsonl(rows), content_type="application/x-ndjson; charset=utf-8")
    weeks = scope.as_query()
    name = f"tollgate-{org.slug}-corrections-{file_format}-{weeks['from']}-{weeks['to']}"
    response["Content-Disposition"] = f'attachment; filename="{name}.jsonl"'
    return response


def export_links(org: Org, user, query: dict[str, str]) -> dict[str, str] | None:
    """The page's links to the export in each format (None for a reader who may not export corrections)."""
    if text_reach(user, org) is None:
        return None
    url = reverse("dashboard_corrections_export")
    return {
        file_format: f"{url}?{urlencode({'org': org.slug, **query, 'format': file_format})}" for file_format in FORMATS
    }

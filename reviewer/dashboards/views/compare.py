"""The comparison page: two slices of one dimension side by side (grading/dashboard/compare.py, the same figures
`GET /api/v1/dashboard/compare` returns), each number linked to the reviews behind it, filtered to its slice.

Read only and GET, for any role in the org, within the reader's reach, as the dashboard is.
"""

from dataclasses import replace

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from grading.dashboard.compare import comparison, dimension_values, slices_checked
from grading.dashboard.figures import InvalidScope
from grading.figures.definitions import PASS_FAIL
from grading.models import ItemKind
from grading.models.reach import Reach
from reviewer.access import EVERY_ROLE, memberships_of, reaches_from, role_required
from reviewer.dashboards import reads
from reviewer.dashboards.display import Links
from reviewer.dashboards.views import bad_filter


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{value:.1%}"


def _points(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:+.1f} pts"


def _side_cells(row: dict, side: dict, links: Links, kind: str) -> dict:
    """One side of one row, each count linked to its reviews (a check's answer; the item's route)."""
    if row["check"] == PASS_FAIL:
        if kind == ItemKind.DRAFT:
            urls = {answer: links.reviews(kind=kind, route=answer) for answer in ("pass", "fail", "human")}
            urls["unknown"] = urls["human"]
        else:
            urls = {answer: links.reviews(kind=kind, route=answer) for answer in ("pass", "fail")}
            urls["unknown"] = links.reviews(kind=kind, route="human", reason="unknown_check")
    else:
        check = row["check"]
        urls = {answer: links.reviews(kind=kind, check=check, verdict=answer) for answer in ("pass", "fail", "unknown")}
    interval = side["interval"]
    return {
        **side,
        "rate_label": _percent(side["rate"]),
        "interval_label": f"{interval[0]:.1%} to {interval[1]:.1%}" if interval else "",
        "unknown_label": _percent(side["unknown_share"]),
        "passed_url": urls["pass"],
        "failed_url": urls["fail"],
        "unknown_url": urls["unknown"],
    }


def _p_label(p: float | None) -> str:
    if p is None:
        return "–"
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


@require_GET
@role_required(*EVERY_ROLE)
def dashboard_compare(request: HttpRequest) -> HttpResponse:
    orgs = reads.dashboard_orgs(memberships_of(request))
    org = reads.dashboard_org(memberships_of(request), request.GET.get("org"), orgs=orgs)
    if org is None:
        raise Http404("No such org among yours.")
    params = request.GET.copy()
    params.pop("slice", None)  # the comparison picks the slices itself
    kind = request.GET.get("kind") or ItemKind.CONVERSATION
    try:
        if kind not in ItemKind.values:
            raise InvalidScope("kind", f"must be one of {', '.join(ItemKind.values)}")
        scope = reads.scope_from(org, params, reaches_from(memberships_of(request), *EVERY_ROLE)[org.pk])
        asked = {name: request.GET.get(name) for name in ("dimension", "a", "b")}
        slices = slices_checked(scope, **asked) if any(asked.values()) else None
    except InvalidScope as exc:
        return bad_filter(request, exc.field, exc.message)
    context = {
        "org": org,
        "orgs": orgs,
        "scope": scope,
        "kind": kind,
        "kinds": ItemKind.values,
        "dimensions": dimension_values(scope.reach or Reach(org.pk), list(org.dimensions)),
        "slices": slices,
        "back_url": Links(org.slug, scope).page(),
        "nav_active": "dashboard",
    }
    if slices is not None:
        compared = comparison(scope, slices, kind=kind)
        links = {side: Links(org.slug, replace(scope, slice=slices.key(side))) for side in ("a", "b")}
        context["compared"] = compared
        context["rows"] = [
            {
                **row,
                "a": _side_cells(row, row["a"], links["a"], kind),
                "b": _side_cells(row, row["b"], links["b"], kind),
                "difference_label": _points(row["difference"]),
                "difference_interval": (
                    f"{_points(row['interval'][0])} to {_points(row['interval'][1])}" if row["interval"] else ""
                ),
                "p_label": _p_label(row["p_value"]),
            }
            for row in compared["rows"]
        ]
        context["judged_labels"] = {side: _percent(compared[side]["judged_share"]) for side in ("a", "b")}
        context["volume_urls"] = {side: links[side].reviews(kind=kind) for side in ("a", "b")}
        context["page_urls"] = {side: links[side].page() for side in ("a", "b")}
    return render(request, "reviewer/dashboards/compare.html", context)

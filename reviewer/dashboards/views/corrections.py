"""Corrections on the dashboard: their export (grading/dashboard/corrections.py), and the panel of how often people
correct rather than approve or reject, with the repairs they make beside Tollgate's
(grading/dashboard/correction_figures.py), each number leading to the reviews it counted. The panel and its lists
are every role's, as the dashboard is: they show counts and which items, never a correction's text.

A correction holds the item's text (the draft's body, the agent's message) and the person's, so its export is for
the people who read items: operators and leads within their queue reach, criteria admins across the org. Anyone
with none of those roles (a stakeholder, an org admin) gets a 403, and an org where they hold none is a 404, as an
org that does not exist.
"""

from collections.abc import Iterable
from urllib.parse import urlencode

from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET

from grading.core.weeks import iso_week, week_named
from grading.dashboard.correction_figures import (
    APPROVED,
    AUTO_REPAIRED,
    CHOICES,
    CORRECTED,
    PEOPLE_CORRECTED,
    PEOPLE_FIXED,
    REJECTED,
    REPAIR_COUNTS,
    SENT_BACK,
    UNKNOWN,
    choice_rows,
    correction_figures,
    repair_rows,
)
from grading.dashboard.corrections import (
    FORMATS,
    InvalidCorrectionFilter,
    as_jsonl,
    check_named,
    correction_filter_from,
    corrections_behind,
    export_corrections,
)
from grading.dashboard.figures import InvalidScope, scope_for
from grading.models import ItemKind, Org, Review
from grading.models.reach import Reach
from grading.reviews.blind import reviews_blind
from reviewer.access import EVERY_ROLE, memberships_of, org_asked, orgs_for, reaches_from, reaches_of, role_required
from reviewer.dashboards import display, reads
from reviewer.dashboards.display import Linked
from reviewer.dashboards.views import bad_filter
from reviewer.models import Membership, Role
from reviewer.queue.assignments import QUEUE_ROLES

# The roles whose members read items: what a correction holds.
ITEM_READERS = (Role.OPERATOR, Role.LEAD, Role.CRITERIA_ADMIN)


def text_reach(memberships: Iterable[Membership], org: Org) -> Reach | None:
    """What of `org` the person may export corrections of (the union of their item-reading memberships, from those in
    hand: `memberships_of`); None when they read no items there."""
    return reaches_from(memberships, *ITEM_READERS).get(org.pk)


@require_GET
@role_required(*ITEM_READERS)
def corrections_export(request: HttpRequest) -> HttpResponse:
    """The corrections of the page's scope, filtered, streamed as JSONL (`format=jsonl`) or as chat fine-tuning
    examples (`format=chat`, expected replies only)."""
    org = org_asked(list(orgs_for(request.user, *ITEM_READERS)), request.GET.get("org"))
    if org is None:
        raise Http404("No such org among yours.")
    reach = text_reach(memberships_of(request), org)
    try:
        scope = scope_for(
            org, since=request.GET.get("from"), until=request.GET.get("to"),
            application=request.GET.get("application"), reach=reach,
        )  # fmt: skip
        correction_filter = correction_filter_from(request.GET)
    except (InvalidScope, InvalidCorrectionFilter) as exc:
        return bad_filter(request, exc.field, exc.message)
    file_format = request.GET.get("format", "jsonl")
    if file_format not in FORMATS:
        return bad_filter(request, "format", f"must be {' or '.join(FORMATS)}")
    if file_format == "chat" and correction_filter.kind == ItemKind.DRAFT:
        return bad_filter(request, "format", "chat holds the expected replies of conversations, not drafts")
    corrections = corrections_behind(scope, correction_filter)
    rows = export_corrections(corrections, f=correction_filter, file_format=file_format)
    response = StreamingHttpResponse(as_jsonl(rows), content_type="application/x-ndjson; charset=utf-8")
    weeks = scope.as_query()
    name = f"tollgate-{org.slug}-corrections-{file_format}-{weeks['from']}-{weeks['to']}"
    response["Content-Disposition"] = f'attachment; filename="{name}.jsonl"'
    return response


def export_links(org: Org, memberships: Iterable[Membership], query: dict[str, str]) -> dict[str, str] | None:
    """The page's links to the export in each format (None for a reader who may not export corrections)."""
    if text_reach(memberships, org) is None:
        return None
    url = reverse("dashboard_corrections_export")
    return {
        file_format: f"{url}?{urlencode({'org': org.slug, **query, 'format': file_format})}" for file_format in FORMATS
    }


# --- the figures, and the reviews behind each -------------------------------------------------------------------

LIST_SIZE = 100
_WHAT = (*CHOICES, *REPAIR_COUNTS)
_WHAT_WORDS = {
    CORRECTED: "decided with a correction",
    APPROVED: "approved",
    REJECTED: "rejected",
    SENT_BACK: "sent back",
    UNKNOWN: "decided unknown",
    AUTO_REPAIRED: "repaired by Tollgate",
    PEOPLE_CORRECTED: "corrected by people",
    PEOPLE_FIXED: "fixed by people (gone after the gate graded the correction)",
}


_CHOICE_NAMES = {CORRECTED: "corrected", APPROVED: "approved", REJECTED: "rejected", SENT_BACK: "sent back",
                 UNKNOWN: "unknown"}  # fmt: skip


def _scope_of(request: HttpRequest):
    org = reads.dashboard_org(memberships_of(request), request.GET.get("org"))
    if org is None:
        raise Http404("No such org among yours.")
    return org, reads.scope_from(org, request.GET, reads.reader_reach(memberships_of(request), org))


class _Links:
    """The list behind each number of the panel, for one org and scope (ready for an HTML attribute)."""

    def __init__(self, org: Org, scope) -> None:
        self.base = {"org": org.slug, **scope.as_query()}
        self.url = reverse("dashboard_corrections_items")

    def items(self, **params) -> str:
        query = urlencode(self.base | {key: value for key, value in params.items() if value is not None})
        return mark_safe(f"{self.url}?{query}".replace("&", "&amp;"))  # noqa: S308 - urlencode output


def _linked_counts(row: dict, links: _Links, *, kind: str, **where) -> dict:
    """A row of counts with each count's link and the share corrected in words."""
    out = {"linked": {choice: Linked(row[choice], links.items(kind=kind, what=choice, **where)) for choice in CHOICES}}
    out["decided"] = Linked(row["decided"], links.items(kind=kind, what="decided", **where))
    share = row["corrected_share"]
    return out | {"share": "–" if share is None else f"{share:.0%}"}


def corrections_panel(figures: dict, links: _Links) -> dict:
    kinds = []
    for kind, title in ((ItemKind.DRAFT, "Drafts"), (ItemKind.CONVERSATION, "Conversations")):
        f = figures["choices"][kind]
        total = f["total"]
        words = (
            f"People corrected {total[CORRECTED]} of the {total['decided']} {kind}s they decided in these weeks"
            f" ({_linked_counts(total, links, kind=kind)['share']})."
            if total["decided"]
            else f"No {kind}s decided by people in these weeks."
        )
        kinds.append(
            {
                "kind": kind,
                "title": title,
                "words": words,
                "total": _linked_counts(total, links, kind=kind),
                "weeks": [
                    {"week": row["week"], **_linked_counts(row, links, kind=kind, week=row["week"])}
                    for row in f["by_week"]
                ],
                "checks": [
                    {"check": row["check"], **_linked_counts(row, links, kind=kind, check=row["check"] or "none")}
                    for row in f["by_check"]
                ],
            }
        )
    repairs = [
        {"code": row["code"], **{name: Linked(row[name], links.items(kind=ItemKind.DRAFT, what=name, check=row["code"]))
                                  for name in REPAIR_COUNTS}}
        for row in figures["repairs"]
    ]  # fmt: skip
    return {"kinds": kinds, "choices": [_CHOICE_NAMES[choice] for choice in CHOICES], "repairs": repairs}


def figures_url(org: Org, scope) -> str:
    """The panel's own URL for the dashboard's scope (ready for an HTML attribute)."""
    query = urlencode({"org": org.slug, **scope.as_query()})
    return mark_safe(f"{reverse('dashboard_corrections')}?{query}".replace("&", "&amp;"))  # noqa: S308 - urlencode output


@require_GET
@role_required(*EVERY_ROLE)
def corrections_figures(request: HttpRequest) -> HttpResponse:
    """The corrections panel (htmx, on the dashboard's load); followed as a plain link, a page of its own."""
    try:
        org, scope = _scope_of(request)
    except InvalidScope as exc:
        return bad_filter(request, exc.field, exc.message)
    links = _Links(org, scope)
    context = {
        "org": org,
        "scope": scope,
        "panel": corrections_panel(correction_figures(scope), links),
        "exports": export_links(org, memberships_of(request), scope.as_query()),
        "back_url": display.Links(org.slug, scope).page(),
        "nav_active": "dashboard",
    }
    template = "_corrections.html" if request.htmx else "corrections.html"
    return render(request, f"reviewer/dashboards/{template}", context)


def _items_filter(params) -> tuple[str, str, str, str]:
    """The list's kind, week (ISO, "" for the scope's), what it counts and the check ("none": no check failed)."""
    kind = params.get("kind", "")
    if kind not in ItemKind.values:
        raise InvalidCorrectionFilter("kind", f"must be one of {', '.join(ItemKind.values)}")
    week = params.get("week", "").strip()
    if week:
        try:
            week_named(week)
        except ValueError as refused:
            raise InvalidCorrectionFilter("week", str(refused)) from None
    what = params.get("what", "")
    if what not in (*_WHAT, "decided"):
        raise InvalidCorrectionFilter("what", f"must be one of {', '.join((*_WHAT, 'decided'))}")
    return kind, week, what, check_named(params.get("check", ""))


@require_GET
@role_required(*EVERY_ROLE)
def corrections_items(request: HttpRequest) -> HttpResponse:
    """The reviews behind one number of the panel, newest first: the rows it counted (`choice_rows`, `repair_rows`),
    filtered; an item people decide blind now is not listed (what the machine said of it picked it)."""
    try:
        org, scope = _scope_of(request)
        kind, week, what, check = _items_filter(request.GET)
    except (InvalidScope, InvalidCorrectionFilter) as exc:
        return bad_filter(request, exc.field, exc.message)
    rows = repair_rows(scope) if what in REPAIR_COUNTS else choice_rows(scope)
    wanted = ("" if check == "none" else check) if check else None
    review_ids = [
        row.review_id
        for row in rows
        if row.kind == kind
        and (what == "decided" or row.what == what)
        and (not week or iso_week(row.week) == week)
        and (wanted is None or wanted in row.checks)
    ]
    shown_ids = list(reversed(review_ids))[:LIST_SIZE]
    reviews = Review.objects.with_state().select_related("draft", "conversation", "decision__decided_by")
    by_id = reviews.in_bulk(shown_ids)
    listed = [by_id[pk] for pk in shown_ids if pk in by_id]
    blind = reviews_blind(listed)
    url = display.item_urls(queue_reach=reaches_of(request.user, *QUEUE_ROLES).get(org.pk))
    shown = [(review, url(review)) for review in listed if not blind[review.pk].verdicts]
    described = f"{kind} reviews {_WHAT_WORDS.get(what, 'decided by people')}"
    if check:
        described += " where no check failed" if check == "none" else f" with {check} failed"
    weeks = scope.as_query()
    described += f", {week}" if week else f", {weeks['from']} to {weeks['to']}"
    context = {
        "org": org,
        "described": described,
        "rows": shown,
        "total": len(review_ids),
        "withheld": len(listed) - len(shown),
        "more": max(0, len(review_ids) - LIST_SIZE),
        "back_url": reverse("dashboard_corrections") + "?" + urlencode({"org": org.slug, **weeks}),
        "nav_active": "dashboard",
    }
    return render(request, "reviewer/dashboards/correction_items.html", context)

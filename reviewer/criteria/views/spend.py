"""The spend page (/criteria/spend/): each of the admin's orgs' spend caps with what they count today and this week,
the week's judge spend per criteria version and judge, and the form that sets, raises or removes a cap.

Another org's caps and versions are a 404, as everywhere on the criteria pages; a bad figure is a 400 naming the
field, and changes nothing. The change itself, its audit and the grading pass it may send are
grading/reviews/spend.py's (`spend_cap_set`).
"""

from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from grading.models import CriteriaVersion, Org, SpendPeriod
from grading.reviews.spend import SpendCapInvalid, spend_cap_set, spend_overview
from reviewer.access import found, role_required
from reviewer.criteria import reads
from reviewer.criteria.forms import SpendCapForm
from reviewer.models import Role
from reviewer.pages import org_form_page, refused_at

NAV = {"nav_active": "criteria"}


@require_http_methods(["GET", "POST"])
@role_required(Role.CRITERIA_ADMIN)
def criteria_spend(request: HttpRequest) -> HttpResponse:
    """GET lists the caps and the spend; POST sets, raises or removes one cap (audited), then shows the page."""
    return org_form_page(request, reads.admin_org_ids(request.user), SpendCapForm, _render, _spend_cap_set)


def _spend_cap_set(request: HttpRequest, org_ids: list[int], form: SpendCapForm, org: Org) -> HttpResponse:
    version = None
    if form.cleaned_data["version"] is not None:
        named = CriteriaVersion.objects.filter(pk=form.cleaned_data["version"], org=org).first()
        version = found(named, "criteria version")
    try:
        spend_cap_set(
            org=org, version=version, period=form.cleaned_data["period"], tokens=form.cleaned_data["tokens"],
            cost_micros=form.cleaned_data["cost_micros"], actor=request.user, remove=form.cleaned_data["remove"],
        )  # fmt: skip
    except SpendCapInvalid as invalid:
        field = "cost" if invalid.field == "cost_micros" else invalid.field  # the form takes the cost in money
        refused_at(form, field, str(invalid))
        return _render(request, org_ids, form=form, status=400)
    scope = "the whole org" if version is None else str(version)
    done = "removed" if form.cleaned_data["remove"] else "set"
    messages.success(request, f"The {SpendPeriod(form.cleaned_data['period']).label} cap of {scope} is {done}.")
    return redirect("criteria_spend")


def _render(
    request: HttpRequest, org_ids: list[int], *, form: SpendCapForm | None = None, status: int = 200
) -> HttpResponse:
    orgs = [
        (org, spend_overview(org_id=org.pk), CriteriaVersion.objects.filter(org=org).order_by("kind", "number"))
        for org in Org.objects.filter(pk__in=org_ids).order_by("slug")
    ]
    context = {"orgs": orgs, "form": form, "periods": SpendPeriod.choices, "currency": settings.SPEND_CURRENCY, **NAV}
    return render(request, "reviewer/criteria/spend.html", context, status=status)

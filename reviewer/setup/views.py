"""The queue's set-up pages (/setup/): an org's service-level targets, listed in the order they decide, added last or
ahead of another, given another duration, moved ahead of or behind a neighbour, removed. Org admins set up their
orgs, and leads the orgs they lead whole (a lead of part of an org would change when the rest of it is due: a 403,
as for anyone else).

Every change goes through the service `manage.py targets` uses (grading/management/service_targets.py), so it is
refused, audited (with the person as actor) and re-dates the waiting items exactly as the command does. A bad form or
a refused change is a 400 (or 409) that says what to correct, at the top and at the field, and changes nothing;
another org's id is a 404."""

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.management.base import CommandError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from grading.management import selectors
from grading.management.options import duration_text
from grading.management.service_targets import (
    minutes_within,
    target_insert,
    target_minutes_set,
    target_move,
    target_remove,
    target_set,
    target_text,
)
from grading.models import Org
from grading.models.reach import Reach
from grading.reviews.targets import targets_of
from reviewer.access import org_named, role_required, setup_org_ids
from reviewer.models import Role
from reviewer.pages import bad_request, org_form_page
from reviewer.queue.reads import queue_applications
from reviewer.setup.forms import EARLIER, HOURS, TargetAtForm, TargetChangeForm, TargetForm, TargetMoveForm

SETUP_ROLES = (Role.LEAD, Role.ORG_ADMIN)


def _org_ids(request: HttpRequest) -> list[int]:
    org_ids = setup_org_ids(request.user)
    if not org_ids:
        raise PermissionDenied("A lead of part of an org does not set up its queue: ask an org admin.")
    return org_ids


def _said(refusal: CommandError) -> str:
    """A service's refusal as a page says it: the options it names are the form's fields."""
    return str(refusal).removeprefix("--")


@require_http_methods(["GET", "POST"])
@role_required(*SETUP_ROLES)
def setup_targets(request: HttpRequest) -> HttpResponse:
    """GET lists each org's targets in the order they decide; POST adds one, after the last or ahead of another."""
    return org_form_page(request, _org_ids(request), TargetForm, _render_targets, _target_add)


def _target_add(request: HttpRequest, org_ids: list[int], form: TargetForm, org: Org) -> HttpResponse:
    data = form.cleaned_data
    application = data["application"].strip()
    known = queue_applications([Reach(org.pk)])
    if application and application not in known:
        named = ", ".join(known) or "none yet"
        form.add_error("application", f"{org.name} has no application named {application}; its applications: {named}.")
    fields, minutes = None, None
    try:
        fields = selectors.fields(
            {"kind": data["kind"], "application": application or None, "reason": data["reason"]}, what="target"
        )
    except CommandError as refusal:
        form.add_error("application", _said(refusal))
    minutes = _minutes(form)
    if form.errors:
        return _render_targets(request, org_ids, form=form, status=400)
    fields |= {"minutes": minutes}
    ahead_of = data["ahead_of"]
    try:
        if ahead_of is None:
            outcome = target_set(org=org, fields=fields, position=None, replace=False, actor=request.user)
        else:
            outcome = target_insert(org=org, fields=fields, ahead_of=ahead_of, actor=request.user)
    except CommandError as refusal:
        form.add_error("ahead_of", _said(refusal))
        return _render_targets(request, org_ids, form=form, status=409)
    messages.success(request, outcome)
    return _back(org)


def _minutes(form: TargetForm | TargetChangeForm) -> int | None:
    """The form's duration in minutes, checked by the service; None, with the refusal at the field, when refused."""
    within, hours = form.cleaned_data["within"], form.cleaned_data["unit"] == HOURS
    try:
        return minutes_within(minutes=None if hours else within, hours=within if hours else None)
    except CommandError as refusal:
        form.add_error("within", _said(refusal))
        return None


@require_POST
@role_required(*SETUP_ROLES)
def setup_target_change(request: HttpRequest) -> HttpResponse:
    """Gives a target another duration in place (as the command's `set --position N --replace` with what it picks)."""
    org_ids = _org_ids(request)
    form = TargetChangeForm(request.POST)
    typed_well = form.is_valid()
    if {"org", "position"} & set(form.errors):  # the page's own fields: only a hand-made request gets them wrong
        return bad_request(form)
    org = org_named(org_ids, form.cleaned_data["org"])
    minutes = _minutes(form) if typed_well else None
    if minutes is None:
        return _render_targets(request, org_ids, form=form, status=400)
    position = form.cleaned_data["position"]
    try:
        outcome = target_minutes_set(org=org, position=position, minutes=minutes, actor=request.user)
    except CommandError as refusal:
        return _render_targets(request, org_ids, refusal=_said(refusal), status=409)
    messages.success(request, outcome)
    return _back(org)


@require_POST
@role_required(*SETUP_ROLES)
def setup_target_move(request: HttpRequest) -> HttpResponse:
    """Swaps a target with the one before or after it."""
    org_ids = _org_ids(request)
    form = TargetMoveForm(request.POST)
    if not form.is_valid():
        return bad_request(form)
    org = org_named(org_ids, form.cleaned_data["org"])
    earlier = form.cleaned_data["direction"] == EARLIER
    try:
        outcome = target_move(org=org, position=form.cleaned_data["position"], earlier=earlier, actor=request.user)
    except CommandError as refusal:
        return _render_targets(request, org_ids, refusal=_said(refusal), status=409)
    messages.success(request, outcome)
    return _back(org)


@require_POST
@role_required(*SETUP_ROLES)
def setup_target_remove(request: HttpRequest) -> HttpResponse:
    org_ids = _org_ids(request)
    form = TargetAtForm(request.POST)
    if not form.is_valid():
        return bad_request(form)
    org = org_named(org_ids, form.cleaned_data["org"])
    try:
        outcome = target_remove(org=org, position=form.cleaned_data["position"], actor=request.user)
    except CommandError as refusal:
        return _render_targets(request, org_ids, refusal=_said(refusal), status=409)
    messages.success(request, outcome)
    return _back(org)


def _back(org: Org) -> HttpResponse:
    return redirect(f"{reverse('setup_targets')}#org-{org.pk}")


def _render_targets(
    request: HttpRequest,
    org_ids: list[int],
    *,
    form: TargetForm | TargetChangeForm | None = None,
    refusal: str = "",
    status: int = 200,
) -> HttpResponse:
    orgs = [
        {
            "org": org,
            "targets": [
                {"target": target, "text": target_text(target), "within": duration_text(target.minutes)}
                for target in targets_of(org.pk)
            ],
            "applications": queue_applications([Reach(org.pk)]),
            # The form that did not pass, on its own org's card, with what was typed.
            "form": form if isinstance(form, TargetForm) and form.data.get("org") == str(org.pk) else None,
            # The change of a target's duration that did not pass, on its row.
            "change": form if isinstance(form, TargetChangeForm) and form.data.get("org") == str(org.pk) else None,
        }
        for org in Org.objects.filter(pk__in=org_ids).order_by("slug")
    ]
    context = {
        "orgs": orgs,
        "form": form,
        "refusal": refusal,
        "kinds": TargetForm.base_fields["kind"].choices,
        "reasons": TargetForm.base_fields["reason"].choices,
        "nav_active": "setup_targets",
    }
    return render(request, "reviewer/setup/targets.html", context, status=status)

"""Worked examples on the criteria pages (issue 23): the version editor lists an unpublished version's examples and
edits their explanation or removes them; an item's pages and the dashboard's disagreement lists add an item to a
version's examples (what those pages show of them is read by reviewer/criteria/reads.py). Every write goes through
grading/reviews/examples.py, which refuses what may not be written.

Only criteria admins reach these views (`role_required`), and only within their orgs: another org's version, example
or item is a 404, whatever the form says.
"""

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from grading.models import CriteriaExample
from grading.reviews.examples import (
    ExampleRefused,
    criteria_example_add,
    criteria_example_explain,
    criteria_example_remove,
)
from grading.reviews.versions import CriteriaConflict, CriteriaImmutable
from reviewer.access import role_required
from reviewer.criteria import reads
from reviewer.criteria.forms import ExampleAddForm, ExampleExplainForm, ExampleRemoveForm
from reviewer.models import Role

REFUSED = (ExampleRefused, CriteriaImmutable, CriteriaConflict)


@require_POST
@role_required(Role.CRITERIA_ADMIN)
def criteria_example_add_view(request: HttpRequest) -> HttpResponse:
    """Add the item named to the version named, on the check named; back to the version's examples."""
    form = ExampleAddForm(request.POST)
    if not form.is_valid():
        return HttpResponse(f"Bad request: {form.errors.as_text()}", status=400, content_type="text/plain")
    data = form.cleaned_data
    org_ids = reads.admin_org_ids(request.user)
    version = reads.version_for_admin(org_ids=org_ids, version_id=data["version"])
    item = reads.item_for_admin(org_ids=org_ids, kind=data["kind"], item_id=data["item"])
    if version is None or item is None or item.org_id != version.org_id:
        raise Http404("No such version or item.")
    try:
        criteria_example_add(version=version, subject=item, check=data["check"], actor=request.user)
    except REFUSED as refused:
        messages.error(request, f"Not added: {refused}")
    else:
        messages.success(request, f"Added {item.external_id} ({data['check']}) to the examples of {version}.")
    return redirect(reverse("criteria_version", args=[version.pk]) + "#examples")


@require_POST
@role_required(Role.CRITERIA_ADMIN)
def criteria_example_explain_view(request: HttpRequest, pk: int) -> HttpResponse:
    example = _get_example_for_user(request, pk)
    form = ExampleExplainForm(request.POST)
    if not form.is_valid():
        return HttpResponse(f"Bad request: {form.errors.as_text()}", status=400, content_type="text/plain")
    try:
        criteria_example_explain(
            example=example,
            explanation=form.cleaned_data["explanation"],
            actor=request.user,
            revision=form.cleaned_data["revision"],
        )
    except REFUSED as refused:
        messages.error(request, f"Not saved: {refused}")
    else:
        messages.success(request, f"Saved the explanation of {example.external_id} ({example.check_name}).")
    return redirect(reverse("criteria_version", args=[example.criteria_version_id]) + "#examples")


@require_POST
@role_required(Role.CRITERIA_ADMIN)
def criteria_example_remove_view(request: HttpRequest, pk: int) -> HttpResponse:
    example = _get_example_for_user(request, pk)
    form = ExampleRemoveForm(request.POST)
    if not form.is_valid():
        return HttpResponse(f"Bad request: {form.errors.as_text()}", status=400, content_type="text/plain")
    try:
        criteria_example_remove(example=example, actor=request.user, revision=form.cleaned_data["revision"])
    except REFUSED as refused:
        messages.error(request, f"Not removed: {refused}")
    else:
        messages.success(request, f"Removed {example.external_id} ({example.check_name}) from the examples.")
    return redirect(reverse("criteria_version", args=[example.criteria_version_id]) + "#examples")


def _get_example_for_user(request: HttpRequest, pk: int) -> CriteriaExample:
    example = (
        CriteriaExample.objects.filter(pk=pk, org_id__in=reads.admin_org_ids(request.user))
        .select_related("criteria_version")
        .first()
    )
    if example is None:
        raise Http404("No such example.")
    return example

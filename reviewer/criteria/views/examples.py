"""Worked examples on the criteria pages (issue 23): the version editor lists an unpublished version's examples and
edits their explanation or removes them; an item's pages and the dashboard's disagreement lists add an item to a
version's examples (what those pages show of them is read by reviewer/criteria/reads.py). Every write goes through
grading/reviews/examples.py, which refuses what may not be written.

Only criteria admins reach these views (`role_required`), and only within their orgs: another org's version, example
or item is a 404, whatever the form says.
"""

from collections.abc import Callable
from functools import partial
from typing import Any

from django import forms
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from grading.conversations.expected_replies import expected_reply_example_add
from grading.models import Conversation, Correction, CriteriaExample, CriteriaVersion, Draft
from grading.reviews.examples import (
    ExampleRefused,
    criteria_example_add,
    criteria_example_explain,
    criteria_example_remove,
)
from grading.reviews.versions import CriteriaConflict, CriteriaImmutable
from reviewer.access import found, role_required
from reviewer.criteria import reads
from reviewer.criteria.forms import (
    ExampleAddForm,
    ExampleExplainForm,
    ExampleFromExpectedReplyForm,
    ExampleRemoveForm,
)
from reviewer.models import Role
from reviewer.pages import bad_request

REFUSED = (ExampleRefused, CriteriaImmutable, CriteriaConflict)


@require_POST
@role_required(Role.CRITERIA_ADMIN)
def criteria_example_add_view(request: HttpRequest) -> HttpResponse:
    """Add the item named to the version named, on the check named; back to the version's examples."""

    def item_of(data: dict, org_ids: list[int]) -> Draft | Conversation | None:
        return reads.item_for_admin(org_ids=org_ids, kind=data["kind"], item_id=data["item"])

    def add(version: CriteriaVersion, item: Draft | Conversation, data: dict) -> str:
        criteria_example_add(version=version, subject=item, check=data["check"], actor=request.user)
        return f"Added {item.external_id} ({data['check']}) to the examples of {version}."

    return _example_add(request, ExampleAddForm, item_of, add, what="item")


@require_POST
@role_required(Role.CRITERIA_ADMIN)
def criteria_example_from_expected_reply_view(request: HttpRequest) -> HttpResponse:
    """Add the conversation of the expected reply named to the version named, on the check named, the expected reply
    as the example's explanation (grading/conversations/expected_replies.py); back to the version's examples."""

    def correction_of(data: dict, org_ids: list[int]) -> Correction | None:
        corrections = Correction.objects.filter(
            pk=data["correction"], org_id__in=org_ids, kind=Correction.Kind.EXPECTED_REPLY
        ).select_related("conversation")
        return corrections.first()

    def add(version: CriteriaVersion, correction: Correction, data: dict) -> str:
        expected_reply_example_add(version=version, correction=correction, check=data["check"], actor=request.user)
        external_id = correction.conversation.external_id
        return f"Added {external_id} ({data['check']}) with its expected reply to the examples of {version}."

    return _example_add(request, ExampleFromExpectedReplyForm, correction_of, add, what="expected reply")


def _example_add(
    request: HttpRequest,
    form_class: type[forms.Form],
    found_in: Callable[[dict, list[int]], Any],
    add: Callable[[CriteriaVersion, Any, dict], str],
    *,
    what: str,
) -> HttpResponse:
    """Add what the form names (`found_in` the admin's orgs) to the version it names, both of one org (else a 404
    that says `what` was looked for); `add` makes the change and says what it did."""
    form = form_class(request.POST)
    if not form.is_valid():
        return bad_request(form)
    data = form.cleaned_data
    org_ids = reads.admin_org_ids(request.user)
    version = reads.version_for_admin(org_ids=org_ids, version_id=data["version"])
    subject = found_in(data, org_ids)
    if version is None or subject is None or subject.org_id != version.org_id:
        raise Http404(f"No such version or {what}.")
    return _to_examples(request, version.pk, partial(add, version, subject, data), refused="Not added")


@require_POST
@role_required(Role.CRITERIA_ADMIN)
def criteria_example_explain_view(request: HttpRequest, pk: int) -> HttpResponse:
    def explain(example: CriteriaExample, data: dict) -> str:
        criteria_example_explain(
            example=example, explanation=data["explanation"], actor=request.user, revision=data["revision"]
        )
        return f"Saved the explanation of {example.external_id} ({example.check_name})."

    return _example_change(request, pk, ExampleExplainForm, explain, refused="Not saved")


@require_POST
@role_required(Role.CRITERIA_ADMIN)
def criteria_example_remove_view(request: HttpRequest, pk: int) -> HttpResponse:
    def remove(example: CriteriaExample, data: dict) -> str:
        criteria_example_remove(example=example, actor=request.user, revision=data["revision"])
        return f"Removed {example.external_id} ({example.check_name}) from the examples."

    return _example_change(request, pk, ExampleRemoveForm, remove, refused="Not removed")


def _example_change(
    request: HttpRequest,
    pk: int,
    form_class: type[forms.Form],
    change: Callable[[CriteriaExample, dict], str],
    *,
    refused: str,
) -> HttpResponse:
    """A change to one example, under the revision of the version the page showed (`change` makes it and says what
    it did)."""
    example = _get_example_for_user(request, pk)
    form = form_class(request.POST)
    if not form.is_valid():
        return bad_request(form)
    made = partial(change, example, form.cleaned_data)
    return _to_examples(request, example.criteria_version_id, made, refused=refused)


def _to_examples(request: HttpRequest, version_id: int, change: Callable[[], str], *, refused: str) -> HttpResponse:
    """Makes the change and says how it went, what it did or why it was refused (and changed nothing); back to the
    version's examples."""
    try:
        done = change()
    except REFUSED as refusal:
        messages.error(request, f"{refused}: {refusal}")
    else:
        messages.success(request, done)
    return redirect(reverse("criteria_version", args=[version_id]) + "#examples")


def _get_example_for_user(request: HttpRequest, pk: int) -> CriteriaExample:
    examples = CriteriaExample.objects.filter(pk=pk, org_id__in=reads.admin_org_ids(request.user))
    return found(examples.select_related("criteria_version").first(), "example")

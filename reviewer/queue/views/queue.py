"""The queue's pages: the list, claiming, the two item pages, and deciding. Every view asks the reads and
services with the operator's org ids; another org's item does not exist as far as an operator can tell."""

from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from urllib.parse import urlencode

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from grading.models import ItemKind, Review
from grading.models.reach import Reach
from reviewer.access import memberships_of, reaches_of, role_required
from reviewer.models import Pool, Role
from reviewer.queue import display, reads
from reviewer.queue.assignments import (
    QUEUE_ROLES,
    InvalidAssignment,
    assignable_people,
    assignment_clear,
    assignment_set,
    org_assignees,
)
from reviewer.queue.forms import (
    AssignForm,
    DecisionForm,
    DeclineForm,
    QueueFilterForm,
    decided,
    decision_form,
)
from reviewer.queue.item_reads import item_page
from reviewer.queue.services import (
    Refused,
    claim_decline,
    claim_extend,
    claim_next,
    claim_release,
    claim_take,
    decision_create,
    preferences_of,
    preferences_set,
)

NOTHING_TO_CLAIM = "Nothing left to claim: every item is decided or held by someone."


@require_GET
@role_required(*QUEUE_ROLES)
def queue(request: HttpRequest) -> HttpResponse:
    """The full page, or (for htmx's refresh, filters and paging) just the list that `#queue-list` swaps."""
    form = QueueFilterForm(request.GET)
    filters = form.filters()
    after, before = form.cursor()
    reaches = reads.operator_reaches(request.user, memberships=memberships_of(request))
    page = display.queue_page(user=request.user, filters=filters, after=after, before=before, reaches=reaches)
    context = {
        "page": page,
        "filters": filters,
        "filter_form": form,
        "list_url": _queue_url(filters, after=after, before=before),
        "next_url": _queue_url(filters, after=page.next_cursor) if page.next_cursor else "",
        "previous_url": _queue_url(filters, before=page.previous_cursor) if page.previous_cursor else "",
        "first_url": _queue_url(filters) if (after or before) else "",
        "reason_urls": [(count, _queue_url(replace(filters, reason=count.reason))) for count in page.counts],
        "all_reasons_url": _queue_url(replace(filters, reason="")),
        "nav_active": "queue",
        "preferences": lambda: preferences_of(request.user),  # read by the whole page only, not htmx's refresh
    }
    template = "reviewer/queue/queue.html"
    if request.htmx and request.htmx.target == "queue-list":
        template += "#queue-list"
    return render(request, template, context)


def _queue_url(filters: reads.QueueFilters, **cursor) -> str:
    query = filters.as_query(**cursor)
    return reverse("queue") + ("?" + urlencode(query) if query else "")


@require_POST
@role_required(*QUEUE_ROLES)
def queue_claim_next(request: HttpRequest) -> HttpResponse:
    """Claim the next free item (within the filters the queue shows) and open it."""
    filters = QueueFilterForm(request.POST).filters()
    reaches = reads.operator_reaches(request.user, memberships=memberships_of(request))
    claim = claim_next(user=request.user, filters=filters, reaches=reaches)
    if claim is None:
        messages.info(request, NOTHING_TO_CLAIM)
        return redirect(_queue_url(filters))
    return redirect("review_detail", pk=claim.review_id)


@require_POST
@role_required(*QUEUE_ROLES)
def queue_preferences(request: HttpRequest) -> HttpResponse:
    """The person's own queue settings (a checkbox posts "on" when ticked, nothing when not)."""
    preferences_set(user=request.user, next_after_decision=request.POST.get("next_after_decision") == "on")
    if request.htmx:
        return HttpResponse(status=204)
    messages.info(request, "Saved.")
    return redirect("queue")


# --- item pages -----------------------------------------------------------------------------------------------


def review_for_user(request: HttpRequest, pk: int) -> Review:
    """The review routed to humans, within the operator's reach; 404 otherwise (another org's or another
    application's item does not exist as far as this operator can tell)."""
    review = reads.review_for_operator(reaches=_operator_reaches(request), review_id=pk)
    if review is None:
        raise Http404("No such item in your queue.")
    return review


def _operator_reaches(request: HttpRequest) -> list[Reach]:
    """The operator's reach, from the memberships the request read once (`role_required` read them first)."""
    return reads.operator_reaches(request.user, memberships=memberships_of(request))


@require_GET
@role_required(*QUEUE_ROLES)
def review_detail(request: HttpRequest, pk: int) -> HttpResponse:
    review = review_for_user(request, pk)
    return _render_item(request, review)


def _render_item(
    request: HttpRequest,
    review: Review,
    *,
    posted: DecisionForm | None = None,
    refusal: str = "",
    lease_message: str = "",
    partial: str = "",
    status: int = 200,
) -> HttpResponse:
    """The item's page from its one read (`item_page`), or the part of it htmx asked for (the actions) or a view
    names (`partial`): with the decision form as `posted`, a `refusal`, the heartbeat's `lease_message`."""
    page = item_page(
        review, user=request.user, now=timezone.now(), posted=posted, refusal=refusal, lease_message=lease_message
    )
    if not partial and request.htmx and request.htmx.target == "actions":
        partial = "actions"
    template = f"reviewer/queue/item.html#{partial}" if partial else page.template
    return render(request, template, {"page": page, "nav_active": "queue"}, status=status)


@require_POST
@role_required(*QUEUE_ROLES)
def review_claim(request: HttpRequest, pk: int) -> HttpResponse:
    review = review_for_user(request, pk)
    try:
        claim_take(user=request.user, review_id=review.pk)
    except Refused as refusal:
        return _refused(request, review, refusal)
    return _after_action(request, review)


@require_POST
@role_required(*QUEUE_ROLES)
def review_release(request: HttpRequest, pk: int) -> HttpResponse:
    review = review_for_user(request, pk)
    return _give_back(request, review, lambda: claim_release(user=request.user, review_id=review.pk),
                      "Released: the item is back in the queue.")  # fmt: skip


@require_POST
@role_required(*QUEUE_ROLES)
def review_decline(request: HttpRequest, pk: int) -> HttpResponse:
    """Give the item back with a reason: its place returns to the queue, and the next claims pass it over for you."""
    review = review_for_user(request, pk)
    form = DeclineForm(request.POST)

    def decline() -> None:
        if not form.is_valid():
            raise Refused("invalid", " ".join(form.errors.get("reason", ["Say why you decline the item."])))
        claim_decline(user=request.user, review_id=review.pk, reason=form.cleaned_data["reason"])

    return _give_back(request, review, decline, "Declined: the item is back in the queue for someone else.")


def _give_back(request: HttpRequest, review: Review, act: Callable[[], object], done: str) -> HttpResponse:
    """The item leaves the person's hands (`act`), and they go back to the queue; or the page says why not."""
    try:
        act()
    except Refused as refusal:
        return _refused(request, review, refusal)
    messages.info(request, done)
    return _to_queue(request)


@require_POST
@role_required(*QUEUE_ROLES)
def review_heartbeat(request: HttpRequest, pk: int) -> HttpResponse:
    """Extend the lease while the page is open (htmx, every minute). Answers with the lease line, which says
    so when the lease is gone or the item changed; the decision form itself is left as the operator typed it."""
    review = review_for_user(request, pk)
    lease_message = ""
    try:
        claim_extend(user=request.user, review_id=review.pk)
    except Refused as refused:
        lease_message = refused.message
    if not request.htmx:
        return redirect("review_detail", pk=review.pk)
    return _render_item(request, review, partial="lease", lease_message=lease_message)


@require_POST
@role_required(*QUEUE_ROLES)
def review_decide(request: HttpRequest, pk: int) -> HttpResponse:
    review = review_for_user(request, pk)
    form = decision_form(review, request.POST)
    if not form.is_valid():
        return _render_item(request, review, posted=form, status=422)
    try:
        result = decision_create(
            user=request.user, review_id=review.pk, reaches=_operator_reaches(request), **decided(form)
        )
    except Refused as refusal:
        return _refused(request, review, refusal, posted=form)
    decision = result.decision
    if result.answer is not None:
        messages.success(request, f"Answered: {result.answer.get_outcome_display()} on {_item_name(review)}.")
    if decision is not None:
        messages.success(request, f"Decided: {decision.get_outcome_display()} on {_item_name(review)}.")
    if result.learning_error:
        messages.warning(request, result.learning_error)
    elif decision is not None and decision.learning_id:
        messages.info(request, "The note is now an org learning.")
    if preferences_of(request.user).next_after_decision:
        claim = claim_next(user=request.user, reaches=_operator_reaches(request))
        if claim is not None:
            return _to(request, reverse("review_detail", args=[claim.review_id]))
        messages.info(request, NOTHING_TO_CLAIM)
    return _to_queue(request)


@require_POST
@role_required(Role.LEAD)
def review_assign(request: HttpRequest, pk: int) -> HttpResponse:
    """A lead reserves the item for a person or a pool (for some hours, or while it waits); audited."""
    review = _get_review_for_lead(request, pk)
    pools = Pool.objects.filter(org_id=review.org_id)
    form = AssignForm(request.POST, people=assignable_people(review), pools=pools)
    if not form.is_valid():
        messages.error(request, " ".join(error for errors in form.errors.values() for error in errors))
        return redirect("review_detail", pk=review.pk)
    hours = form.cleaned_data["hours"]
    until = timezone.now() + timedelta(hours=hours) if hours else None
    try:
        assignment = assignment_set(review_id=review.pk, until=until, by=request.user, **form.assignee())
    except InvalidAssignment as refused:
        messages.error(request, str(refused))
    else:
        messages.success(request, f"Assigned to {assignment.person or f'pool {assignment.pool}'}.")
    return redirect("review_detail", pk=review.pk)


@require_POST
@role_required(Role.LEAD)
def queue_assign_many(request: HttpRequest) -> HttpResponse:
    """A lead assigns the ticked items of a list (the dashboard's overdue list) at once, each audited as one
    assignment; an item that cannot go to that person is named and left as it was, the others are assigned."""
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(back, {request.get_host()}, require_https=request.is_secure()):
        back = reverse("queue")
    ids = [int(value) for value in request.POST.getlist("review") if value.isdigit()]
    if not ids:
        messages.error(request, "Tick the items to assign first.")
        return redirect(back)
    reviews = [_get_review_for_lead(request, pk) for pk in ids]
    if len({review.org_id for review in reviews}) > 1:
        messages.error(request, "Assign the items of one org at a time.")
        return redirect(back)
    people, pools = org_assignees(reviews[0].org_id)
    form = AssignForm(request.POST, people=people, pools=pools)
    if not form.is_valid():
        messages.error(request, " ".join(error for errors in form.errors.values() for error in errors))
        return redirect(back)
    hours = form.cleaned_data["hours"]
    until = timezone.now() + timedelta(hours=hours) if hours else None
    refused = []
    for review in reviews:
        try:
            assignment_set(review_id=review.pk, until=until, by=request.user, **form.assignee())
        except InvalidAssignment as error:
            refused.append(f"{_item_name(review)}: {error}")
    assigned = len(reviews) - len(refused)
    if assigned:
        messages.success(request, f"Assigned {assigned} item{'s' if assigned > 1 else ''} to {form.assignee_name()}.")
    if refused:
        messages.error(request, "Not assigned: " + "; ".join(refused))
    return redirect(back)


@require_POST
@role_required(Role.LEAD)
def review_unassign(request: HttpRequest, pk: int) -> HttpResponse:
    review = _get_review_for_lead(request, pk)
    if assignment_clear(review_id=review.pk, by=request.user):
        messages.success(request, "Unassigned: anyone in reach may claim it (unless a rule reserves it).")
    return redirect("review_detail", pk=review.pk)


def _get_review_for_lead(request: HttpRequest, pk: int) -> Review:
    """The review routed to humans, within the lead's reach; 404 otherwise."""
    review = reads.review_for_operator(reaches=list(reaches_of(request.user, Role.LEAD).values()), review_id=pk)
    if review is None:
        raise Http404("No such item in your queue.")
    return review


def _item_name(review: Review) -> str:
    return review.draft.slug if review.kind == ItemKind.DRAFT else review.conversation.external_id


def _refused(
    request: HttpRequest, review: Review, refusal: Refused, *, posted: DecisionForm | None = None
) -> HttpResponse:
    """Nothing was written: show the item again with the reason, in place for htmx, as a page without it."""
    return _render_item(request, review, posted=posted, refusal=refusal.message, status=409)


def _to_queue(request: HttpRequest) -> HttpResponse:
    """Back to the queue after the item left the operator's hands (decided, answered, released, declined)."""
    return _to(request, reverse("queue"))


def _to(request: HttpRequest, url: str) -> HttpResponse:
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


def _after_action(request: HttpRequest, review: Review) -> HttpResponse:
    if request.htmx:
        return _render_item(request, review)
    return redirect("review_detail", pk=review.pk)

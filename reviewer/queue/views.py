"""The queue's pages: the list, claiming, the two item pages, and deciding. Every view asks the reads and
services with the operator's org ids; another org's item does not exist as far as an operator can tell."""

from dataclasses import replace
from datetime import timedelta
from urllib.parse import urlencode

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from grading.models import ItemKind, Review
from grading.reviews.blind import review_blind
from reviewer.access import reaches_of, role_required
from reviewer.audit.display import trail_of
from reviewer.criteria.reads import example_targets
from reviewer.models import Pool, Role
from reviewer.queue import display, item_pages, reads, rendering
from reviewer.queue.answers import answers_view
from reviewer.queue.assignments import (
    QUEUE_ROLES,
    InvalidAssignment,
    assignable_people,
    assignment_clear,
    assignment_set,
    assignments_of,
    reservation_of,
)
from reviewer.queue.forms import AssignForm, ConversationDecisionForm, DeclineForm, DraftDecisionForm, QueueFilterForm
from reviewer.queue.services import (
    Refused,
    claim_decline,
    claim_extend,
    claim_next,
    claim_release,
    claim_take,
    decision_create,
)


@require_GET
@role_required(*QUEUE_ROLES)
def queue(request: HttpRequest) -> HttpResponse:
    """The full page, or (for htmx's refresh, filters and paging) just the list that `#queue-list` swaps."""
    form = QueueFilterForm(request.GET)
    filters = form.filters()
    after, before = form.cursor()
    page = display.queue_page(user=request.user, filters=filters, after=after, before=before)
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
    claim = claim_next(user=request.user, filters=filters)
    if claim is None:
        messages.info(request, "Nothing left to claim: every item is decided or held by someone.")
        return redirect(_queue_url(filters))
    return redirect("review_detail", pk=claim.review_id)


# --- item pages -----------------------------------------------------------------------------------------------


def _get_review_for_user(request: HttpRequest, pk: int) -> Review:
    """The review routed to humans, within the operator's reach; 404 otherwise (another org's or another
    application's item does not exist as far as this operator can tell)."""
    review = reads.review_for_operator(reaches=reads.operator_reaches(request.user), review_id=pk)
    if review is None:
        raise Http404("No such item in your queue.")
    return review


def _item_context(request: HttpRequest, review: Review, *, form=None, refusal: str = "") -> dict:
    """What both item pages and their partials read."""
    still_counts = review.counts_now
    decision = reads.decision_of(review)
    now = timezone.now()
    lease = reads.lease_of(reads.open_claim(review.pk, request.user), request.user, now)
    slots = reads.slots_now(review, now)
    blind = review_blind(review)
    if form is None:
        form = _decision_form(review, blind=blind.verdicts)
    return {
        "review": review,
        "slots": slots,
        "answers": answers_view(review, slots, request.user.pk, blind=blind),
        # Giving one of several answers (not the item's decision), or settling answers that differed.
        "answering": slots.several and not slots.answers_in,
        "adjudicating": slots.answers_in and decision is None,
        "no_place": slots.place_for(request.user.pk),  # why this person cannot claim it now, or None
        "blind": blind.verdicts,  # what anyone but the reader said is hidden: an audit item not yet decided
        "still_counts": still_counts,
        "stale_reason": "" if still_counts else display.stale_reason(review),
        "decision": decision,
        "lease": lease,
        "form": form,
        "refusal": refusal,
        "reservation": reservation_of(review, now) if decision is None else None,
        "due": display.due_of(review, now) if decision is None and still_counts else None,
        "assign": _assign_context(request, review) if decision is None and still_counts else None,
        "nav_active": "queue",
    }


def _assign_context(request: HttpRequest, review: Review) -> dict | None:
    """For a lead whose reach covers the item: the assignment form, and whether there is one by hand to undo."""
    reach = reaches_of(request.user, Role.LEAD).get(review.org_id)
    if reach is None or not reach.covers(review.kind, review.application):
        return None
    form = AssignForm(
        people=assignable_people(review), pools=Pool.objects.filter(org_id=review.org_id).order_by("name")
    )
    return {"form": form, "by_hand": review.pk in assignments_of([review.pk])}


def _decision_form(review: Review, data=None, *, blind: bool = False):
    if review.kind == ItemKind.DRAFT:
        return DraftDecisionForm(data, initial={"fingerprint": review.fingerprint})
    checks = {} if blind else (review.checks or {})  # blind: the form must not start from the machine's verdicts
    verdicts = {name: (check or {}).get("verdict", "unknown") for name, check in checks.items()}
    return ConversationDecisionForm(data, initial={"fingerprint": review.fingerprint}, initial_verdicts=verdicts)


@require_GET
@role_required(*QUEUE_ROLES)
def review_detail(request: HttpRequest, pk: int) -> HttpResponse:
    review = _get_review_for_user(request, pk)
    return _render_item(request, review, _item_context(request, review))


def _render_item(request: HttpRequest, review: Review, context: dict, *, status: int = 200) -> HttpResponse:
    if request.htmx and request.htmx.target == "actions":
        return render(request, "reviewer/queue/item.html#actions", context, status=status)
    if review.kind == ItemKind.DRAFT:
        context |= _draft_context(review, blind=context["blind"])
        template = "reviewer/queue/draft_item.html"
    else:
        context |= _conversation_context(review, blind=context["blind"])
        template = "reviewer/queue/conversation_item.html"
    # Earlier reviews carry the machine's earlier verdicts: hidden too while blind.
    context["other_reviews"] = [] if context["blind"] else reads.other_reviews(review)
    # A criteria admin may make a decided item a worked example of a version not yet published.
    subject = review.draft or review.conversation
    context["targets"] = None if context["blind"] else example_targets(request.user, subject)
    context["trail"] = trail_of(request.user, subject)
    return render(request, template, context, status=status)


def _draft_context(review: Review, *, blind: bool) -> dict:
    body = item_pages.draft_body_for_review(review)
    if blind:  # the article as judged, and nothing of what the checks or the judge made of it
        return {"article": rendering.render_markdown(body, []), "identity": item_pages.identity_rows(review)}
    memory = review.memory_used if isinstance(review.memory_used, dict) else {}
    proof_terms = [
        t for fact in memory.get("facts") or [] if isinstance(fact, dict) for t in fact.get("proof_terms") or []
    ]
    highlights = rendering.finding_highlights(review.findings) + rendering.proof_highlights(body, proof_terms)
    repairs = review.repairs if isinstance(review.repairs, dict) else None
    return {
        "why": item_pages.why_human(review),
        "scale": item_pages.draft_scale(review),
        "sub_scores": item_pages.sub_scores(review),
        "article": rendering.render_markdown(body, highlights),
        "findings": [f for f in review.findings if isinstance(f, dict)],
        "judge_issues": [i for i in review.judge_issues if isinstance(i, dict)],
        "repairs": repairs,
        "diff": rendering.diff_lines(str(repairs.get("diff", ""))) if repairs else [],
        "memory": memory,
        "identity": item_pages.identity_rows(review),
    }


def _conversation_context(review: Review, *, blind: bool) -> dict:
    evidence = item_pages.conversation_evidence(review)
    if blind:  # the path as the user saw it, without the checks or the messages the judge cited
        for entry in evidence.path:
            for message in [entry.message] if entry.message else entry.fold.messages:
                message.cited_by.clear()
        evidence = replace(evidence, checks=[])
    return {
        "why": item_pages.why_human(review),
        "evidence": evidence,
        "identity": item_pages.identity_rows(review, messages_on_path=evidence.path_length),
    }


@require_POST
@role_required(*QUEUE_ROLES)
def review_claim(request: HttpRequest, pk: int) -> HttpResponse:
    review = _get_review_for_user(request, pk)
    try:
        claim_take(user=request.user, review_id=review.pk)
    except Refused as refusal:
        return _refused(request, review, refusal)
    return _after_action(request, review)


@require_POST
@role_required(*QUEUE_ROLES)
def review_release(request: HttpRequest, pk: int) -> HttpResponse:
    review = _get_review_for_user(request, pk)
    try:
        claim_release(user=request.user, review_id=review.pk)
    except Refused as refusal:
        return _refused(request, review, refusal)
    messages.info(request, "Released: the item is back in the queue.")
    return _to_queue(request)


@require_POST
@role_required(*QUEUE_ROLES)
def review_decline(request: HttpRequest, pk: int) -> HttpResponse:
    """Give the item back with a reason: its place returns to the queue, and the next claims pass it over for you."""
    review = _get_review_for_user(request, pk)
    form = DeclineForm(request.POST)
    try:
        if not form.is_valid():
            raise Refused("invalid", " ".join(form.errors.get("reason", ["Say why you decline the item."])))
        claim_decline(user=request.user, review_id=review.pk, reason=form.cleaned_data["reason"])
    except Refused as refusal:
        return _refused(request, review, refusal)
    messages.info(request, "Declined: the item is back in the queue for someone else.")
    return _to_queue(request)


@require_POST
@role_required(*QUEUE_ROLES)
def review_heartbeat(request: HttpRequest, pk: int) -> HttpResponse:
    """Extend the lease while the page is open (htmx, every minute). Answers with the lease line, which says
    so when the lease is gone or the item changed; the decision form itself is left as the operator typed it."""
    review = _get_review_for_user(request, pk)
    lease_message = ""
    try:
        claim_extend(user=request.user, review_id=review.pk)
    except Refused as refused:
        lease_message = refused.message
    if not request.htmx:
        return redirect("review_detail", pk=review.pk)
    context = _item_context(request, review) | {"lease_message": lease_message}
    return render(request, "reviewer/queue/item.html#lease", context)


@require_POST
@role_required(*QUEUE_ROLES)
def review_decide(request: HttpRequest, pk: int) -> HttpResponse:
    review = _get_review_for_user(request, pk)
    form = _decision_form(review, request.POST)
    if not form.is_valid():
        return _render_item(request, review, _item_context(request, review, form=form), status=422)
    try:
        result = decision_create(
            user=request.user,
            review_id=review.pk,
            fingerprint=form.cleaned_data["fingerprint"],
            outcome=form.cleaned_data.get("outcome", ""),
            checks=form.verdicts() if isinstance(form, ConversationDecisionForm) else None,
            note=form.cleaned_data.get("note") or "",
            keep_as_learning=form.cleaned_data.get("keep_as_learning", False),
        )
    except Refused as refusal:
        return _refused(request, review, refusal, form=form)
    decision = result.decision
    if result.answer is not None:
        messages.success(request, f"Answered: {result.answer.get_outcome_display()} on {_item_name(review)}.")
    if decision is not None:
        messages.success(request, f"Decided: {decision.get_outcome_display()} on {_item_name(review)}.")
    if result.learning_error:
        messages.warning(request, result.learning_error)
    elif decision is not None and decision.learning_id:
        messages.info(request, "The note is now an org learning.")
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


def _refused(request: HttpRequest, review: Review, refusal: Refused, *, form=None) -> HttpResponse:
    """Nothing was written: show the item again with the reason, in place for htmx, as a page without it."""
    context = _item_context(request, review, form=form, refusal=refusal.message)
    return _render_item(request, review, context, status=409)


def _to_queue(request: HttpRequest) -> HttpResponse:
    """Back to the queue after the item left the operator's hands (decided, answered, released, declined)."""
    if request.htmx:
        return HttpResponseClientRedirect(reverse("queue"))
    return redirect("queue")


def _after_action(request: HttpRequest, review: Review) -> HttpResponse:
    if request.htmx:
        return _render_item(request, review, _item_context(request, review))
    return redirect("review_detail", pk=review.pk)

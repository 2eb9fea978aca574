"""Sending an item to review from a list: a lead (within their reach), a criteria admin or an org admin sends an
item's counting review to people whatever the machine decided, with a reason (`review_send`, audited). The page a
review list's row links to: which item, whether it is with people already, and the reason asked for. It shows
nothing the machine or anyone said of the item, so an audit item waiting blind stays blind here too."""

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods

from grading.models import UNGRADED, Review, for_people
from grading.reviews.services import SEND_REASON_MAX, SendRefused, review_send
from reviewer.access import role_required
from reviewer.queue.sending import SENDER_ROLES, review_for_sender

PAGE = "reviewer/queue/send.html"


class SendForm(forms.Form):
    reason = forms.CharField(max_length=SEND_REASON_MAX, widget=forms.Textarea(attrs={"rows": 3}))


def _back(request: HttpRequest) -> str:
    """Where the person came from (the list), when it is this site; else the dashboard."""
    back = request.POST.get("next") or request.GET.get("next") or ""
    if url_has_allowed_host_and_scheme(back, {request.get_host()}, require_https=request.is_secure()):
        return back
    return reverse("dashboard")


def _why_not(review: Review) -> str:
    """Why this review cannot be sent, or "" when it can (or is with people already)."""
    if not review.counts_now:
        return "This review no longer counts (the item changed, or was graded again): send the item's current one."
    if review.route in UNGRADED:
        return "The machine could not grade this item: there is nothing for people to decide yet."
    return ""


@require_http_methods(["GET", "POST"])
@role_required(*SENDER_ROLES)
def review_send_page(request: HttpRequest, pk: int) -> HttpResponse:
    """GET: the form; POST: send, then back to the list. A missing or overlong reason is a 400 naming it, a review
    that cannot be sent a 409; neither writes anything."""
    review = review_for_sender(request, pk)
    with_people = for_people(route=review.route, audit=review.audit, sent=review.sent)
    form = SendForm(request.POST if request.method == "POST" else None)
    status, refusal = 200, _why_not(review)
    if request.method == "POST":
        if refusal:
            status = 409
        elif with_people:
            messages.info(request, "It is with people already: nothing changed.")
            return redirect(_back(request))
        elif not form.is_valid():
            status = 400
        else:
            try:
                review_send(review_ids=[review.pk], reason=form.cleaned_data["reason"], by=request.user)
            except SendRefused as refused:
                form.add_error(refused.field, str(refused))
                status = 400
            else:
                messages.success(request, f"Sent to review: {_item_name(review)} waits for people in the queue.")
                return redirect(_back(request))
    context = {"review": review, "item": _item_name(review), "form": form, "refusal": refusal,
               "with_people": with_people, "back": _back(request)}  # fmt: skip
    return render(request, PAGE, context, status=status)


def _item_name(review: Review) -> str:
    return review.draft.external_id if review.draft_id else review.conversation.external_id

"""The draft editor's views ("approve as corrected"): the checks on an edit, on demand and with nothing written, the
approval itself, and the panel of the draft's corrections that refreshes while one waits for the gate. Each renders
the item page (or, for htmx, its part) from the page's one read, with the editor as the person left it."""

from django import forms
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from grading.drafts.corrections import CorrectionRefused, correction_check
from grading.models import ItemKind, Review
from reviewer.access import role_required
from reviewer.queue import reads
from reviewer.queue.assignments import QUEUE_ROLES
from reviewer.queue.corrections import correction_create, marked
from reviewer.queue.item_reads import item_page
from reviewer.queue.services import Refused

EDITOR = "reviewer/queue/_correction.html"
# A refusal's status: the body was wrong (400, 413), or the item or the person's place on it moved on (409).
_STATUS = {"invalid": 400, "too_large": 413}


class CorrectionForm(forms.Form):
    # The draft's fingerprint when the editor was loaded: the precondition of the correction.
    fingerprint = forms.CharField(max_length=80, widget=forms.HiddenInput)
    body = forms.CharField(strip=False, widget=forms.Textarea)

    def corrected(self) -> str:
        # A browser sends a textarea's lines ended with CRLF; the draft's body, as pipelines send it, with LF.
        return self.cleaned_data["body"].replace("\r\n", "\n")


def _get_draft_review(request: HttpRequest, pk: int) -> Review:
    review = reads.review_for_operator(reaches=reads.operator_reaches(request.user), review_id=pk)
    if review is None or review.kind != ItemKind.DRAFT:
        raise Http404("No such draft in your queue.")
    return review


def _form_refusal(form: CorrectionForm) -> str:
    return " ".join(f"{field}: {error}" for field, errors in form.errors.items() for error in errors)


def _render(request: HttpRequest, review: Review, *, part: str = "", status: int = 200, **editor) -> HttpResponse:
    page = item_page(review, user=request.user, now=timezone.now())
    template = f"{EDITOR}#{part}" if part else page.template
    context = {"page": page, "nav_active": "queue", **editor}
    return render(request, template, context, status=status)


@require_POST
@role_required(*QUEUE_ROLES)
def review_correction_check(request: HttpRequest, pk: int) -> HttpResponse:
    """The draft rules of the review's criteria on the edited body: the findings, each with the text it quotes."""
    review = _get_draft_review(request, pk)
    form = CorrectionForm(request.POST)
    part = "findings" if request.htmx else ""
    if not form.is_valid():
        return _render(request, review, part=part, status=400, editor_refusal=_form_refusal(form))
    body = form.corrected()
    page = item_page(review, user=request.user, now=timezone.now())
    if page.blind:  # the checks on an unchanged body are the machine's findings, which an audit item hides
        hidden = "The checks stay hidden until you decide this audit item."
        return _render(request, review, part=part, status=409, editor_refusal=hidden)
    try:
        findings = correction_check(review=review, body=body)
    except CorrectionRefused as refused:
        status = 413 if refused.too_large else 400
        return _render(request, review, part=part, status=status, editor_refusal=refused.message)
    checked = {"findings": marked(findings, body), "body": body}
    return _render(request, review, part=part, editor_checked=checked, editor_body=body)


@require_POST
@role_required(*QUEUE_ROLES)
def review_correct(request: HttpRequest, pk: int) -> HttpResponse:
    """Approve the draft as corrected: its new revision goes through the gate, and the approval stands only if no hard
    check fails on it. Refused: the page again, the editor holding the person's text, and why."""
    review = _get_draft_review(request, pk)
    form = CorrectionForm(request.POST)
    if not form.is_valid():
        body = (request.POST.get("body") or "").replace("\x00", "")
        return _render(request, review, status=400, editor_refusal=_form_refusal(form), editor_body=body)
    try:
        correction_create(
            user=request.user, review_id=review.pk, fingerprint=form.cleaned_data["fingerprint"], body=form.corrected()
        )
    except Refused as refused:
        status = _STATUS.get(refused.code, 409)
        return _render(request, review, status=status, editor_refusal=refused.message, editor_body=form.corrected())
    messages.success(
        request,
        "Approved as corrected: the corrected revision goes through the gate. The approval stands when no hard check "
        "fails on it; this page says how it settled.",
    )
    return redirect("review_detail", pk=review.pk)


@require_GET
@role_required(*QUEUE_ROLES)
def review_corrections(request: HttpRequest, pk: int) -> HttpResponse:
    """The draft's corrections (htmx polls it while one waits for the gate); the item page without htmx."""
    review = _get_draft_review(request, pk)
    if not request.htmx:
        return redirect("review_detail", pk=review.pk)
    return _render(request, review, part="corrections")

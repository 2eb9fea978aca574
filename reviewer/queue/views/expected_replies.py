"""Writing an expected reply from a conversation's item page (reviewer/queue/expected_replies.py). A plain form post:
kept, back to the item at the reply; refused, a page that says why and keeps the text for the person to copy."""

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from reviewer.access import role_required
from reviewer.queue.assignments import QUEUE_ROLES
from reviewer.queue.expected_replies import ExpectedReplyForm, expected_reply_create
from reviewer.queue.services import Refused
from reviewer.queue.views.queue import review_for_user

GIVEN_BACK_MAX_CHARS = 100_000  # a refused reply is given back to copy up to this length (5 times what is kept)
# A refusal about what was sent is the form's fault (400); one about the item's state is a conflict (409).
FORM_FIELDS = ("text", "message", "invalid")


@require_POST
@role_required(*QUEUE_ROLES)
def review_expected_reply(request: HttpRequest, pk: int) -> HttpResponse:
    review = review_for_user(request, pk)
    form = ExpectedReplyForm(request.POST)
    if not form.is_valid():
        problems = "; ".join(f"{name}: {' '.join(errors)}" for name, errors in form.errors.items())
        return _refused(request, review.pk, f"Not kept. {problems}", form, status=400)
    data = form.cleaned_data
    try:
        _, replaced = expected_reply_create(
            user=request.user,
            review_id=review.pk,
            message_id=data["message"],
            path_fingerprint=data["path_fingerprint"],
            text=data["text"],
        )
    except Refused as refusal:
        status = 400 if refusal.code in FORM_FIELDS else 409
        named = f"{refusal.code}: " if status == 400 else ""
        return _refused(request, review.pk, f"Not kept. {named}{refusal.message}", form, status=status)
    messages.success(
        request, f"{'Changed your' if replaced else 'Kept your'} expected reply at message {data['message']}."
    )
    return redirect(reverse("review_detail", args=[review.pk]) + "#expected-replies")


def _refused(
    request: HttpRequest, review_id: int, reason: str, form: ExpectedReplyForm, *, status: int
) -> HttpResponse:
    """Nothing was written: say why, with what the person wrote to copy (it is theirs; nobody else sees this page)."""
    text = str(form.data.get("text", "")).replace("\x00", "")  # a NUL is what was refused: the rest is theirs
    if len(text) > GIVEN_BACK_MAX_CHARS:  # a body no person typed: not sent back to the browser
        text = ""
    context = {"review_id": review_id, "reason": reason, "text": text, "nav_active": "queue"}
    return render(request, "reviewer/queue/expected_reply_refused.html", context, status=status)

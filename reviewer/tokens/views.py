"""A person's own personal access tokens (/account/tokens/): made in one of their orgs, shown once in the answer to
the POST that made it (never in a message kept for the next page, never in the audit trail), listed with when each
was made, last used and expires, revoked with one button. Another person's token is a 404."""

from datetime import timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from grading.models import Org
from reviewer.access import EVERY_ROLE, found, orgs_for
from reviewer.models import PersonalToken
from reviewer.pages import org_form_page, refused_at
from reviewer.tokens.forms import TokenForm
from reviewer.tokens.services import IssuedToken, TokenRefused, token_create, token_revoke


@require_http_methods(["GET", "POST"])
@login_required
def account_tokens(request: HttpRequest) -> HttpResponse:
    """GET lists the person's tokens; POST makes one and shows it, in this answer only."""
    org_ids = list(orgs_for(request.user, *EVERY_ROLE).values_list("pk", flat=True))
    return org_form_page(request, org_ids, TokenForm, _render, _create)


def _create(request: HttpRequest, org_ids: list[int], form: TokenForm, org: Org) -> HttpResponse:
    days = form.cleaned_data["expires"]
    expires_at = timezone.now() + timedelta(days=int(days)) if days else None
    try:
        issued = token_create(user=request.user, org=org, name=form.cleaned_data["name"], expires_at=expires_at)
    except TokenRefused as refused:
        refused_at(form, refused.field, refused.message)
        return _render(request, org_ids, form=form, status=400)
    return _render(request, org_ids, issued=issued)


@require_POST
@login_required
def account_token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    token = found(PersonalToken.objects.filter(user=request.user, pk=pk).select_related("org", "user").first(), "token")
    token_revoke(token=token, actor=request.user)
    messages.success(request, f"The token {token.name} ({token.prefix}…) is revoked: the API refuses it from now on.")
    return redirect("account_tokens")


def _render(
    request: HttpRequest,
    org_ids: list[int],
    *,
    form: TokenForm | None = None,
    status: int = 200,
    issued: IssuedToken | None = None,
) -> HttpResponse:
    tokens = PersonalToken.objects.filter(user=request.user).select_related("org").order_by("-created_at", "-pk")
    context = {
        "tokens": tokens,
        "orgs": Org.objects.filter(pk__in=org_ids).order_by("slug"),
        "form": form or TokenForm(),
        "issued": issued,
        "now": timezone.now(),
    }
    return render(request, "reviewer/tokens/tokens.html", context, status=status)

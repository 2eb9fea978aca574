"""The two steps of a single sign-on: off to the provider, and back with its answer. While single sign-on is not
configured both send people to the sign-in page. Whatever goes wrong on the way back ends on a page that says so,
with nobody signed in and nothing written."""

import logging

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from reviewer.oidc import provider
from reviewer.oidc.people import SignInRefused, person_sign_in, provider_person
from reviewer.orgadmin.invitations import LINK_SESSION_KEY, SINGLE_SIGN_ON_SESSION_KEY

logger = logging.getLogger(__name__)

NEXT_SESSION_KEY = "oidc_next"  # where to go once signed in, kept across the trip to the provider
BACKEND = "reviewer.oidc.backends.SingleSignOnBackend"


@require_POST
def oidc_start(request: HttpRequest) -> HttpResponse:
    """A POST with the CSRF token (the sign-in page's button): off to the provider's sign-in."""
    if not provider.configured():
        return redirect("login")
    next_url = request.POST.get("next", "")
    if url_has_allowed_host_and_scheme(next_url, {request.get_host()}, require_https=request.is_secure()):
        request.session[NEXT_SESSION_KEY] = next_url
    # Pressed on an invitation's page: its link (opened in this browser) is accepted on the way back. From any other
    # page, no invitation is.
    if request.POST.get("accept_invitation"):
        request.session[SINGLE_SIGN_ON_SESSION_KEY] = request.session.get(LINK_SESSION_KEY, "")
    else:
        request.session.pop(SINGLE_SIGN_ON_SESSION_KEY, None)
    try:
        return provider.authorize_redirect(request, request.build_absolute_uri(reverse("oidc_callback")))
    except provider.ProviderUnreachable as exc:
        return _unreachable(request, exc)


@require_GET
def oidc_callback(request: HttpRequest) -> HttpResponse:
    """The provider's answer: the person is signed in once the ID token and Tollgate's own rules let them."""
    if not provider.configured():
        return redirect("login")
    invitation_secret = request.session.pop(SINGLE_SIGN_ON_SESSION_KEY, "")
    try:
        claims, id_token = provider.id_token_claims(request)
        signed_in = person_sign_in(person=provider_person(claims), invitation_secret=invitation_secret)
    except provider.ProviderUnreachable as exc:
        return _unreachable(request, exc)
    except provider.SignInNotVerified as exc:
        logger.warning("single sign-on refused: %s", exc)
        return _refused(
            request,
            "The provider's answer did not pass Tollgate's checks, or this sign-in was already used or has "
            "expired. Start again from the sign-in page.",
        )
    except SignInRefused as exc:
        return _refused(request, str(exc))
    next_url = request.session.pop(NEXT_SESSION_KEY, "")
    login(request, signed_in.user, backend=BACKEND)
    request.session[provider.ID_TOKEN_SESSION_KEY] = id_token
    if signed_in.accepted is not None:
        request.session.pop(LINK_SESSION_KEY, None)
        accepted = signed_in.accepted
        messages.success(request, f"You are now {accepted.get_role_display()} of {accepted.org.name}.")
    elif signed_in.invitation_dead:
        messages.warning(request, "The invitation's link no longer works: you are signed in, with no new role.")
    return redirect(next_url or settings.LOGIN_REDIRECT_URL)


def _refused(request: HttpRequest, reason: str) -> HttpResponse:
    context = {"reason": reason, "provider_name": provider.provider_name()}
    return render(request, "reviewer/oidc/refused.html", context, status=403)


def _unreachable(request: HttpRequest, exc: Exception) -> HttpResponse:
    logger.warning("single sign-on: the provider at %s cannot be used: %s", settings.OIDC_ISSUER, exc)
    reason = "The sign-in provider could not be reached, or did not answer as expected. Try again in a moment."
    context = {"reason": reason, "provider_name": provider.provider_name()}
    return render(request, "reviewer/oidc/refused.html", context, status=502)

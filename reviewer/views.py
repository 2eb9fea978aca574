"""The shell: signing in, and the start page that sends each person where their role works."""

from django import forms
from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_GET

from reviewer.access import roles_of
from reviewer.models import Role
from reviewer.oidc import provider
from reviewer.signins import sign_in_record


class PasswordSignInForm(AuthenticationForm):
    """Django's sign-in form, which says so when passwords are turned off for everyone or for the domain of the
    address typed as the username (reviewer/oidc/backends.py refuses them whatever is typed)."""

    def clean(self):
        username = (self.cleaned_data.get("username") or "").strip()
        domain = username.rpartition("@")[2].lower() if "@" in username else ""
        if not settings.LOCAL_PASSWORDS or domain in settings.LOCAL_PASSWORDS_OFF_FOR_DOMAINS:
            raise forms.ValidationError(
                f"Passwords are turned off here: sign in with {provider.provider_name()}.", code="passwords_off"
            )
        return super().clean()


class LoginView(auth_views.LoginView):
    template_name = "reviewer/login.html"
    form_class = PasswordSignInForm
    redirect_authenticated_user = True

    def form_valid(self, form):
        response = super().form_valid(form)
        sign_in_record(person=form.get_user(), via="password")
        return response

    def get_context_data(self, **kwargs) -> dict:
        return super().get_context_data(**kwargs) | {
            "single_sign_on": provider.provider_name() if provider.configured() else "",
            "passwords": settings.LOCAL_PASSWORDS,
            "passwords_off_for": settings.LOCAL_PASSWORDS_OFF_FOR_DOMAINS,
        }


class LogoutView(auth_views.LogoutView):
    """Signing out. Someone the OpenID provider signed in goes on to the provider's end-session page, which signs
    them out there too and sends them back to the sign-in page (RP-initiated logout)."""

    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        id_token = request.session.get(provider.ID_TOKEN_SESSION_KEY)
        response = super().post(request, *args, **kwargs)
        if id_token and provider.configured():
            end_session = provider.end_session_url(id_token, request.build_absolute_uri(reverse("login")))
            if end_session:
                return redirect(end_session)
        return response


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    if not request.user.is_authenticated:
        return redirect("login")
    if roles_of(request.user) & {Role.OPERATOR, Role.LEAD}:  # the queue's roles
        return redirect("queue")
    return redirect("dashboard")

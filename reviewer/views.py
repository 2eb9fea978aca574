"""The shell: signing in, and the start page that sends each person where their role works."""

from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET

from grading.audit import audit_record
from reviewer.access import roles_of
from reviewer.models import Role


class LoginView(auth_views.LoginView):
    template_name = "reviewer/login.html"
    redirect_authenticated_user = True

    def form_valid(self, form):
        response = super().form_valid(form)
        audit_record(action="user.login", actor=form.get_user())
        return response


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    if not request.user.is_authenticated:
        return redirect("login")
    if roles_of(request.user) & {Role.OPERATOR, Role.LEAD}:  # the queue's roles
        return redirect("queue")
    return redirect("dashboard")

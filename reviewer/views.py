from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from grading.services import audit_record
from reviewer.access import EVERY_ROLE, orgs_for, role_required, roles_of
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
    if Role.OPERATOR in roles_of(request.user):
        return redirect("queue")
    return redirect("dashboard")


@require_GET
@role_required(Role.OPERATOR)
def queue(request: HttpRequest) -> HttpResponse:
    orgs = orgs_for(request.user, Role.OPERATOR)
    return render(request, "reviewer/queue.html", {"orgs": orgs, "nav_active": "queue"})


@require_GET
@role_required(Role.CRITERIA_ADMIN)
def criteria(request: HttpRequest) -> HttpResponse:
    orgs = orgs_for(request.user, Role.CRITERIA_ADMIN)
    return render(request, "reviewer/criteria.html", {"orgs": orgs, "nav_active": "criteria"})


@require_GET
@role_required(*EVERY_ROLE)
def dashboard(request: HttpRequest) -> HttpResponse:
    orgs = orgs_for(request.user, *EVERY_ROLE)
    return render(request, "reviewer/dashboard.html", {"orgs": orgs, "nav_active": "dashboard"})

"""The criteria admins' pages: versions per kind, editing, diff, preview, trial and publishing."""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from reviewer.access import orgs_for, role_required
from reviewer.models import Role


@require_GET
@role_required(Role.CRITERIA_ADMIN)
def criteria(request: HttpRequest) -> HttpResponse:
    orgs = orgs_for(request.user, Role.CRITERIA_ADMIN)
    return render(request, "reviewer/criteria/index.html", {"orgs": orgs, "nav_active": "criteria"})

"""The regression sets page (/criteria/sets/): each of the admin's orgs' sets, with their counts and last run.

Read-only: sets are built and run over the API (grading/api/sets.py) and the CLI. The page shows counts and figures,
never an item's expected answers, so nothing on it can tell a reader what people or labellers said of an item still
waiting for them (blind review).
"""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from grading.models import Org, RegressionSet
from grading.sets.runs import run_json
from reviewer.access import role_required
from reviewer.criteria import reads
from reviewer.models import Role


@require_GET
@role_required(Role.CRITERIA_ADMIN)
def criteria_sets(request: HttpRequest) -> HttpResponse:
    orgs = []
    for org in Org.objects.filter(pk__in=reads.admin_org_ids(request.user)).order_by("slug"):
        rows = []
        for regression_set in RegressionSet.objects.filter(org=org).order_by("name"):
            last = regression_set.runs.select_related("criteria_version", "regression_set").order_by("-started_at")
            run = last.first()
            rows.append((regression_set, regression_set.items.count(), run_json(run) if run else None))
        orgs.append((org, rows))
    return render(request, "reviewer/criteria/sets.html", {"orgs": orgs, "nav_active": "criteria"})

"""The stakeholders' dashboards: quality with its unknowns, the gate's outcomes, the staleness audit."""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from grading.health import evaluation_export_status
from grading.models import GradingRun
from grading.selectors import conversation_quality, judge_errors, staleness_audit
from reviewer.access import EVERY_ROLE, orgs_for, role_required


@require_GET
@role_required(*EVERY_ROLE)
def dashboard(request: HttpRequest) -> HttpResponse:
    """The conversation quality number per application and week, with unknowns beside it and thumbs apart,
    the staleness audit (reads 0 after a pass) and the items the judge failed, by reason."""
    panels = [
        {
            "org": org,
            "quality": conversation_quality(org),
            "audit": staleness_audit(org),
            "judge_errors": judge_errors(org),
            "evaluation_exports": evaluation_export_status(org.pk),
            "last_pass": GradingRun.objects.order_by("-started_at").first(),
        }
        for org in orgs_for(request.user, *EVERY_ROLE)
    ]
    return render(request, "reviewer/dashboards/index.html", {"panels": panels, "nav_active": "dashboard"})

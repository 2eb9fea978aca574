"""The criteria admin sets a version's certification target; the version page shows its certificate."""

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from grading.certify.services import certify_target_set
from reviewer.access import found, role_required
from reviewer.criteria import reads
from reviewer.criteria.forms import CertifyTargetForm
from reviewer.models import Role


@require_POST
@role_required(Role.CRITERIA_ADMIN)
def criteria_certify_target(request: HttpRequest, pk: int) -> HttpResponse:
    version = found(
        reads.version_for_admin(org_ids=reads.admin_org_ids(request.user), version_id=pk), "criteria version"
    )
    form = CertifyTargetForm(request.POST)
    if not form.is_valid():
        for error in form.errors.values():
            messages.error(request, " ".join(error))
        return redirect(reverse("criteria_version", args=[version.pk]) + "#certificate")
    agreement, confidence = form.target()
    certify_target_set(version=version, actor=request.user, agreement=agreement, confidence=confidence)
    if agreement is None:
        messages.success(request, f"{version} routes by the fixed bands again.")
    else:
        messages.success(
            request,
            f"{version} now lets the machine decide alone only where people's verdicts certify {agreement:.0%} "
            f"agreement with {confidence:.0%} confidence; the certificate is being computed.",
        )
    return redirect(reverse("criteria_version", args=[version.pk]) + "#certificate")

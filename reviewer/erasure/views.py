"""The erasure page (/erasure/): GET lists the admin's orgs' erasures (scope, target, who asked, when, state and
counts: content-free tombstones) beside the form that asks for one; a POST shows what the erasure would take (its
rows counted by a dry run of the erasure itself) and asks to confirm it; the POST that confirms asks for it
(grading/erasure/runs.py `erasure_request`, audited) and a worker erases in batches.

Only org admins; an org the person does not administer is a 404, an item the org does not have is a 400 naming it,
and nothing is asked until the confirming POST.
"""

from django import forms
from django.apps import apps
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from grading.core.schemas import identifier_checked
from grading.erasure.runs import ItemNotFound, erasure_counts, erasure_preview, erasure_request
from grading.models import Erasure, ErasureScope, Org
from reviewer.access import role_required
from reviewer.models import Role
from reviewer.orgadmin import reads
from reviewer.orgadmin.views import NAV
from reviewer.pages import org_form_page

SHOWN = 100  # the newest erasures listed
ASKED_SCOPES = [(scope.value, scope.label) for scope in (ErasureScope.CONVERSATION, ErasureScope.DRAFT,
                                                         ErasureScope.END_USER)]  # fmt: skip
# The rows an erasure counts by model (grading/erasure/items.py), named as this page's reader says them where the
# model's own name is not what they would say.
ROW_WORDS = {
    "memoryitem": ("org learning", "org learnings"),
    "criteriaexample": ("worked example", "worked examples"),
    "feedback": ("thumb", "thumbs"),
    "claim": ("queue claim", "queue claims"),
    "notice": ("escalation notice", "escalation notices"),
    "pendingcall": ("waiting model call", "waiting model calls"),
    "learning_quote": ("learning quoted in another review", "learnings quoted in other reviews"),
}


def rows_in_words(counts: dict[str, int]) -> list[tuple[int, str]]:
    """Each kind of row an erasure takes or took, with its count, in words: "5 messages", "1 org learning"."""
    return [(n, _row_words(name)[0 if n == 1 else 1]) for name, n in sorted(counts.items())]


def _row_words(name: str) -> tuple[str, str]:
    if name in ROW_WORDS:
        return ROW_WORDS[name]
    for model in apps.get_models():
        if model._meta.model_name == name:
            return str(model._meta.verbose_name), str(model._meta.verbose_name_plural)
    return name, name


class ErasureForm(forms.Form):
    org = forms.IntegerField(widget=forms.HiddenInput)
    scope = forms.ChoiceField(choices=ASKED_SCOPES)
    target = forms.CharField(max_length=200, label="external id or end user id", strip=True)
    confirmed = forms.BooleanField(required=False, widget=forms.HiddenInput)

    def clean_target(self) -> str:
        try:  # as the API checks an id
            return identifier_checked(self.cleaned_data["target"])
        except ValueError as refused:
            raise forms.ValidationError(f"An id has no control characters: this one {refused}.") from refused


@require_http_methods(["GET", "POST"])
@role_required(Role.ORG_ADMIN)
def erasure(request: HttpRequest) -> HttpResponse:
    return org_form_page(request, reads.admin_org_ids(request.user), ErasureForm, _render, _erasure_ask)


def _erasure_ask(request: HttpRequest, org_ids: list[int], form: ErasureForm, org: Org) -> HttpResponse:
    scope, target = form.cleaned_data["scope"], form.cleaned_data["target"]
    try:
        erases = erasure_preview(org=org, scope=scope, target=target)
    except ItemNotFound:
        form.add_error("target", f"{org.name} has no {ErasureScope(scope).label.removeprefix('one ')} {target!r}.")
        return _render(request, org_ids, form=form, status=400)
    if not form.cleaned_data["confirmed"]:
        confirm = {"org": org, "scope": scope, "scope_label": ErasureScope(scope).label, "target": target,
                   "erases": erases, "rows": rows_in_words(erases)}  # fmt: skip
        return _render(request, org_ids, confirm=confirm)
    asked = erasure_request(org=org, scope=scope, target=target, requested_by=request.user)
    messages.success(request, f"Erasure {asked.pk} is asked for; a worker erases it in batches.")
    return redirect("erasure")


def _render(
    request: HttpRequest, org_ids: list[int], *, form: ErasureForm | None = None, confirm: dict | None = None,
    status: int = 200,
) -> HttpResponse:  # fmt: skip
    orgs = reads.admin_orgs(org_ids)
    erasures = (
        Erasure.objects.filter(org__in=orgs)
        .select_related("org", "requested_by", "api_key")
        .order_by("-requested_at", "-pk")[:SHOWN]
    )
    rows = [{"erasure": e, "counts": rows_in_words(erasure_counts(e))} for e in erasures]
    context = {"orgs": orgs, "form": form, "confirm": confirm, "rows": rows, "scopes": ASKED_SCOPES,
               **NAV}  # fmt: skip
    return render(request, "reviewer/erasure/index.html", context, status=status)

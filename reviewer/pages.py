"""What the people-side pages share besides who may see them (reviewer/access.py): the round trip of a page whose
form changes one of the person's orgs, a service's refusal shown at the form's field, and the plain answer to a form
no page of ours sends wrong."""

from collections.abc import Callable
from typing import Any

from django import forms
from django.http import HttpRequest, HttpResponse

from grading.models import Org
from reviewer.access import org_named

# The page of the person's orgs, `(request, org_ids, *, form=None, status=200)`: a form that did not pass is shown on
# it, with its errors.
OrgPage = Callable[..., HttpResponse]
# The change a valid form asks of one of the orgs: `(request, org_ids, form, org)`, answering with the next page.
OrgChange = Callable[[HttpRequest, list[int], Any, Org], HttpResponse]


def org_form_page(
    request: HttpRequest, org_ids: list[int], form_class: type[forms.Form], page: OrgPage, change: OrgChange
) -> HttpResponse:
    """A page whose form changes one of the person's orgs (the form's `org` field): GET shows it; a POST whose form
    does not pass shows it again with the errors, as a 400 that changes nothing; a valid one makes the change."""
    if request.method == "GET":
        return page(request, org_ids)
    form = form_class(request.POST)
    if not form.is_valid():
        return page(request, org_ids, form=form, status=400)
    return change(request, org_ids, form, org_named(org_ids, form.cleaned_data["org"]))


def refused_at(form: forms.Form, field: str | None, message: str) -> None:
    """A service's refusal on the field it names (`field`, in the form's words), or on the form as a whole when the
    form has no such field; the page shows it at the top too."""
    form.add_error(field if field in form.fields else None, message)


def bad_request(form: forms.Form) -> HttpResponse:
    """The answer to a form whose fields the page's own controls fill (ids, choices), so that only a hand-made
    request gets them wrong: a plain 400 naming the fields, with nothing changed."""
    return HttpResponse(f"Bad request: {form.errors.as_text()}", status=400, content_type="text/plain")

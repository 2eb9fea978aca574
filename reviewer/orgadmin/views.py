"""The org admins' pages (/org/): members and their roles, API keys, the webhook signing secret, retention; and the
public page where a person new to Tollgate sets a password through the one-time link an admin was shown.

Every page lists the admin's orgs (a person may administer several), and every change names its org, checked
against them: another org's membership, key or org id is a 404, and a signed-in person without the org-admin role
gets a 403 (`role_required`). A bad form or a refused change is a 400 (or 409) that names what to correct and
changes nothing. Secrets (a new key, a new webhook secret, a set-password link) are in the answer to the POST
that made them and nowhere else: never in a message kept for the next page, never in the audit trail.
"""

from datetime import timedelta

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse_lazy
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from grading.api.keys import IssuedApiKey, api_key_create, api_key_revoke
from grading.audit import audit_record
from grading.hooks.signing import previous_secret_signs, webhook_secret_rotate
from grading.models import Org
from reviewer.access import role_required
from reviewer.dashboards.display import duration
from reviewer.models import Membership, Role
from reviewer.oidc.backends import passwords_allowed
from reviewer.orgadmin import reads
from reviewer.orgadmin.forms import ApiKeyForm, MemberAddForm, ReachForm, RetentionForm, SecretRotateForm
from reviewer.orgadmin.members import (
    MembershipRefused,
    membership_grant,
    membership_revoke,
    membership_scope,
    password_link,
    password_link_allowed,
    person_create,
    person_find,
)
from reviewer.orgadmin.retention import retention_policies, retention_set

TABS = [
    ("orgadmin_members", "Members"),
    ("orgadmin_keys", "API keys"),
    ("orgadmin_webhook", "Webhook secret"),
    ("orgadmin_retention", "Retention"),
    ("erasure", "Erasure"),
]
NAV = {"nav_active": "orgadmin_members", "tabs": TABS}


def _org_for_admin(org_ids: list[int], org_id: int) -> Org:
    org = Org.objects.filter(pk=org_id, pk__in=org_ids).first()
    if org is None:
        raise Http404("No such org.")
    return org


def _get_membership_for_admin(request: HttpRequest, pk: int) -> Membership:
    membership = reads.membership_for_admin(org_ids=reads.admin_org_ids(request.user), membership_id=pk)
    if membership is None:
        raise Http404("No such membership.")
    return membership


# --- members ------------------------------------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@role_required(Role.ORG_ADMIN)
def orgadmin_members(request: HttpRequest) -> HttpResponse:
    """GET lists each org's people and roles; POST gives a person a role (making their account if asked)."""
    org_ids = reads.admin_org_ids(request.user)
    if request.method == "GET":
        return _render_members(request, org_ids)
    form = MemberAddForm(request.POST)
    if not form.is_valid():
        return _render_members(request, org_ids, form=form, status=400)
    org = _org_for_admin(org_ids, form.cleaned_data["org"])
    identifier = form.cleaned_data["person"]
    try:
        with transaction.atomic():  # a new account stays only if its role is granted
            person = person_find(identifier)
            created = person is None
            if created and not form.cleaned_data["new_account"]:
                raise MembershipRefused(
                    f"Nobody is called {identifier}. Check the spelling, or tick “make a new account”.", "person"
                )
            if created:
                person = person_create(identifier=identifier, org=org, actor=request.user)
            role = Role(form.cleaned_data["role"])
            membership_grant(org=org, user=person, role=role, actor=request.user, **form.reach_setting())
    except MembershipRefused as refused:
        form.add_error(refused.field if refused.field in form.fields else None, str(refused))
        return _render_members(request, org_ids, form=form, status=400)
    done = f"{person.get_username()} is now {role.label} of {org.name}."
    if created and password_link_allowed(person, org_ids=org_ids):
        return _render_password_link(request, org_ids, person, done=done)
    if created:
        done += " They sign in with single sign-on: passwords are turned off for them."
    messages.success(request, done)
    return redirect("orgadmin_members")


@require_POST
@role_required(Role.ORG_ADMIN)
def orgadmin_member_password_link(request: HttpRequest, pk: int) -> HttpResponse:
    """A new set-password link for a person whose first one was lost: only for an account nobody has used yet."""
    membership = _get_membership_for_admin(request, pk)
    org_ids = reads.admin_org_ids(request.user)
    person = membership.user
    if not password_link_allowed(person, org_ids=org_ids):
        refusal = (
            f"{person.get_username()} has a password, has signed in, or has a role in another org: only they (or "
            "whoever runs the servers) can change their password."
        )
        return _render_members(request, org_ids, refusal=refusal, status=409)
    audit_record(
        action="person.password_link",
        org=membership.org,
        actor=request.user,
        target=person,
        detail={"user": person.get_username()},
    )
    return _render_password_link(request, org_ids, person, done="")


def _render_password_link(
    request: HttpRequest, org_ids: list[int], person: AbstractBaseUser, *, done: str
) -> HttpResponse:
    """The members page with a set-password link, in this answer only: the link lets whoever holds it set the
    account's password."""
    link = request.build_absolute_uri(password_link(person))
    valid_for = duration(settings.PASSWORD_RESET_TIMEOUT)
    return _render_members(request, org_ids, done=done, new_person=person, password_link=link, valid_for=valid_for)


@require_POST
@role_required(Role.ORG_ADMIN)
def orgadmin_member_scope(request: HttpRequest, pk: int) -> HttpResponse:
    """Change what one membership covers: the whole org, or some applications and perhaps the drafts."""
    membership = _get_membership_for_admin(request, pk)
    org_ids = reads.admin_org_ids(request.user)
    form = ReachForm(request.POST)
    if not form.is_valid():
        return _render_members(request, org_ids, form=form, status=400)
    try:
        membership, changed = membership_scope(membership=membership, actor=request.user, **form.reach_setting())
    except MembershipRefused as refused:
        form.add_error(refused.field if refused.field in form.fields else None, str(refused))
        return _render_members(request, org_ids, form=form, status=400)
    named = f"{membership.user.get_username()} as {membership.get_role_display()}"
    messages.success(request, f"{named} now covers {_covers(membership)}." if changed else f"{named}: no change.")
    return redirect("orgadmin_members")


@require_POST
@role_required(Role.ORG_ADMIN)
def orgadmin_member_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    membership = _get_membership_for_admin(request, pk)
    try:
        membership_revoke(membership=membership, actor=request.user)
    except MembershipRefused as refused:
        return _render_members(request, reads.admin_org_ids(request.user), refusal=str(refused), status=409)
    messages.success(request, f"{membership.user.get_username()} is no longer {membership.get_role_display()}.")
    return redirect("orgadmin_members")


def _render_members(
    request: HttpRequest,
    org_ids: list[int],
    *,
    form: forms.Form | None = None,
    refusal: str = "",
    status: int = 200,
    **shown_once,
) -> HttpResponse:
    orgs = [(org, reads.members_of(org)) for org in reads.admin_orgs(org_ids)]
    people = {member.person for _, members in orgs for member in members}
    linkable = {person.pk for person in people if password_link_allowed(person, org_ids=org_ids)}
    context = {
        "orgs": orgs, "form": form, "refusal": refusal, "roles": Role.choices, "linkable": linkable,
        **shown_once, **NAV,
    }  # fmt: skip
    return render(request, "reviewer/orgadmin/members.html", context, status=status)


def _covers(membership: Membership) -> str:
    if membership.applications is None:
        return "the whole org"
    named = ", ".join(membership.applications) or "no application"
    return f"{named}{' and drafts' if membership.drafts else ''}"


class PasswordSetView(auth_views.PasswordResetConfirmView):
    """The one-time page an org admin's link opens: Django's own, which checks the token, moves it out of the URL
    (into the session) before showing the form, and refuses it once the password is set."""

    template_name = "reviewer/orgadmin/password_set.html"
    success_url = reverse_lazy("login")

    def get_user(self, uidb64: str) -> AbstractBaseUser | None:
        """Nobody, for a person whose passwords are turned off since the link was made: the link does not work."""
        user = super().get_user(uidb64)
        return user if user is not None and passwords_allowed(user) else None


# --- API keys -----------------------------------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@role_required(Role.ORG_ADMIN)
def orgadmin_keys(request: HttpRequest) -> HttpResponse:
    """GET lists each org's keys; POST makes one and shows it, in this answer only."""
    org_ids = reads.admin_org_ids(request.user)
    if request.method == "GET":
        return _render_keys(request, org_ids)
    form = ApiKeyForm(request.POST)
    if not form.is_valid():
        return _render_keys(request, org_ids, form=form, status=400)
    org = _org_for_admin(org_ids, form.cleaned_data["org"])
    with transaction.atomic():
        issued = api_key_create(org=org, name=form.cleaned_data["name"], created_by=request.user)
    return _render_keys(request, org_ids, issued=issued)


@require_POST
@role_required(Role.ORG_ADMIN)
def orgadmin_key_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    api_key = reads.api_key_for_admin(org_ids=reads.admin_org_ids(request.user), api_key_id=pk)
    if api_key is None:
        raise Http404("No such API key.")
    with transaction.atomic():
        api_key_revoke(api_key=api_key, actor=request.user)
    messages.success(request, f"The key {api_key.name} ({api_key.prefix}…) is revoked: the API refuses it from now on.")
    return redirect("orgadmin_keys")


def _render_keys(
    request: HttpRequest,
    org_ids: list[int],
    *,
    form: ApiKeyForm | None = None,
    status: int = 200,
    issued: IssuedApiKey | None = None,
) -> HttpResponse:
    orgs = [(org, reads.api_keys_of(org)) for org in reads.admin_orgs(org_ids)]
    context = {"orgs": orgs, "form": form, "issued": issued, **NAV}
    return render(request, "reviewer/orgadmin/keys.html", context, status=status)


# --- the webhook signing secret -----------------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@role_required(Role.ORG_ADMIN)
def orgadmin_webhook(request: HttpRequest) -> HttpResponse:
    """GET says which secrets sign now; POST rotates one org's secret and shows the new one, in this answer only."""
    org_ids = reads.admin_org_ids(request.user)
    if request.method == "GET":
        return _render_webhook(request, org_ids)
    form = SecretRotateForm(request.POST)
    if not form.is_valid():
        return _render_webhook(request, org_ids, form=form, status=400)
    org = _org_for_admin(org_ids, form.cleaned_data["org"])
    overlap = timedelta(hours=form.cleaned_data["overlap_hours"])  # within OVERLAP_MAX: the form's bounds are its
    rotated = webhook_secret_rotate(org=org, overlap=overlap, actor=request.user)
    return _render_webhook(request, org_ids, rotated=rotated, rotated_org=org)


def _render_webhook(
    request: HttpRequest, org_ids: list[int], *, form: SecretRotateForm | None = None, status: int = 200, **shown_once
) -> HttpResponse:
    now = timezone.now()
    orgs = [(org, previous_secret_signs(org, now), reads.last_rotation(org)) for org in reads.admin_orgs(org_ids)]
    context = {"orgs": orgs, "form": form, "default_form": SecretRotateForm(), **shown_once, **NAV}
    return render(request, "reviewer/orgadmin/webhook.html", context, status=status)


# --- retention ----------------------------------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@role_required(Role.ORG_ADMIN)
def orgadmin_retention(request: HttpRequest) -> HttpResponse:
    """GET shows each org's retention per kind; POST sets one (days, or empty for forever)."""
    org_ids = reads.admin_org_ids(request.user)
    if request.method == "GET":
        return _render_retention(request, org_ids)
    form = RetentionForm(request.POST)
    if not form.is_valid():
        return _render_retention(request, org_ids, form=form, status=400)
    org = _org_for_admin(org_ids, form.cleaned_data["org"])
    kind, days = form.cleaned_data["kind"], form.cleaned_data["days"]
    changed = retention_set(org=org, kind=kind, days=days, actor=request.user)
    kept = "forever" if days is None else f"{days} days"
    messages.success(request, f"{org.name} keeps {kind}s {kept}." if changed else "No change.")
    return redirect("orgadmin_retention")


def _render_retention(
    request: HttpRequest, org_ids: list[int], *, form: RetentionForm | None = None, status: int = 200
) -> HttpResponse:
    orgs = [(org, retention_policies(org)) for org in reads.admin_orgs(org_ids)]
    return render(request, "reviewer/orgadmin/retention.html", {"orgs": orgs, "form": form, **NAV}, status=status)

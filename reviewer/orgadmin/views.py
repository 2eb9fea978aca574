"""The org admins' pages (/org/): members, their roles and invitations, API keys, the webhook signing secret,
retention; and the public pages where an invitee accepts an invitation, and where a person whose account nobody has
used yet sets a password through the one-time link an admin was shown.

Every page lists the admin's orgs (a person may administer several), and every change names its org, checked
against them: another org's membership, invitation, key or org id is a 404, and a signed-in person without the
org-admin role gets a 403 (`role_required`). A bad form or a refused change is a 400 (or 409) that names what to
correct and changes nothing. An admin finds only their org's members; anyone else is invited by address, with the
same answer whether or not the address has an account. Secrets (a new key, a new webhook secret, a set-password
link) are in the answer to the POST that made them and nowhere else: never in a message kept for the next page,
never in the audit trail; an invitation's link goes to the invited address only.
"""

from collections.abc import Callable
from datetime import timedelta
from functools import partial

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model, login
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import SetPasswordForm
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse_lazy
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from grading.api.keys import IssuedApiKey, api_key_create, api_key_revoke
from grading.core.schemas import DIMENSIONS_MAX
from grading.dashboard.dimensions import org_dimensions_set
from grading.delivery.signing import previous_secret_signs, webhook_secret_rotate
from grading.models import ApiKey, Org
from grading.models.audit import audit_record
from reviewer.access import found, role_required
from reviewer.dashboards.display import duration
from reviewer.models import Invitation, Membership, PersonalToken, Role
from reviewer.oidc import provider
from reviewer.oidc.backends import passwords_allowed
from reviewer.orgadmin import reads
from reviewer.orgadmin.forms import (
    ApiKeyForm,
    DimensionsForm,
    MemberAddForm,
    ReachForm,
    RetentionForm,
    SecretRotateForm,
)
from reviewer.orgadmin.invitations import (
    LINK_SESSION_KEY,
    InvitationNotSent,
    InvitationRefused,
    account_for_address,
    invitation_accept_with_password,
    invitation_by_link,
    invitation_cancel,
    invitation_create,
    invitation_send,
    link_valid_for,
)
from reviewer.orgadmin.members import (
    MembershipRefused,
    applications_checked,
    membership_grant,
    membership_revoke,
    membership_scope,
    password_link,
    password_link_allowed,
    password_link_tokens,
    person_find,
)
from reviewer.orgadmin.retention import retention_policies, retention_set
from reviewer.pages import org_form_page, refused_at
from reviewer.queue.reads import applications_known
from reviewer.tokens.services import token_revoke

TABS = [
    ("orgadmin_members", "Members"),
    ("orgadmin_keys", "API keys"),
    ("orgadmin_tokens", "Personal tokens"),
    ("orgadmin_webhook", "Webhook secret"),
    ("orgadmin_retention", "Retention"),
    ("orgadmin_dimensions", "Dimensions"),
    ("erasure", "Erasure"),
    ("setup_targets", "Queue set-up"),
]
NAV = {"nav_active": "orgadmin_members", "tabs": TABS}


def _get_membership_for_admin(request: HttpRequest, pk: int) -> Membership:
    return found(reads.membership_for_admin(org_ids=reads.admin_org_ids(request.user), membership_id=pk), "membership")


# --- members ------------------------------------------------------------------------------------------------------


def _get_invitation_for_admin(request: HttpRequest, pk: int) -> Invitation:
    return found(reads.invitation_for_admin(org_ids=reads.admin_org_ids(request.user), invitation_id=pk), "invitation")


@require_http_methods(["GET", "POST"])
@role_required(Role.ORG_ADMIN)
def orgadmin_members(request: HttpRequest) -> HttpResponse:
    """GET lists each org's people, roles and invitations; POST gives a member another role, or invites an address
    that is no member's."""
    org_ids = reads.admin_org_ids(request.user)
    return org_form_page(request, org_ids, MemberAddForm, _render_members, _member_add)


def _member_add(request: HttpRequest, org_ids: list[int], form: MemberAddForm, org: Org) -> HttpResponse:
    identifier, role = form.cleaned_data["person"], Role(form.cleaned_data["role"])
    try:
        applications_checked(org=org, role=role, applications=form.reach_setting()["applications"])
        person = person_find(identifier, org=org)
        if person is not None:
            membership_grant(org=org, user=person, role=role, actor=request.user, **form.reach_setting())
            messages.success(request, f"{person.get_username()} is now {role.label} of {org.name}.")
            return redirect("orgadmin_members")
        _invite(request, org, identifier, role, form.reach_setting())
    except MembershipRefused as refused:
        refused_at(form, refused.field, str(refused))
        return _render_members(request, org_ids, form=form, status=400)
    return redirect("orgadmin_members")


def _invite(request: HttpRequest, org: Org, address: str, role: Role, reach: dict) -> None:
    """Invite `address` (a name that is no member's is refused: someone new is known by their address alone). The
    answer is the same whether or not the address has an account, in this org's knowledge or any other's."""
    try:
        validate_email(address)
    except ValidationError:
        raise MembershipRefused(
            f"No member of {org.name} is called {address}. To add someone new, give their e-mail address: they are "
            "sent an invitation, and get the role once they accept it.",
            "person",
        ) from None
    invitation = invitation_create(org=org, email=address, actor=request.user, role=role, **reach)
    _send(request, invitation)


def _send(request: HttpRequest, invitation: Invitation) -> None:
    try:
        invitation_send(invitation=invitation, actor=request.user)
    except InvitationNotSent as failed:
        messages.warning(
            request,
            f"The invitation to {invitation.email} is kept, but the mail could not be sent ({failed}): send it "
            "again once the mail server answers.",
        )
        return
    messages.success(
        request,
        f"Invitation sent to {invitation.email}: they become {invitation.get_role_display()} of "
        f"{invitation.org.name} once they accept it (its link works for {duration(settings.PASSWORD_RESET_TIMEOUT)}).",
    )


@require_POST
@role_required(Role.ORG_ADMIN)
def orgadmin_invitation_send(request: HttpRequest, pk: int) -> HttpResponse:
    """Mail the invitation again, with a new link (a lost or old one stops working)."""
    return _members_change(request, partial(_send, request, _get_invitation_for_admin(request, pk)))


@require_POST
@role_required(Role.ORG_ADMIN)
def orgadmin_invitation_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    invitation = _get_invitation_for_admin(request, pk)
    done = f"The invitation to {invitation.email} is cancelled: its link no longer works."
    return _members_change(request, partial(invitation_cancel, invitation=invitation, actor=request.user), done=done)


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
    return _render_password_link(request, org_ids, person)


def _render_password_link(request: HttpRequest, org_ids: list[int], person: AbstractBaseUser) -> HttpResponse:
    """The members page with a set-password link, in this answer only: the link lets whoever holds it set the
    account's password."""
    link = request.build_absolute_uri(password_link(person))
    valid_for = duration(settings.PASSWORD_RESET_TIMEOUT)
    return _render_members(request, org_ids, new_person=person, password_link=link, valid_for=valid_for)


@require_POST
@role_required(Role.ORG_ADMIN)
def orgadmin_member_scope(request: HttpRequest, pk: int) -> HttpResponse:
    """Change what one membership covers: the whole org, or some applications and perhaps the drafts."""
    membership = _get_membership_for_admin(request, pk)
    org_ids = reads.admin_org_ids(request.user)
    form = ReachForm(request.POST)
    if not form.is_valid():
        return _render_members(request, org_ids, form=form, scoped=membership.pk, status=400)
    try:
        applications = form.reach_setting()["applications"]
        applications_checked(org=membership.org, role=Role(membership.role), applications=applications)
        membership, changed = membership_scope(membership=membership, actor=request.user, **form.reach_setting())
    except MembershipRefused as refused:
        refused_at(form, refused.field, str(refused))
        return _render_members(request, org_ids, form=form, scoped=membership.pk, status=400)
    named = f"{membership.user.get_username()} as {membership.get_role_display()}"
    messages.success(request, f"{named} now covers {_covers(membership)}." if changed else f"{named}: no change.")
    return redirect("orgadmin_members")


@require_POST
@role_required(Role.ORG_ADMIN)
def orgadmin_member_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    membership = _get_membership_for_admin(request, pk)
    done = f"{membership.user.get_username()} is no longer {membership.get_role_display()}."
    return _members_change(request, partial(membership_revoke, membership=membership, actor=request.user), done=done)


def _members_change(request: HttpRequest, change: Callable[[], object], *, done: str = "") -> HttpResponse:
    """A change made from a row of the members page: back to the page, saying what it did (`done`, or in the
    change's own messages). A refusal (the row changed meanwhile, the org's last org admin) shows the page again
    saying why, as a 409 that changed nothing."""
    try:
        change()
    except MembershipRefused as refused:
        return _render_members(request, reads.admin_org_ids(request.user), refusal=str(refused), status=409)
    if done:
        messages.success(request, done)
    return redirect("orgadmin_members")


def _render_members(
    request: HttpRequest,
    org_ids: list[int],
    *,
    form: forms.Form | None = None,
    scoped: int | None = None,
    refusal: str = "",
    status: int = 200,
    **shown_once,
) -> HttpResponse:
    """The members page; a form that did not pass is shown again where it was filled in, with what was chosen and
    its errors at its fields: the add form on its org's card, a change of reach on its membership's row (`scoped`)."""
    # Each org's applications, for the selects a reach is chosen from.
    orgs = [
        (org, reads.members_of(org), reads.invitations_of(org), applications_known(org))
        for org in reads.admin_orgs(org_ids)
    ]
    people = {member.person for _, members, _, _ in orgs for member in members}
    linkable = {person.pk for person in people if password_link_allowed(person, org_ids=org_ids)}
    typed = {
        "typed_org": form.data.get("org") if isinstance(form, MemberAddForm) else None,
        "scoped": scoped,
        "chosen": form.data.getlist("applications") if form is not None else [],
    }
    context = {
        "orgs": orgs, "form": form, "refusal": refusal, "roles": Role.choices, "linkable": linkable,
        **typed, **shown_once, **NAV,
    }  # fmt: skip
    return render(request, "reviewer/orgadmin/members.html", context, status=status)


def _covers(membership: Membership) -> str:
    if membership.applications is None:
        return "the whole org"
    named = ", ".join(membership.applications) or "no application"
    return f"{named}{' and drafts' if membership.drafts else ''}"


class PasswordSetView(auth_views.PasswordResetConfirmView):
    """The one-time page an org admin's link opens: Django's own, which checks the token, moves it out of the URL
    (into the session) before showing the form, and refuses it once the password is set or the person's
    memberships change (`password_link_tokens`)."""

    template_name = "reviewer/orgadmin/password_set.html"
    success_url = reverse_lazy("login")
    token_generator = password_link_tokens

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
    return org_form_page(request, org_ids, ApiKeyForm, _render_keys, _key_create)


def _key_create(request: HttpRequest, org_ids: list[int], form: ApiKeyForm, org: Org) -> HttpResponse:
    with transaction.atomic():
        issued = api_key_create(org=org, name=form.cleaned_data["name"], created_by=request.user)
    return _render_keys(request, org_ids, issued=issued)


def _get_api_key_for_admin(request: HttpRequest, pk: int) -> ApiKey:
    return found(reads.api_key_for_admin(org_ids=reads.admin_org_ids(request.user), api_key_id=pk), "API key")


@require_POST
@role_required(Role.ORG_ADMIN)
def orgadmin_key_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    api_key = _get_api_key_for_admin(request, pk)
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


# --- personal tokens ----------------------------------------------------------------------------------------------


@require_GET
@role_required(Role.ORG_ADMIN)
def orgadmin_tokens(request: HttpRequest) -> HttpResponse:
    """The personal tokens made in each of the admin's orgs: who, which, made, last used, expiry (never the token)."""
    org_ids = reads.admin_org_ids(request.user)
    tokens = PersonalToken.objects.filter(org_id__in=org_ids).select_related("org", "user", "revoked_by")
    by_org = [(org, [t for t in tokens if t.org_id == org.pk]) for org in reads.admin_orgs(org_ids)]
    context = {"orgs": by_org, "now": timezone.now(), **NAV}
    return render(request, "reviewer/orgadmin/tokens.html", context)


@require_POST
@role_required(Role.ORG_ADMIN)
def orgadmin_token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    tokens = PersonalToken.objects.filter(org_id__in=reads.admin_org_ids(request.user), pk=pk)
    token = found(tokens.select_related("org", "user").first(), "token")
    token_revoke(token=token, actor=request.user)
    messages.success(request, f"{token.user.get_username()}'s token {token.name} is revoked: the API refuses it now.")
    return redirect("orgadmin_tokens")


# --- the webhook signing secret -----------------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@role_required(Role.ORG_ADMIN)
def orgadmin_webhook(request: HttpRequest) -> HttpResponse:
    """GET says which secrets sign now; POST rotates one org's secret and shows the new one, in this answer only."""
    org_ids = reads.admin_org_ids(request.user)
    return org_form_page(request, org_ids, SecretRotateForm, _render_webhook, _secret_rotate)


def _secret_rotate(request: HttpRequest, org_ids: list[int], form: SecretRotateForm, org: Org) -> HttpResponse:
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
    return org_form_page(request, org_ids, RetentionForm, _render_retention, _retention_set)


def _retention_set(request: HttpRequest, org_ids: list[int], form: RetentionForm, org: Org) -> HttpResponse:
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


# --- dimensions: the metadata names the figures are sliced by -----------------------------------------------------


@require_http_methods(["GET", "POST"])
@role_required(Role.ORG_ADMIN)
def orgadmin_dimensions(request: HttpRequest) -> HttpResponse:
    """GET shows each org's dimensions; POST declares one org's (grading/dashboard/dimensions.py), audited."""
    org_ids = reads.admin_org_ids(request.user)
    return org_form_page(request, org_ids, DimensionsForm, _render_dimensions, _dimensions_set)


def _dimensions_set(request: HttpRequest, org_ids: list[int], form: DimensionsForm, org: Org) -> HttpResponse:
    dimensions = form.cleaned_data["dimensions"]
    changed = org_dimensions_set(org=org, dimensions=dimensions, actor=request.user)
    named = ", ".join(dimensions) or "nothing"
    messages.success(request, f"{org.name}'s figures are sliced by {named} from now on." if changed else "No change.")
    return redirect("orgadmin_dimensions")


def _render_dimensions(
    request: HttpRequest, org_ids: list[int], *, form: DimensionsForm | None = None, status: int = 200
) -> HttpResponse:
    context = {"orgs": reads.admin_orgs(org_ids), "form": form, "most": DIMENSIONS_MAX, **NAV}
    return render(request, "reviewer/orgadmin/dimensions.html", context, status=status)


# --- accepting an invitation --------------------------------------------------------------------------------------


@require_GET
def invitation_open(request: HttpRequest, token: str) -> HttpResponse:
    """The link in the mail: its secret goes into the session, and the browser on to the page without it in the URL
    (whatever the secret; the page says whether it works)."""
    request.session[LINK_SESSION_KEY] = token
    return redirect("invitation_accept")


@require_http_methods(["GET", "POST"])
def invitation_accept(request: HttpRequest) -> HttpResponse:
    """What the invitation offers, and the two ways to accept it: single sign-on from here (reviewer/oidc/ accepts
    it on the way back), or a password chosen here, which signs the invitee in."""
    secret = request.session.get(LINK_SESSION_KEY, "")
    invitation = invitation_by_link(secret)
    if invitation is None:  # a page saying so, as Django's set-password page answers a dead link
        return _render_invitation(request, None)
    passwords = passwords_allowed(get_user_model()(email=invitation.email))
    try:
        account = account_for_address(invitation.email)
    except InvitationRefused as refused:
        return _render_invitation(request, invitation, refusal=str(refused), status=409)
    # The form's password validators compare the password with the account's name and address (a new one's too).
    form = SetPasswordForm(account or get_user_model()(username=invitation.email, email=invitation.email))
    if request.method == "GET":
        return _render_invitation(request, invitation, form=form if passwords else None, account=account)
    if not passwords:
        refusal = f"Passwords are turned off for {invitation.email}: accept with single sign-on."
        return _render_invitation(request, invitation, refusal=refusal, status=403)
    form = SetPasswordForm(form.user, request.POST)
    if not form.is_valid():
        return _render_invitation(request, invitation, form=form, account=account, status=400)
    try:
        user = invitation_accept_with_password(secret=secret, password=form.cleaned_data["new_password1"])
    except InvitationRefused as refused:
        return _render_invitation(request, invitation, form=form, account=account, refusal=str(refused), status=409)
    del request.session[LINK_SESSION_KEY]
    login(request, user, backend="reviewer.oidc.backends.LocalPasswordBackend")
    messages.success(
        request,
        f"You are now {invitation.get_role_display()} of {invitation.org.name}. You sign in as "
        f"{user.get_username()}, with the password you chose.",
    )
    return redirect(settings.LOGIN_REDIRECT_URL)


def _render_invitation(
    request: HttpRequest,
    invitation: Invitation | None,
    *,
    form: SetPasswordForm | None = None,
    account: AbstractBaseUser | None = None,
    refusal: str = "",
    status: int = 200,
) -> HttpResponse:
    context = {
        "invitation": invitation, "form": form, "account": account, "refusal": refusal,
        "single_sign_on": provider.provider_name() if provider.configured() else "",
        "valid_for": duration(int(link_valid_for().total_seconds())),
    }  # fmt: skip
    return render(request, "reviewer/orgadmin/invitation.html", context, status=status)

"""Invitations: how someone who is not a member of an org becomes one. An org admin names an e-mail address and a
role; Tollgate mails the address a link; whoever controls the address accepts on the link's page, and only then is
a membership made. Nothing about the invitation tells the admin whether the address has an account, and no admin
ever sees the link.

Accepting is a fresh sign-in, never one with credentials that existed before: either the invitee chooses a new
password there (for the one account with the address, or a new account), so a password or set-password link
another org's admin made or knew of that account stops working at that moment; or they sign in with single sign-on
from the page (reviewer/oidc/), which the provider vouches for. A link accepts its own invitation only: joining one
org never joins another.

Each change is audited in its own transaction: `invitation.create`, `invitation.send` (each link mailed),
`invitation.delete` (cancelled), `invitation.accept` (with the `membership.create` it makes, and the
`person.create` and `person.password_set` of an acceptance with a password).
"""

import contextlib
import secrets
import smtplib
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core.mail import EmailMessage
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils import timezone

from grading.api.keys import secret_hash
from grading.models import Org
from grading.models.audit import audit_record
from reviewer.dashboards.display import duration
from reviewer.models import Invitation, Role
from reviewer.orgadmin.members import (
    MembershipExists,
    MembershipRefused,
    membership_grant,
    person_create,
    reach_checked,
)

# The secret of a link opened in this browser: moved out of the URL before the page shows (as Django's own
# set-password page moves its token), so it never reaches a Referer header or the history of a shared browser.
LINK_SESSION_KEY = "invitation_link"
# The secret of the link whose page started a single sign-on: accepted when the provider sends the person back.
SINGLE_SIGN_ON_SESSION_KEY = "invitation_single_sign_on"


class InvitationRefused(Exception):
    """The acceptance cannot be made; the message says why, to the invitee. Nothing was written."""


class InvitationNotSent(Exception):
    """The mail server refused or did not answer; the invitation is kept, and sending it again makes a new link."""


def link_valid_for() -> timedelta:
    return timedelta(seconds=settings.PASSWORD_RESET_TIMEOUT)


def invitation_create(
    *,
    org: Org,
    email: str,
    role: Role,
    applications: list[str] | None,
    drafts: bool,
    actor: AbstractBaseUser | None = None,
) -> Invitation:
    """Invite `email` to `role` in `org`, covering what a membership would (refused as a membership would be)."""
    reach = reach_checked(role, applications, drafts)
    email = email.strip().lower()
    try:
        with transaction.atomic():
            invitation = Invitation.objects.create(org=org, email=email, role=role, invited_by=actor, **reach)
            _audit("invitation.create", invitation, actor=actor, **reach)
    except IntegrityError as exc:  # the unique (org, email, role)
        raise MembershipRefused(
            f"{email} is already invited as {Role(role).label}: send the invitation again, or cancel it.", "role"
        ) from exc
    return invitation


def invitation_send(*, invitation: Invitation, actor: AbstractBaseUser | None = None) -> None:
    """Mail the address a new link (the one sent before stops working). The mail is sent after the link is stored
    and the transaction is over: a slow mail server holds no row. InvitationNotSent when the server refuses."""
    secret = secrets.token_urlsafe(32)
    with transaction.atomic():
        sent = Invitation.objects.filter(pk=invitation.pk).update(
            link_digest=secret_hash(secret), link_sent_at=timezone.now()
        )
        if not sent:
            raise MembershipRefused("That invitation was accepted or cancelled meanwhile.")
        _audit("invitation.send", invitation, actor=actor)
    try:
        _mail(invitation, secret, inviter=actor).send()
    except (OSError, smtplib.SMTPException) as exc:  # refused, unreachable, or silent past EMAIL_TIMEOUT
        raise InvitationNotSent(str(exc) or type(exc).__name__) from exc


def _mail(invitation: Invitation, secret: str, *, inviter: AbstractBaseUser | None) -> EmailMessage:
    link = settings.TOLLGATE_BASE_URL.rstrip("/") + reverse("invitation_open", kwargs={"token": secret})
    who = f"{inviter.get_username()} invited you" if inviter is not None else "You are invited"
    covers = "the whole org" if invitation.applications is None else _part(invitation)
    lines = [
        f"{who} to {invitation.org.name} on Tollgate, as {invitation.get_role_display()} (covering {covers}).",
        "",
        f"To accept, open this link within {duration(settings.PASSWORD_RESET_TIMEOUT)}:",
        link,
        "",
        "There you sign in with single sign-on, or choose a password. If you did not expect this, ignore this mail:",
        "nothing happens unless you accept.",
    ]
    subject = f"Invitation to {invitation.org.name} on Tollgate"
    return EmailMessage(subject=subject, body="\n".join(lines), to=[invitation.email])


def _part(invitation: Invitation) -> str:
    named = ", ".join(invitation.applications) or "no application"
    return f"{named}{' and the drafts' if invitation.drafts else ''}"


def invitation_cancel(*, invitation: Invitation, actor: AbstractBaseUser | None = None) -> None:
    """Take the invitation back: its link stops working."""
    with transaction.atomic():
        locked = Invitation.objects.select_for_update().select_related("org").filter(pk=invitation.pk).first()
        if locked is None:
            raise MembershipRefused("That invitation was accepted or cancelled meanwhile.")
        _audit("invitation.delete", locked, actor=actor)
        locked.delete()


def invitation_by_link(secret: str) -> Invitation | None:
    """The invitation a link's secret opens: None once it was accepted, cancelled or sent again, and when the link
    is older than PASSWORD_RESET_TIMEOUT."""
    if not secret:
        return None
    fresh_since = timezone.now() - link_valid_for()
    invitations = Invitation.objects.select_related("org", "invited_by")
    return invitations.filter(link_digest=secret_hash(secret), link_sent_at__gt=fresh_since).first()


def invitation_locked(secret: str) -> Invitation | None:
    """`invitation_by_link`, its row locked until the transaction ends: two acceptances of one link make one."""
    found = invitation_by_link(secret)
    if found is None:
        return None
    return Invitation.objects.select_for_update(of=("self",)).select_related("org").filter(pk=found.pk).first()


def invitation_accept(*, invitation: Invitation, user: AbstractBaseUser, via: str) -> None:
    """Make `invitation` (locked by the caller, in its transaction) `user`'s membership, and end it. A role the
    person holds already stays as it is."""
    with contextlib.suppress(MembershipExists):  # held already (granted meanwhile): it stays as it is
        membership_grant(
            org=invitation.org, user=user, role=Role(invitation.role), applications=invitation.applications,
            drafts=invitation.drafts, actor=user, detail={"invitation": invitation.pk, "via": via},
        )  # fmt: skip
    _audit("invitation.accept", invitation, actor=user, user=user.get_username(), via=via)
    invitation.delete()


def account_for_address(email: str) -> AbstractBaseUser | None:
    """The account an acceptance with a password is for: the one with the invitation's address, or None (a new one
    is made). Refused when several accounts have it: which is theirs is for whoever runs the servers to say."""
    accounts = list(get_user_model()._default_manager.filter(email__iexact=email)[:2])
    if len(accounts) > 1:
        raise InvitationRefused(
            f"Several accounts have the address {email}: accept with single sign-on, or ask whoever runs Tollgate."
        )
    return accounts[0] if accounts else None


def invitation_accept_with_password(*, secret: str, password: str) -> AbstractBaseUser:
    """Accept through the link with a password the invitee chose (already validated): it becomes the password of
    the address's account, which is made if there is none. Whatever password or set-password link that account had
    stops working here, and so do its sessions."""
    with transaction.atomic():
        invitation = invitation_locked(secret)
        if invitation is None:
            raise InvitationRefused("This invitation link does not work any more.")
        user = account_for_address(invitation.email)
        if user is not None:
            user = get_user_model()._default_manager.select_for_update().get(pk=user.pk)
            if not user.is_active:
                raise InvitationRefused("Your Tollgate account is turned off.")
            if user.is_staff or user.is_superuser:
                # An invitation never sets the password of an account that opens the Django admin.
                raise InvitationRefused("This account can open the Django admin: accept with single sign-on.")
        else:
            user = person_create(
                name_hint=invitation.email, email=invitation.email, org=invitation.org, detail={"via": "invitation"}
            )
        user.set_password(password)
        user.save(update_fields=["password"])
        audit_record(
            action="person.password_set",
            org=invitation.org,
            actor=user,
            target=user,
            detail={"user": user.get_username(), "via": "invitation"},
        )
        invitation_accept(invitation=invitation, user=user, via="password")
    return user


def _audit(action: str, invitation: Invitation, *, actor: AbstractBaseUser | None, **detail: object) -> None:
    """An event of the invitation's life, naming its address and role, then `detail`."""
    audit_record(
        action=action,
        org=invitation.org,
        actor=actor,
        target=invitation,
        detail={"email": invitation.email, "role": invitation.role} | detail,
    )

"""Who belongs to an org, as its org admins (and `manage.py member`) change it: granting a role, changing what a
membership covers, revoking it; finding an org's members, and the accounts of people new to Tollgate. Someone who is
not yet a member is invited by address (reviewer/orgadmin/invitations.py), never found or granted a role here.

Each change is audited in its own transaction (`membership.create`, `membership.update`, `membership.delete`,
`person.create`, `person.password_link`). A criteria admin's and an org admin's membership covers the whole org (a
database constraint holds it too: refused here first, with a message). The org's last org admin cannot be revoked:
nobody but whoever runs the servers could manage the org again.
"""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.auth.tokens import PasswordResetTokenGenerator
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from grading.models import Org
from grading.models.audit import audit_record
from reviewer.access import people_of
from reviewer.models import Membership, Pool, Role
from reviewer.oidc.backends import passwords_allowed
from reviewer.queue.assignments import QUEUE_ROLES
from reviewer.queue.reads import applications_unknown

WHOLE_ORG_ROLES = (Role.CRITERIA_ADMIN, Role.ORG_ADMIN)
# Read from the model, so a form refuses exactly what the column would.
APPLICATION_NAME_MAX = Membership._meta.get_field("applications").base_field.max_length


class MembershipRefused(Exception):
    """A change that cannot be made; the message says why and `field` names what to correct. Nothing was written."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class MembershipExists(MembershipRefused):
    """The person already holds the role in the org: change what it covers instead."""


def membership_grant(
    *,
    org: Org,
    user: AbstractBaseUser,
    role: Role,
    applications: list[str] | None,
    drafts: bool,
    actor: AbstractBaseUser | None = None,
    detail: dict | None = None,
) -> Membership:
    """Give `user` `role` in `org`, over the whole org (`applications` None) or part of it. `detail`: more for the
    audit event (single sign-on names the group that granted it)."""
    reach = reach_checked(role, applications, drafts)
    try:
        with transaction.atomic():
            membership = Membership.objects.create(user=user, org=org, role=role, **reach)
            audit_record(
                action="membership.create",
                org=org,
                actor=actor,
                target=membership,
                detail=_identity(membership) | reach | (detail or {}),
            )
    except IntegrityError as exc:  # the unique (user, org, role), perhaps granted a moment ago by someone else
        raise MembershipExists(f"{user.get_username()} is already {Role(role).label} here.", "role") from exc
    return membership


def membership_scope(
    *, membership: Membership, applications: list[str] | None, drafts: bool, actor: AbstractBaseUser | None = None
) -> tuple[Membership, bool]:
    """Change what a membership covers; the membership as it is now, and whether anything changed."""
    after = reach_checked(Role(membership.role), applications, drafts)
    with transaction.atomic():
        locked = Membership.objects.select_for_update().select_related("user", "org").filter(pk=membership.pk).first()
        if locked is None:
            raise MembershipRefused("That membership was revoked meanwhile.")
        before = _reach(locked)
        if before == after:
            return locked, False
        locked.applications, locked.drafts = after["applications"], after["drafts"]
        locked.save(update_fields=["applications", "drafts"])
        audit_record(
            action="membership.update",
            org=locked.org,
            actor=actor,
            target=locked,
            detail=_identity(locked) | {"before": before, "after": after},
        )
    return locked, True


def membership_revoke(
    *, membership: Membership, actor: AbstractBaseUser | None = None, detail: dict | None = None
) -> None:
    """Take a role away; refused for the org's last org admin. The person's last queue role takes them out of the
    org's pools too. `detail`: more for the audit event."""
    with transaction.atomic():
        if membership.role == Role.ORG_ADMIN:
            # Every org admin row of the org locked, in one order: two admins revoking each other at once are
            # counted one after the other, and the second is refused.
            admins = list(
                Membership.objects.select_for_update()
                .filter(org_id=membership.org_id, role=Role.ORG_ADMIN)
                .order_by("pk")
                .values_list("pk", flat=True)
            )
            if admins == [membership.pk]:
                raise MembershipRefused(
                    "This is the org's last org admin: make someone else org admin first, or nobody could manage "
                    "the org from the browser again."
                )
        locked = Membership.objects.select_for_update().select_related("user", "org").filter(pk=membership.pk).first()
        if locked is None:
            raise MembershipRefused("That membership was revoked meanwhile.")
        pools = _pools_leave(locked)
        # Recorded first: once deleted, the membership has no pk left to name.
        audit_record(
            action="membership.delete",
            org=locked.org,
            actor=actor,
            target=locked,
            detail=_identity(locked) | _reach(locked) | ({"pools_left": pools} if pools else {}) | (detail or {}),
        )
        locked.delete()


def _pools_leave(membership: Membership) -> list[str]:
    """Take the person out of the org's pools when `membership` is their last queue role there (a pool holds only
    people who can work the queue, as `manage.py assign pool` requires); the names of the pools they left. Tidiness:
    whether an escalation mail reaches someone is decided when it is sent, by their reach then."""
    queue_roles = Membership.objects.filter(user_id=membership.user_id, org_id=membership.org_id, role__in=QUEUE_ROLES)
    if membership.role not in QUEUE_ROLES or queue_roles.exclude(pk=membership.pk).exists():
        return []
    left = Pool.members.through.objects.filter(pool__org_id=membership.org_id, user_id=membership.user_id)
    names = sorted(left.values_list("pool__name", flat=True))
    left.delete()
    return names


def reach_checked(role: Role, applications: list[str] | None, drafts: bool) -> dict:
    """The membership's columns, refused unless the `membership_reach_covers_something` constraint allows them."""
    if applications is None:
        # A whole-org membership keeps drafts True: the column means nothing there, and the default reads right.
        return {"applications": None, "drafts": True}
    if role in WHOLE_ORG_ROLES:
        raise MembershipRefused(
            f"A {Role(role).label} covers the whole org: criteria govern every application of their kind, and keys, "
            "retention and erasure are the org's.",
            "reach",
        )
    if not applications and not drafts:
        raise MembershipRefused("Name an application or include drafts: this membership would cover nothing.", "reach")
    return {"applications": sorted(set(applications)), "drafts": drafts}


def applications_checked(*, org: Org, role: Role, applications: list[str] | None) -> list[str] | None:
    """The applications a person names for a membership's reach (None: the whole org), refused unless the org knows
    each (`applications_known`): what /org/ and `manage.py member` both ask, so a typo is refused alike. Not asked
    of a whole-org role, which `reach_checked` refuses any application with its reason."""
    if not applications or role in WHOLE_ORG_ROLES:
        return applications
    if refusal := applications_unknown(org, applications):
        raise MembershipRefused(refusal, "applications")
    return applications


def _reach(membership: Membership) -> dict:
    return {"applications": membership.applications, "drafts": membership.drafts}


def _identity(membership: Membership) -> dict:
    return {"user": membership.user.get_username(), "role": membership.role}


# --- people ------------------------------------------------------------------------------------------------------


def person_find(identifier: str, *, org: Org) -> AbstractBaseUser | None:
    """The member of `org` named by a username, or else by an e-mail address only one member has. Nobody else is
    found: another org's people are as unknown here as a name nobody has (someone new is invited by address)."""
    members = people_of(org.pk)
    by_name = members.filter(**{get_user_model().USERNAME_FIELD: identifier}).first()
    if by_name is not None or "@" not in identifier:
        return by_name
    by_email = list(members.filter(email__iexact=identifier)[:2])
    if len(by_email) > 1:
        raise MembershipRefused(f"Several members have the address {identifier}: give the username.", "person")
    return by_email[0] if by_email else None


def person_make(*, name_hint: str, email: str) -> AbstractBaseUser:
    """A new account with no password, named `name_hint` (with a number after it when that name is taken), for
    someone who has just proved who they are: by single sign-on (which records it once the person's orgs are known,
    reviewer/oidc/people.py), or by accepting an invitation through its link (`person_create`)."""
    return get_user_model()._default_manager.create_user(username=_free_username(name_hint), email=email, password=None)


def person_create(*, name_hint: str, email: str, org: Org, detail: dict | None = None) -> AbstractBaseUser:
    """`person_make`, recorded as an audit event of `org` (the org whose invitation they accept: they choose the
    password in the same transaction)."""
    user = person_make(name_hint=name_hint, email=email)
    audit_record(action="person.create", org=org, target=user, detail={"user": user.get_username()} | (detail or {}))
    return user


def _free_username(hint: str) -> str:
    people = get_user_model()._default_manager
    base = hint[:140]
    candidate, number = base, 1
    while people.filter(**{get_user_model().USERNAME_FIELD: candidate}).exists():
        number += 1
        candidate = f"{base}-{number}"
    return candidate


class PasswordLinkTokens(PasswordResetTokenGenerator):
    """Django's token (which signs the password hash, the last sign-in and the address, so a used link is dead) with
    the person's memberships signed too: a link stops working as soon as any role of theirs, in any org, is added,
    changed or taken away. So a link one org's admin holds never opens an account once another org has given it a
    role, and an admin's link dies with the membership it was made for."""

    key_salt = "reviewer.orgadmin.members.PasswordLinkTokens"

    def _make_hash_value(self, user: AbstractBaseUser, timestamp: int) -> str:
        memberships = Membership.objects.filter(user=user).order_by("pk")
        held = list(memberships.values_list("pk", "org_id", "role", "applications", "drafts"))
        return f"{super()._make_hash_value(user, timestamp)}{held!r}"


password_link_tokens = PasswordLinkTokens()


def password_link(user: AbstractBaseUser) -> str:
    """The path of a one-time page where `user` sets a password (`password_link_tokens`), which stops working once
    the password is set, when their memberships change, and after PASSWORD_RESET_TIMEOUT."""
    uidb64 = urlsafe_base64_encode(force_bytes(user.pk))
    return reverse("orgadmin_password_set", kwargs={"uidb64": uidb64, "token": password_link_tokens.make_token(user)})


def password_link_allowed(user: AbstractBaseUser, *, org_ids: list[int]) -> bool:
    """Whether an org admin of `org_ids` may be given a set-password link for `user`: only for an account nobody has
    used yet (no password, never signed in) whose every role is in those orgs, and who may sign in with a password
    at all (not when passwords are off for them: they sign in with single sign-on). Any other account is someone's,
    or another org's too, and the link would let the admin take it over. Org admins no longer make accounts (they
    invite): such accounts were made before invitations, or by whoever runs the servers."""
    if user.has_usable_password() or user.last_login is not None or user.is_staff or user.is_superuser:
        return False
    if not passwords_allowed(user):
        return False
    return not Membership.objects.filter(user=user).exclude(org_id__in=org_ids).exists()

"""Who a person the OpenID provider signed in is in Tollgate, and which memberships its groups give them.

A person is found by the provider's issuer and `sub` (SignInIdentity), never by an e-mail address. The first time
they sign in, the identity is made with a new account of its own, when OIDC_CREATE_USERS allows or they come from the
page of an invitation whose link still works; otherwise the sign-in is refused. An existing account is never taken
over by its address: whoever made it (another org's admin, say) may know its password or hold its set-password
link, and its roles were never the signer's to accept. Roles come from the groups claim, or from an invitation the
person accepts: a sign-in that started on an invitation's page accepts that invitation (its link proves the address;
the provider proves the person), and no other sign-in accepts any.
A refused sign-in writes nothing: the whole of a sign-in is one transaction.

OIDC_GROUP_ROLES names the memberships the groups claim governs: on every sign-in, each of those is made when the
claim names a group that grants it (covering the whole org) and removed when it does not; every other membership is
left as it is. Each change is an audit event, as an org admin's are. The sign-in, and the account and identity a
first one makes, are recorded after that, under each org the person then belongs to (reviewer/signins.py).
"""

import logging
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ImproperlyConfigured
from django.db import IntegrityError, transaction
from django.utils import timezone

from grading.models import Org
from reviewer.models import Invitation, Membership, Role, SignInIdentity
from reviewer.orgadmin.invitations import invitation_accept, invitation_locked
from reviewer.orgadmin.members import MembershipRefused, membership_grant, membership_revoke, person_make
from reviewer.signins import person_audit_record, sign_in_record

logger = logging.getLogger(__name__)

VIA = "oidc"  # how these writes name themselves in the audit trail


class SignInRefused(Exception):
    """The provider signed the person in, but Tollgate does not let them in; the message says why, to them."""


@dataclass(frozen=True)
class ProviderPerson:
    """What the provider's ID token says about the person."""

    issuer: str
    subject: str
    email: str  # empty unless the provider says it verified the address
    name_hint: str  # what to call a new account
    groups: frozenset[str]


def group_rules_check() -> None:
    """Stops startup when OIDC_GROUP_ROLES names a role Tollgate does not have (its syntax is checked in settings)."""
    for group, _, role in settings.OIDC_GROUP_ROLES:
        if role not in Role.values:
            raise ImproperlyConfigured(
                f"OIDC_GROUP_ROLES: group {group!r} grants {role!r}, which is not one of: {', '.join(Role.values)}"
            )


def provider_person(claims: dict) -> ProviderPerson:
    """The person an ID token's (already verified) claims describe."""
    groups = claims.get(settings.OIDC_GROUPS_CLAIM, [])
    if isinstance(groups, str):
        groups = [groups]
    if not isinstance(groups, list) or not all(isinstance(group, str) for group in groups):
        raise SignInRefused(f"The provider's {settings.OIDC_GROUPS_CLAIM!r} claim is not a list of group names.")
    verified = claims.get("email_verified") is True
    email = claims.get("email") if verified and isinstance(claims.get("email"), str) else ""
    hints = [email, claims.get("preferred_username"), claims["sub"]]
    return ProviderPerson(
        issuer=claims["iss"],
        subject=claims["sub"],
        email=email,
        name_hint=next(hint for hint in hints if isinstance(hint, str) and hint.strip()).strip(),
        groups=frozenset(groups),
    )


@dataclass(frozen=True)
class SignIn:
    user: AbstractBaseUser
    accepted: Invitation | None  # the invitation this sign-in accepted
    invitation_dead: bool  # it started on an invitation's page, but that link no longer works


def person_sign_in(*, person: ProviderPerson, invitation_secret: str = "") -> SignIn:
    """The account `person` signs in to, with its memberships matched to their groups, and the invitation whose
    page the sign-in started on (`invitation_secret`, its link's) accepted; SignInRefused otherwise."""
    try:
        with transaction.atomic():
            invitation = invitation_locked(invitation_secret)
            identity = (
                SignInIdentity.objects.select_for_update()
                .select_related("user")
                .filter(issuer=person.issuer, subject=person.subject)
                .first()
            )
            first = identity is None
            if first:
                identity = _identity_create(person, invited=invitation is not None)
            user = identity.user
            if not user.is_active:
                raise SignInRefused("Your Tollgate account is turned off.")
            identity.last_sign_in_at = timezone.now()
            identity.save(update_fields=["last_sign_in_at"])
            memberships_match_groups(user=user, groups=person.groups)
            if invitation is not None:
                invitation_accept(invitation=invitation, user=user, via=VIA)
            if first:  # recorded once the groups and the invitation have made the person a member of their orgs
                _identity_audit(identity)
            sign_in_record(person=user, via=VIA)
    except IntegrityError as exc:  # the same person's first sign-in twice at once, or a grant made meanwhile
        raise SignInRefused("Your sign-in crossed another change to your account: please sign in again.") from exc
    return SignIn(user, invitation, invitation_dead=bool(invitation_secret) and invitation is None)


def _identity_create(person: ProviderPerson, *, invited: bool) -> SignInIdentity:
    """A new account for a first sign-in: never one that exists already, whatever its address."""
    if not settings.OIDC_CREATE_USERS and not invited:
        raise SignInRefused(
            "You have no Tollgate account yet, and this Tollgate makes none on a first sign-in: ask an org admin "
            "to add you (they invite your e-mail address), then sign in from the invitation's page."
        )
    user = person_make(name_hint=person.name_hint, email=person.email)
    return SignInIdentity.objects.create(user=user, issuer=person.issuer, subject=person.subject)


def _identity_audit(identity: SignInIdentity) -> None:
    """The account a first sign-in made and its identity, as audit events of the person's orgs."""
    user = identity.user
    person_audit_record(
        person=user, action="person.create", target=user, detail={"user": user.get_username(), "via": VIA}
    )
    person_audit_record(
        person=user,
        action="sign_in_identity.create",
        actor=user,
        target=identity,
        detail={"user": user.get_username(), "issuer": identity.issuer, "subject": identity.subject},
    )


def memberships_match_groups(*, user: AbstractBaseUser, groups: frozenset[str]) -> None:
    """Make the memberships OIDC_GROUP_ROLES governs match `groups`: granted, removed, the rest untouched."""
    rules = settings.OIDC_GROUP_ROLES
    if not rules:
        return
    orgs = {org.slug: org for org in Org.objects.filter(slug__in={slug for _, slug, _ in rules})}
    governed: set[tuple[int, str]] = set()
    granted: dict[tuple[int, str], str] = {}  # (org id, role) -> the group that grants it
    for group, slug, role in rules:
        if slug not in orgs:
            logger.warning("OIDC_GROUP_ROLES names the org %r, which does not exist: %r grants nothing", slug, group)
            continue
        governed.add((orgs[slug].pk, role))
        if group in groups:
            granted.setdefault((orgs[slug].pk, role), group)
    by_id = {org.pk: org for org in orgs.values()}
    held = {
        (membership.org_id, membership.role): membership
        for membership in Membership.objects.select_for_update().filter(user=user, org_id__in=by_id)
    }
    for key, membership in held.items():
        if key in governed and key not in granted:
            try:
                membership_revoke(membership=membership, detail={"via": VIA, "groups": sorted(groups)})
            except MembershipRefused:  # the org's last org admin stays one, as on the members page
                logger.warning(
                    "%s stays org admin of %s: it has no other", user.get_username(), by_id[membership.org_id]
                )
    for (org_id, role), group in granted.items():
        if (org_id, role) not in held:
            membership_grant(
                org=by_id[org_id], user=user, role=role, applications=None, drafts=True,
                detail={"via": VIA, "group": group},
            )  # fmt: skip

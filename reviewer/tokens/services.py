"""Personal access tokens: made by their person in one org of theirs, shown once, stored as a SHA-256 (as an org's
API key is, grading/api/keys.py), revoked by the person or by an admin of the org; both audited with who did it."""

import secrets
from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from grading.api.keys import secret_hash, use_record
from grading.core.errors import FieldRefused
from grading.models import Org
from grading.models.audit import audit_record
from reviewer.models import Membership, PersonalToken

# Distinct from an org key's `tg_`, so logs, people and secret scanners can tell a person's credential at sight.
TOKEN_PREFIX = "tg_pat_"  # noqa: S105 - a prefix, not a secret


class TokenRefused(FieldRefused):
    """A token that cannot be made as asked; `field` names what to correct. Nothing was written."""


@dataclass(frozen=True)
class IssuedToken:
    token: PersonalToken
    plaintext: str  # shown once, never stored


def token_create(*, user: AbstractBaseUser, org: Org, name: str, expires_at: datetime | None = None) -> IssuedToken:
    """A new token of `user` in `org`, which must be one of their orgs (any role: the token has the roles they have
    at each request)."""
    name = name.strip()
    if not name:
        raise TokenRefused("name", "Name the token after what uses it (e.g. ci, my-laptop).")
    if not Membership.objects.filter(user=user, org=org).exists():
        raise TokenRefused("org", "You are not a member of that org.")
    if expires_at is not None and expires_at <= timezone.now():
        raise TokenRefused("expires", "The expiry must be in the future.")
    plaintext = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with transaction.atomic():
        token = PersonalToken.objects.create(
            user=user,
            org=org,
            name=name,
            prefix=plaintext[:12],
            token_hash=secret_hash(plaintext),
            expires_at=expires_at,
        )
        audit_record(
            action="personal_token.create",
            org=org,
            actor=user,
            target=token,
            detail={"name": name, "expires_at": expires_at.isoformat() if expires_at else None},
        )
    return IssuedToken(token=token, plaintext=plaintext)


def token_revoke(*, token: PersonalToken, actor: AbstractBaseUser) -> bool:
    """Revoke the token at once (the person's own act, or an admin's of its org); False when it was revoked already.
    A conditional UPDATE, so two revokes record one event."""
    with transaction.atomic():
        revoked = PersonalToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
            revoked_at=timezone.now(), revoked_by=actor
        )
        if revoked:
            audit_record(
                action="personal_token.revoke",
                org=token.org,
                actor=actor,
                target=token,
                detail={"name": token.name, "person": token.user.get_username()},
            )
    return bool(revoked)


def token_authenticate(plaintext: str, *, now: datetime | None = None) -> PersonalToken | None:
    """The live token matching `plaintext` (not revoked, not expired, its person's account active), with its
    last-used time moved; None otherwise. Found by its SHA-256 through the unique index: see `api_key_authenticate`
    for why that lookup tells a caller nothing by its timing."""
    if not plaintext.startswith(TOKEN_PREFIX):
        return None
    now = now or timezone.now()
    token = (
        PersonalToken.objects.select_related("org", "user")
        .filter(token_hash=secret_hash(plaintext), revoked_at=None)
        .first()
    )
    if token is None or (token.expires_at is not None and token.expires_at <= now) or not token.user.is_active:
        return None
    use_record(token, now=now)
    return token

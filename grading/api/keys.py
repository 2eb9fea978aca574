"""API keys: issued once in plaintext, stored as a SHA-256, found through the unique index. The people side's
credentials (personal tokens, invitation links) are stored and used by the same rules (`secret_hash`, `use_record`)."""

import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from django.contrib.auth.models import AbstractBaseUser
from django.db import models
from django.http import HttpRequest
from django.utils import timezone

from grading.models import ApiKey, Org
from grading.models.audit import audit_record
from grading.models.reach import Reach

API_KEY_PREFIX = "tg_"
# Recording every use would turn each API call into a write on one hot row; a minute is precise enough.
_LAST_USED_RESOLUTION = timedelta(seconds=60)


@dataclass(frozen=True)
class IssuedApiKey:
    api_key: ApiKey
    plaintext: str  # shown once, never stored


def secret_hash(plaintext: str) -> str:
    """What a bearer secret is stored as: its SHA-256, so the table holds nothing a caller could present."""
    return hashlib.sha256(plaintext.encode()).hexdigest()


def use_record(credential: models.Model, *, now: datetime) -> None:
    """Move a credential's `last_used_at` to `now`, at most once a minute (`_LAST_USED_RESOLUTION`)."""
    last_used_at = credential.last_used_at
    if last_used_at is None or now - last_used_at >= _LAST_USED_RESOLUTION:
        type(credential)._default_manager.filter(pk=credential.pk).update(last_used_at=now)
        credential.last_used_at = now


def api_key_create(*, org: Org, name: str, created_by: AbstractBaseUser | None = None) -> IssuedApiKey:
    plaintext = API_KEY_PREFIX + secrets.token_urlsafe(32)
    api_key = ApiKey.objects.create(
        org=org,
        name=name,
        prefix=plaintext[:10],
        key_hash=secret_hash(plaintext),
        created_by=created_by if created_by is not None and created_by.is_authenticated else None,
    )
    audit_record(action="api_key.create", org=org, actor=created_by, target=api_key, detail={"name": name})
    return IssuedApiKey(api_key=api_key, plaintext=plaintext)


def api_key_revoke(*, api_key: ApiKey, actor: AbstractBaseUser | None = None) -> None:
    if api_key.revoked_at is None:
        ApiKey.objects.filter(pk=api_key.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
        audit_record(action="api_key.revoke", org=api_key.org, actor=actor, target=api_key)


def api_key_authenticate(plaintext: str) -> ApiKey | None:
    """The live key matching `plaintext`, with its last-used time moved; None for unknown or revoked keys.

    Found by its SHA-256 through the unique index, which is safe against timing attacks with no compare_digest:
    the index compares the hash of the caller's guess, and the caller cannot steer that hash towards a stored
    one without a SHA-256 preimage, so how long the lookup takes tells nothing about any key."""
    if not plaintext.startswith(API_KEY_PREFIX):
        return None
    api_key = ApiKey.objects.select_related("org").filter(key_hash=secret_hash(plaintext), revoked_at=None).first()
    if api_key is None:
        return None
    use_record(api_key, now=timezone.now())
    return api_key


class Caller(Protocol):
    """Whoever an API request authenticated as: an org's key (`ApiKey`), or a person's token (the people side's,
    reviewer/tokens/). Every route reads its org from here; a route that reads items keeps to `caller_reach`, and one
    that records a person's act (a decision) asks for `person`, which a key has none of."""

    org: Org
    org_id: int
    name: str

    @property
    def person(self) -> AbstractBaseUser | None: ...

    # A person's caller also has `reach`, what their memberships of the org cover: read it with `caller_reach`.


# Other credentials the API takes in the same `Authorization: Bearer` header, tried in turn when no org key matches:
# the people side registers a person's token here (reviewer/apps.py), since grading never imports it. Each answers
# a Caller, None when the token is none of its own, or raises an HttpError (a 403 that says why) to refuse it.
TokenAuthenticator = Callable[[HttpRequest, str], Caller | None]
_token_authenticators: list[TokenAuthenticator] = []


def token_authenticator_add(authenticator: TokenAuthenticator) -> None:
    if authenticator not in _token_authenticators:
        _token_authenticators.append(authenticator)


def caller_authenticate(request: HttpRequest, token: str) -> Caller | None:
    """The org key or the other credential `token` is; None (a 401) when it is none that is live."""
    api_key = api_key_authenticate(token)
    if api_key is not None:
        return api_key
    for authenticator in _token_authenticators:
        caller = authenticator(request, token)
        if caller is not None:
            return caller
    return None


def caller_acting(caller: Caller) -> dict[str, Any]:
    """Who a write is by, as the services and `audit_record` take it: the person of a personal token (`actor`),
    else the org's key (`api_key`). A service must never be handed the caller itself as a key: a person's caller is
    no ApiKey row."""
    person = caller.person
    return {"actor": person} if person is not None else {"api_key": caller}


def caller_reach(caller: Caller) -> Reach:
    """What the caller may read of its org: an org's key, all of it; a person, what their memberships cover."""
    return Reach(caller.org_id) if isinstance(caller, ApiKey) else caller.reach

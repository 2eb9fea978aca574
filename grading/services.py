"""Writes of the domain core: API keys and the audit trail."""

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.contrib.auth.models import AbstractBaseUser
from django.db import models
from django.utils import timezone

from grading.models import ApiKey, AuditEvent, Org

API_KEY_PREFIX = "tg_"
# Recording every use would turn each API call into a write on one hot row; a minute is precise enough.
_LAST_USED_RESOLUTION = timedelta(seconds=60)


def audit_record(
    *,
    action: str,
    org: Org | None = None,
    actor: AbstractBaseUser | None = None,
    api_key: ApiKey | None = None,
    target: models.Model | None = None,
    detail: dict | None = None,
) -> AuditEvent:
    return AuditEvent.objects.create(
        org=org,
        actor=actor if actor is not None and actor.is_authenticated else None,
        api_key=api_key,
        action=action,
        object_type=target._meta.label_lower if target is not None else "",
        object_id=str(target.pk) if target is not None else "",
        detail=detail or {},
    )


@dataclass(frozen=True)
class IssuedApiKey:
    api_key: ApiKey
    plaintext: str  # shown once, never stored


def _hash_key(plaintext: str) -> str:
    return hashlib.sha256(plaintext.encode()).hexdigest()


def api_key_create(*, org: Org, name: str, created_by: AbstractBaseUser | None = None) -> IssuedApiKey:
    plaintext = API_KEY_PREFIX + secrets.token_urlsafe(32)
    api_key = ApiKey.objects.create(
        org=org,
        name=name,
        prefix=plaintext[:10],
        key_hash=_hash_key(plaintext),
        created_by=created_by if created_by is not None and created_by.is_authenticated else None,
    )
    audit_record(action="api_key.create", org=org, actor=created_by, target=api_key, detail={"name": name})
    return IssuedApiKey(api_key=api_key, plaintext=plaintext)


def api_key_revoke(*, api_key: ApiKey, actor: AbstractBaseUser | None = None) -> None:
    if api_key.revoked_at is None:
        ApiKey.objects.filter(pk=api_key.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
        audit_record(action="api_key.revoke", org=api_key.org, actor=actor, target=api_key)


def api_key_authenticate(plaintext: str) -> ApiKey | None:
    """The live key matching `plaintext`, with its last-used time moved; None for unknown or revoked keys."""
    if not plaintext.startswith(API_KEY_PREFIX):
        return None
    api_key = ApiKey.objects.select_related("org").filter(key_hash=_hash_key(plaintext), revoked_at=None).first()
    if api_key is None:
        return None
    now = timezone.now()
    if api_key.last_used_at is None or now - api_key.last_used_at >= _LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=api_key.pk).update(last_used_at=now)
        api_key.last_used_at = now
    return api_key

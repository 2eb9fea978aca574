"""The audit trail: who did what, when, to which object. Every write that people or keys must answer for
records one event here, in the same transaction as the write."""

from django.contrib.auth.models import AbstractBaseUser
from django.db import models

from grading.models import ApiKey, AuditEvent, Conversation, Draft, Org


def audit_record(
    *,
    action: str,
    org: Org | None = None,
    actor: AbstractBaseUser | None = None,
    api_key: ApiKey | None = None,
    target: models.Model | None = None,
    detail: dict | None = None,
    item: Conversation | Draft | None = None,
) -> AuditEvent:
    """`item`: the conversation or draft the event concerns, whose page shows it in its trail."""
    return AuditEvent.objects.create(
        org=org,
        actor=actor if actor is not None and actor.is_authenticated else None,
        api_key=api_key,
        action=action,
        object_type=target._meta.label_lower if target is not None else "",
        object_id=str(target.pk) if target is not None else "",
        detail=detail or {},
        item_kind=_item_kind(item),
        item_id=item.pk if item is not None else None,
    )


def _item_kind(item: Conversation | Draft | None) -> str:
    if item is None:
        return ""
    return "conversation" if isinstance(item, Conversation) else "draft"

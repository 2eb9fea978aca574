"""The audit trail: who did what, when, to which object. Every write that people or keys must answer for
records one event here, in the same transaction as the write."""

from typing import Required, TypedDict, Unpack

from django.contrib.auth.models import AbstractBaseUser
from django.db import models

from grading.models import ApiKey, AuditEvent, Conversation, CriteriaExample, Draft, ItemKind, Org, Review

# What an event may name as its item: the conversation or draft itself, or one of its reviews or worked examples
# (whose item is read from its ids, without loading it).
Item = Conversation | Draft | Review | CriteriaExample


class AuditFields(TypedDict, total=False):
    """What `audit_record` takes: `audit_event`'s arguments, which say what each is."""

    action: Required[str]
    org: Org | None
    actor: AbstractBaseUser | None
    api_key: ApiKey | None
    target: models.Model | None
    detail: dict | None
    item: Item | None


def audit_record(**fields: Unpack[AuditFields]) -> AuditEvent:
    """Record `audit_event(**fields)`, in the transaction of the write it answers for."""
    event = audit_event(**fields)
    event.save()
    return event


def audit_event(
    *,
    action: str,
    org: Org | None = None,
    actor: AbstractBaseUser | None = None,
    api_key: ApiKey | None = None,
    target: models.Model | None = None,
    detail: dict | None = None,
    item: Item | None = None,
) -> AuditEvent:
    """The event `audit_record` writes, unsaved: for writes of many items that record theirs in one statement
    (`AuditEvent.objects.bulk_create`). `item`: the conversation or draft the event concerns (or a review of it),
    whose page shows it in its trail."""
    kind, item_id = item_of(item)
    return AuditEvent(
        org=org,
        actor=actor if actor is not None and actor.is_authenticated else None,
        api_key=api_key,
        action=action,
        object_type=target._meta.label_lower if target is not None else "",
        object_id=str(target.pk) if target is not None else "",
        detail=detail or {},
        item_kind=kind,
        item_id=item_id,
    )


def item_of(item: Item | None) -> tuple[str, int | None]:
    """(kind, id) of the item an event concerns; ("", None) for none."""
    if item is None:
        return "", None
    if isinstance(item, Review):
        return item.kind, item.draft_id if item.kind == ItemKind.DRAFT else item.conversation_id
    if isinstance(item, CriteriaExample):  # its item may be gone: the example outlives it
        if item.conversation_id is None and item.draft_id is None:
            return "", None
        return (ItemKind.DRAFT, item.draft_id) if item.draft_id else (ItemKind.CONVERSATION, item.conversation_id)
    return (ItemKind.CONVERSATION if isinstance(item, Conversation) else ItemKind.DRAFT), item.pk

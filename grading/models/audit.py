"""The audit trail: who did what, when, to which object. Every write that people or keys must answer for
records one event here, in the same transaction as the write."""

from django.contrib.auth.models import AbstractBaseUser
from django.db import models

from grading.models import ApiKey, AuditEvent, Conversation, CriteriaExample, Draft, ItemKind, Org, Review

# What an event may name as its item: the conversation or draft itself, or one of its reviews or worked examples
# (whose item is read from its ids, without loading it).
Item = Conversation | Draft | Review | CriteriaExample


def audit_record(
    *,
    action: str,
    org: Org | None = None,
    actor: AbstractBaseUser | None = None,
    api_key: ApiKey | None = None,
    target: models.Model | None = None,
    detail: dict | None = None,
    item: Item | None = None,
) -> AuditEvent:
    """`item`: the conversation or draft the event concerns (or a review of it), whose page shows it in its trail."""
    event = audit_event(action=action, org=org, actor=actor, api_key=api_key, target=target, detail=detail, item=item)
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
    (`AuditEvent.objects.bulk_create`)."""
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

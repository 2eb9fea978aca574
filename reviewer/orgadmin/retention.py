"""Retention settings: per org and kind, how many days items are kept, or forever (no policy row). The daily
retention pass (grading/erasure) erases what is older; this module only says what the policy is."""

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from grading.models import ItemKind, Org, RetentionPolicy
from grading.models.audit import audit_record

RETENTION_DAYS_MAX = 36_500  # a hundred years: longer is "forever", which is no policy at all
KINDS = (ItemKind.CONVERSATION, ItemKind.DRAFT)


def retention_policies(org: Org) -> dict[str, RetentionPolicy | None]:
    """Per kind, the org's policy; None: kept forever."""
    policies = {policy.kind: policy for policy in RetentionPolicy.objects.filter(org=org).select_related("updated_by")}
    return {kind: policies.get(kind) for kind in KINDS}


def retention_set(*, org: Org, kind: str, days: int | None, actor: AbstractBaseUser | None = None) -> bool:
    """Keep the org's items of `kind` for `days` (None: forever), audited; whether anything changed."""
    with transaction.atomic():
        current = RetentionPolicy.objects.select_for_update().filter(org=org, kind=kind).first()
        was = current.days if current else None
        if was == days:
            return False
        if days is None:
            current.delete()
        else:
            RetentionPolicy.objects.update_or_create(
                org=org, kind=kind, defaults={"days": days, "updated_by": actor, "updated_at": timezone.now()}
            )
        audit_record(
            action="retention.set" if days is not None else "retention.remove",
            org=org,
            actor=actor,
            detail={"kind": kind, "days": days, "was": was},
        )
    return True

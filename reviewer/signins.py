"""Sign-ins, and the account and identity a first single sign-on makes, as audit events.

Such an event is about a person, not about one org's data, and a person may belong to several orgs. It is recorded
once under each org the person belongs to when it happens, so every reader of an org's trail (the audit page, its
CSV, `GET /api/v1/audit-events`) keeps reading the org's own rows by its index, and an org sees the sign-ins of its
members while they are members: never those from before they joined or after they left, and nothing of the other
orgs they work for. A person of no org gets one event of no org, which only whoever runs Tollgate reads.
"""

from django.contrib.auth.models import AbstractBaseUser
from django.db import models

from grading.models import AuditEvent, Org
from grading.models.audit import audit_event
from reviewer.models import Membership


def person_audit_record(
    *,
    person: AbstractBaseUser,
    action: str,
    actor: AbstractBaseUser | None = None,
    target: models.Model | None = None,
    detail: dict | None = None,
) -> list[AuditEvent]:
    """Record an event about `person` under each org they belong to now (one of no org when they belong to none)."""
    orgs = list(Org.objects.filter(pk__in=Membership.objects.filter(user=person).values("org_id")).order_by("pk"))
    events = [audit_event(action=action, org=org, actor=actor, target=target, detail=detail) for org in orgs or [None]]
    return AuditEvent.objects.bulk_create(events)


def sign_in_record(*, person: AbstractBaseUser, via: str) -> None:
    """A person signed in: `via` says how ("password", or "oidc" for single sign-on)."""
    person_audit_record(person=person, action="user.login", actor=person, detail={"via": via})

"""Audit events written straight to the table, for the tests of reading them: many at one time (the ties keyset
paging must break), or one with the fields a test filters by."""

from datetime import datetime

from grading.models import AuditEvent, Org
from grading.models.audit import audit_event


def events_at(org: Org, at: datetime, count: int, *, action: str = "test.event", **fields) -> list[AuditEvent]:
    """`count` events of `org` all at the instant `at` (ids ascending in the order made)."""
    made = AuditEvent.objects.bulk_create(
        [audit_event(action=action, org=org, detail={"n": n}, **fields) for n in range(count)]
    )
    AuditEvent.objects.filter(pk__in=[event.pk for event in made]).update(at=at)  # `at` is set on insert otherwise
    return made

"""Service-level targets: when people owe an item a decision. The first target (by position) that matches a review
waiting for people (its kind, application and reason, or `audit` for the audit sample) sets `Review.due_at` to its
routing plus the target's minutes; with none, the review has no due time. Set when a review is routed to people
(`review_record`, `review_audit_mark`), and for every waiting review of the org whenever the targets change
(`due_times_refresh`): one form, `due_time`, for the review in hand and for each waiting review.

Which items a target or an assignment rule picks (`selects`) also has a SQL form, `selected_q`, for the items
reserved for the reader (reviewer/queue/assignments.py `reserved_q`; bench/README.md says why), held equal to it by
tests/reviewer/queue/test_assignments.py; claim next's scan writes it out (reviewer/queue/reads.py
`reserved_for_others_sql`, held equal by the same test)."""

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Protocol

from django.db.models import Q

from grading.models import Review, ReviewState, ServiceTarget
from grading.reviews.sql import due_times_write

AUDIT = "audit"  # a selector's reason naming the audit sample rather than a routing reason


class Selector(Protocol):
    """What targets and assignment rules pick items by (blank: any)."""

    kind: str
    application: str
    reason: str


def targets_of(org_id: int) -> list[ServiceTarget]:
    return list(ServiceTarget.objects.filter(org_id=org_id).order_by("position"))


def selects(selector: Selector, *, kind: str, application: str, reason: str, audit: bool) -> bool:
    """Whether a target or rule picks an item of this kind, application (reviews file drafts under none) and routing
    reason, in the audit sample or not. `selected_q` is the same rule in SQL."""
    reason_matches = not selector.reason or selector.reason == reason or (selector.reason == AUDIT and audit)
    return selector.kind in ("", kind) and selector.application in ("", application) and reason_matches


def due_time(
    targets: Sequence[ServiceTarget], *, kind: str, application: str, reason: str, audit: bool, routed_at: datetime
) -> datetime | None:
    """When people owe a decision on an item routed to them at `routed_at`; None when no target names it."""
    for target in targets:
        if selects(target, kind=kind, application=application, reason=reason, audit=audit):
            return routed_at + timedelta(minutes=target.minutes)
    return None


def selected_q(selector: Selector) -> Q:
    """The reviews a target or rule picks (`selects`)."""
    q = Q(pk__isnull=False)  # matches every row: an empty Q() would vanish when combined
    if selector.kind:
        q &= Q(kind=selector.kind)
    if selector.application:
        q &= Q(application=selector.application)
    if selector.reason == AUDIT:
        q &= Q(audit=True)
    elif selector.reason:
        q &= Q(reason=selector.reason)
    return q


def due_times_refresh(org_id: int) -> int:
    """Set the due time of every review of the org waiting for people from the targets as they are now, counted
    from its routing (`routed_at`): `due_time` for each, written by one statement; the number of reviews written.
    A review decided or gone stale meanwhile is left as it is."""
    targets = targets_of(org_id)
    rows = Review.objects.filter(org_id=org_id, state=ReviewState.WAITING).values_list(
        "pk", "kind", "application", "reason", "audit", "routed_at"
    )
    ids, due = [], []
    for pk, kind, application, reason, audit, routed_at in rows.iterator(chunk_size=10_000):
        ids.append(pk)
        due.append(
            due_time(targets, kind=kind, application=application, reason=reason, audit=audit, routed_at=routed_at)
            if routed_at is not None
            else None
        )
    return due_times_write(org_id=org_id, review_ids=ids, due_at=due)

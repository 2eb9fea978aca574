"""Escalation: telling people about items due soon or overdue (service-level targets, `Review.due_at`).

The beat runs `escalations_sweep` every minute. Per org with an `Escalation`, one transaction:
1. Record a `Notice` for each review that went overdue (grading's one rule, `Review.objects.overdue`: waiting under
   the active criteria, due time passed) since the last sweep (`overdue`), and, with a warning margin, for each
   that came within the margin (`due_soon`): per threshold, one read of the `review_due` index range
   (swept_until, now] and one bulk INSERT, so a run costs what the newly due items cost however many were overdue
   before, and the unique (review, threshold) makes a second notice impossible.
2. Gather whom each new notice concerns: the people the item is reserved for (assignments.py) while their queue
   roles reach it (a pool or a rule may still name someone who left the org), and the org's leads whose reach
   covers it, as the org's escalation says.
3. After commit, one mail per person (a digest of every item of this sweep, never a mail per item) and one signed
   webhook per org, each a task on the `webhooks` queue: a slow or failing SMTP server or receiver holds neither
   grading nor the queue, and a failed delivery is retried there. A mail names only the items that, when it is
   sent, still wait within the person's reach.
Items already overdue when an org's escalation is set up are not announced: the first sweep starts there.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core.mail import EmailMessage
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.urls import reverse
from django.utils import timezone

from grading.models import AuditEvent, Org, Review
from grading.models.audit import audit_event
from grading.models.reach import Reach
from reviewer.access import reaches_in, reaches_of
from reviewer.models import Escalation, Notice, Role
from reviewer.queue.assignments import QUEUE_ROLES, reservations_of

Digests = dict[int, dict[str, list[int]]]  # person id -> threshold -> review ids
OVERDUE, DUE_SOON = Notice.Threshold.OVERDUE.value, Notice.Threshold.DUE_SOON.value
LABELS = {OVERDUE: "overdue", DUE_SOON: "due soon"}


@dataclass(frozen=True)
class Swept:
    org_id: int
    notices: dict[str, list[int]]  # threshold -> review ids newly noticed
    digests: Digests


def escalations_sweep(deliver: Callable[[Swept, str], None], now: datetime | None = None) -> list[Swept]:
    """Sweep every org with an escalation (each in its own transaction; an org another sweeper holds is skipped)
    and, after each commit, `deliver` what it found (reviewer/tasks.py hands it to the `webhooks` queue) with the
    org's webhook URL."""
    now = now or timezone.now()
    swept = []
    for org_id in Escalation.objects.values_list("org_id", flat=True):
        with transaction.atomic():
            escalation = Escalation.objects.select_for_update(skip_locked=True).filter(org_id=org_id).first()
            if escalation is None:
                continue
            result = escalation_sweep(escalation, now)
            transaction.on_commit(lambda result=result, url=escalation.webhook_url: deliver(result, url))
        swept.append(result)
    return swept


def escalation_sweep(escalation: Escalation, now: datetime) -> Swept:
    """Steps 1 and 2 of the module's sweep for one org, inside the caller's transaction (its row locked)."""
    start = escalation.swept_until
    notices = {Notice.Threshold.OVERDUE.value: _notice(escalation, Notice.Threshold.OVERDUE, start, now, now)}
    if escalation.warn_minutes:
        margin = timedelta(minutes=escalation.warn_minutes)
        # The margin's window begins where the last one ended, and never reaches back past items already overdue.
        notices[Notice.Threshold.DUE_SOON.value] = _notice(
            escalation, Notice.Threshold.DUE_SOON, max(start + margin, now), now + margin, now
        )
    escalation.swept_until = now
    escalation.save(update_fields=["swept_until"])
    return Swept(escalation.org_id, notices, _digests(escalation, notices, now))


def _notice(escalation: Escalation, threshold: str, after: datetime, until: datetime, now: datetime) -> list[int]:
    """Record the threshold for the org's waiting reviews due in (after, until] that have not passed it before, each
    with an audit event naming its item (its trail shows it); the ids recorded. The caller holds the org's
    escalation row, so no other sweep writes these notices meanwhile; the unique (review, threshold) stands behind
    that."""
    if until <= after:
        return []
    org_id = escalation.org_id
    # Overdue by `until` and not by `after`: waiting under the active criteria (grading's one rule), due in between.
    due = Review.objects.overdue(until).filter(org_id=org_id, due_at__gt=after)
    noticed = Notice.objects.filter(review_id=OuterRef("pk"), threshold=threshold)
    new = list(
        due.exclude(Exists(noticed)).order_by("due_at").only("pk", "kind", "conversation_id", "draft_id", "due_at")
    )
    if not new:
        return []
    Notice.objects.bulk_create(
        [Notice(org_id=org_id, review_id=r.pk, threshold=threshold, due_at=r.due_at, noticed_at=now) for r in new],
        ignore_conflicts=True,
    )
    AuditEvent.objects.bulk_create(
        audit_event(
            action=f"escalation.{threshold}",
            org=escalation.org,
            detail={"review": review.pk, "due_at": review.due_at.isoformat()},
            item=review,
        )
        for review in new
    )
    return sorted(review.pk for review in new)


def _digests(escalation: Escalation, notices: dict[str, list[int]], now: datetime) -> Digests:
    """Per person, the items of this sweep that concern them, by threshold."""
    ids = {review_id for review_ids in notices.values() for review_id in review_ids}
    if not ids:
        return {}
    reviews = list(Review.objects.filter(pk__in=ids).only("pk", "org_id", "kind", "application", "reason", "audit",
                                                            "finished_at", "routed_at"))  # fmt: skip
    reserved = reservations_of(reviews, now) if escalation.to_assignees else {}
    # An assignee is told only while their queue roles reach the item: a pool or a rule may name someone whose
    # membership was narrowed or revoked since (digest_mail asks again when it sends).
    workers = reaches_in(escalation.org_id, *QUEUE_ROLES) if escalation.to_assignees else {}
    leads = reaches_in(escalation.org_id, Role.LEAD) if escalation.to_leads else {}
    concerns: dict[int, set[int]] = {}
    for review in reviews:
        assignees = reserved[review.pk].person_ids if review.pk in reserved else frozenset()
        concerns[review.pk] = {user_id for user_id in assignees if _covers(workers.get(user_id), review)} | {
            user_id for user_id, reach in leads.items() if _covers(reach, review)
        }
    digests: Digests = defaultdict(lambda: defaultdict(list))
    for threshold, review_ids in notices.items():
        for review_id in review_ids:
            for person_id in concerns[review_id]:
                digests[person_id][threshold].append(review_id)
    return {person: dict(by_threshold) for person, by_threshold in digests.items()}


def _covers(reach: Reach | None, review: Review) -> bool:
    return reach is not None and reach.covers(review.kind, review.application)


# --- what is sent ---------------------------------------------------------------------------------------------

MAIL_LISTS_AT_MOST = 50  # a digest names this many items per threshold and counts the rest


def digest_mail(org_id: int, person_id: int, items: dict[str, list[int]]) -> EmailMessage | None:
    """The one mail a person gets from a sweep, of the items that still concern them when it is sent; None when
    they have no address or none does."""
    person = get_user_model().objects.filter(pk=person_id).first()
    if person is None or not person.email:
        return None
    items = _still_theirs(org_id, person, items)
    if not any(items.values()):
        return None
    org = Org.objects.get(pk=org_id)
    counts = {threshold: len(items.get(threshold, [])) for threshold in (OVERDUE, DUE_SOON)}
    subject = f"Tollgate ({org.slug}): " + ", ".join(
        f"{n} item{'s' if n != 1 else ''} {LABELS[threshold]}" for threshold, n in counts.items() if n
    )
    lines = [f"Hello {person.get_username()},", ""]
    for threshold in (OVERDUE, DUE_SOON):
        review_ids = items.get(threshold, [])
        if not review_ids:
            continue
        lines.append(f"{LABELS[threshold].capitalize()} ({len(review_ids)}):")
        reviews = Review.objects.filter(pk__in=review_ids[:MAIL_LISTS_AT_MOST]).select_related("draft", "conversation")
        for review in sorted(reviews, key=lambda r: r.due_at or r.finished_at):
            name = review.draft.slug if review.draft_id else review.conversation.external_id
            url = settings.TOLLGATE_BASE_URL.rstrip("/") + reverse("review_detail", args=[review.pk])
            lines.append(f"- {review.kind} {name}: due {review.due_at:%Y-%m-%d %H:%M} UTC  {url}")
        if len(review_ids) > MAIL_LISTS_AT_MOST:
            lines.append(f"- and {len(review_ids) - MAIL_LISTS_AT_MOST} more: see the queue")
        lines.append("")
    lines.append("You get this because items are reserved for you or you lead this org's queue.")
    return EmailMessage(subject=subject, body="\n".join(lines), to=[person.email])


def _still_theirs(org_id: int, person: AbstractBaseUser, items: dict[str, list[int]]) -> dict[str, list[int]]:
    """The sweep's items that still wait in the queue (grading's rule: an item a publication made stale has left
    it) within the person's queue reach now. A mail waits for the `webhooks` queue and may be tried again for
    hours: meanwhile the person may have left the org, or had their reach narrowed, and the item may be decided."""
    reach = reaches_of(person, *QUEUE_ROLES).get(org_id)
    if reach is None:
        return {}
    ids = [review_id for review_ids in items.values() for review_id in review_ids]
    waiting = set(Review.objects.waiting().filter(reach.rows(), pk__in=ids).values_list("pk", flat=True))
    return {threshold: [i for i in review_ids if i in waiting] for threshold, review_ids in items.items()}


def webhook_body(org_id: int, notices: dict[str, list[int]]) -> bytes:
    org = Org.objects.get(pk=org_id)
    reviews = Review.objects.filter(pk__in=[i for ids in notices.values() for i in ids]).select_related(
        "draft", "conversation"
    )
    by_id = {review.pk: review for review in reviews}
    items = [
        {
            "threshold": threshold,
            "review": review_id,
            "kind": by_id[review_id].kind,
            "item": by_id[review_id].draft.external_id if by_id[review_id].draft_id
            else by_id[review_id].conversation.external_id,
            "due_at": by_id[review_id].due_at,
        }
        for threshold, review_ids in notices.items()
        for review_id in review_ids
        if review_id in by_id
    ]  # fmt: skip
    return json.dumps({"event": "queue_escalation", "org": org.slug, "items": items}, cls=DjangoJSONEncoder).encode()

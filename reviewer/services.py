"""Writes of the review queue: claims (leases), their heartbeat and release, and decisions.

Concurrency rests on the review row: every claim and decision locks it first (`SELECT ... FOR UPDATE`), then
reads the claim and decision state with a fresh statement, which under READ COMMITTED sees everything
committed before the lock was granted. The constraints (one open claim per review, one decision per review)
make a double hold or a double decision impossible even if that reasoning were wrong.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, connection, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from grading.judge.conversation import CHECKS
from grading.models import ItemKind, MemoryItem, Review, Route
from grading.otlp.export import evaluations_export_on_commit
from grading.services import audit_record
from grading.webhooks import HUMAN_DECISION, notify_pipeline
from reviewer.models import Claim, Decision, QueueHead
from reviewer.selectors import (
    NO_FILTERS,
    PRIORITIES,
    PRIORITY,
    QueueFilters,
    ordered_scans,
    queue_first_free,
    queue_heads,
    review_still_counts,
    stale_reason,
)

logger = logging.getLogger(__name__)

DRAFT_OUTCOMES = (Decision.Outcome.APPROVE, Decision.Outcome.REJECT, Decision.Outcome.SEND_BACK)
NOTE_REQUIRED = (Decision.Outcome.REJECT, Decision.Outcome.SEND_BACK)
VERDICTS = ("pass", "fail", "unknown")


def lease_length() -> timedelta:
    return timedelta(minutes=settings.CLAIM_LEASE_MINUTES)


class Refused(Exception):
    """A claim or decision that cannot be accepted; `message` says why, for the operator. Nothing was written."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# --- claims ---------------------------------------------------------------------------------------------------


def claim_next(
    *,
    user: AbstractBaseUser,
    org_ids: Sequence[int],
    filters: QueueFilters = NO_FILTERS,
    now: datetime | None = None,
) -> Claim | None:
    """Claim the first free item of the queue (within `filters`); None when nothing is free.

    1. Read the first item in queue order with no live claim, locking its review row and skipping rows that
       other claimers hold locked (`FOR UPDATE SKIP LOCKED`), so concurrent claimers spread over items.
    2. The scan's snapshot may predate a claim committed meanwhile; after the lock, look again. If the item
       was taken (or decided) in between, remember it and go on to the next one.
    3. Close an expired claim on it (recording the expiry) and open ours.
    """
    now = now or timezone.now()
    heads = queue_heads(org_ids)
    with ordered_scans():  # a transaction: the row lock lasts until the claim is written
        passed_over: list[int] = []
        while True:
            found = queue_first_free(org_ids=org_ids, filters=filters, heads=heads, now=now, passed_over=passed_over)
            if found is None:
                return None
            review_id, org_id, _ = found
            current = Claim.objects.filter(review_id=review_id, ended_at__isnull=True).select_related("holder").first()
            held = current is not None and current.expires_at > now
            if held or Decision.objects.filter(review_id=review_id).exists():
                passed_over.append(review_id)
                continue
            return _open_claim(review_id, org_id, user, current, now, via="next")


def claim_take(*, user: AbstractBaseUser, org_ids: Sequence[int], review_id: int, now: datetime | None = None) -> Claim:
    """Claim one particular item ("claim this"). Claiming an item you already hold renews your lease."""
    now = now or timezone.now()
    with transaction.atomic():
        review = _locked_review(org_ids, review_id)
        _refuse_unless_open(review)
        current = Claim.objects.filter(review_id=review.pk, ended_at__isnull=True).select_related("holder").first()
        if current is not None and current.expires_at > now:
            if current.holder_id == user.pk:
                current.expires_at = now + lease_length()
                current.save(update_fields=["expires_at"])
                return current
            raise Refused("held", _held_message(current, now))
        return _open_claim(review.pk, review.org_id, user, current, now, via="this")


def claim_extend(
    *, user: AbstractBaseUser, org_ids: Sequence[int], review_id: int, now: datetime | None = None
) -> Claim:
    """The heartbeat: push the lease end forward while the holder has the item open. A conditional UPDATE, so
    an expired or lost lease is never revived (the operator claims again instead)."""
    now = now or timezone.now()
    extended = Claim.objects.filter(
        review_id=review_id, org_id__in=list(org_ids), holder=user, ended_at__isnull=True, expires_at__gt=now
    ).update(expires_at=now + lease_length())
    claim = (
        Claim.objects.filter(review_id=review_id, org_id__in=list(org_ids))
        .select_related("holder")
        .order_by("-pk")
        .first()
    )
    if not extended:
        raise Refused(*_why_not_holder(claim, user, now))
    return claim


def claim_release(
    *, user: AbstractBaseUser, org_ids: Sequence[int], review_id: int, now: datetime | None = None
) -> None:
    """Give the item back to the queue. Releasing a lease that already ran out records its expiry."""
    now = now or timezone.now()
    with transaction.atomic():
        review = _locked_review(org_ids, review_id)
        claim = Claim.objects.filter(review_id=review.pk, ended_at__isnull=True, holder=user).first()
        if claim is None:
            current = Claim.objects.filter(review_id=review.pk).select_related("holder").order_by("-pk").first()
            raise Refused(*_why_not_holder(current, user, now))
        if claim.expires_at <= now:
            _end_expired(claim, now, noticed_by=user)
            return
        claim.ended_at, claim.end = now, Claim.End.RELEASED
        claim.save(update_fields=["ended_at", "end"])
        audit_record(action="claim.release", org=review.org, actor=user, target=claim, detail={"review": review.pk})


def _locked_review(org_ids: Sequence[int], review_id: int) -> Review:
    review = (
        Review.objects.select_for_update(of=("self",))
        .select_related("org", "criteria_version", "conversation", "draft")
        .filter(pk=review_id, org_id__in=list(org_ids), route=Route.HUMAN)
        .first()
    )
    if review is None:
        raise Refused("not_found", "There is no such item in your queue.")
    return review


def _refuse_unless_open(review: Review) -> None:
    decision = Decision.objects.filter(review=review).select_related("decided_by").first()
    if decision is not None:
        by = decision.decided_by.get_username() if decision.decided_by else "someone"
        raise Refused("decided", f"This item was already decided ({decision.get_outcome_display()}) by {by}.")
    if not review_still_counts(review):
        raise Refused("changed", f"The item changed since it was queued, so it left the queue. {stale_reason(review)}")


def _open_claim(
    review_id: int, org_id: int, user: AbstractBaseUser, expired: Claim | None, now: datetime, *, via: str
) -> Claim:
    if expired is not None:
        _end_expired(expired, now, noticed_by=user)
    claim = Claim.objects.create(
        org_id=org_id, review_id=review_id, holder=user, claimed_at=now, expires_at=now + lease_length()
    )
    audit_record(
        action="claim.create",
        org=claim.org,
        actor=user,
        target=claim,
        detail={"review": review_id, "via": via, "expires_at": claim.expires_at.isoformat()},
    )
    return claim


def _end_expired(claim: Claim, now: datetime, *, noticed_by: AbstractBaseUser) -> None:
    """Close a lease that ran out. It stopped counting at `expires_at`; this only records that it ended."""
    claim.ended_at, claim.end = now, Claim.End.EXPIRED
    claim.save(update_fields=["ended_at", "end"])
    audit_record(
        action="claim.expire",
        org=claim.org,
        actor=noticed_by,
        target=claim,
        detail={
            "review": claim.review_id,
            "holder": claim.holder.get_username(),
            "expired_at": claim.expires_at.isoformat(),
            "noticed_by": noticed_by.get_username(),
        },
    )


def _held_message(claim: Claim, now: datetime) -> str:
    minutes = max(1, int((claim.expires_at - now).total_seconds() // 60))
    return f"{claim.holder.get_username()} holds this item (lease ends in {minutes} min)."


def _why_not_holder(claim: Claim | None, user: AbstractBaseUser, now: datetime) -> tuple[str, str]:
    if claim is None:
        return "not_claimed", "You do not hold this item: claim it first."
    if claim.holder_id == user.pk:
        if claim.end == Claim.End.DECIDED:
            return "decided", "You already decided this item."
        if claim.end == Claim.End.RELEASED:
            return "released", "You released this item: claim it again to decide."
        if claim.ended_at is not None or claim.expires_at <= now:
            return "expired", f"Your lease expired at {claim.expires_at:%H:%M:%S} UTC: claim the item again to decide."
    elif claim.ended_at is None and claim.expires_at > now:
        return "held", f"Taken by someone else: {_held_message(claim, now)}"
    return "not_claimed", "You do not hold this item: claim it first."


# --- decisions ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DecisionResult:
    decision: Decision
    learning_error: str | None = None  # the decision stands even when its note could not become a learning


def decision_create(
    *,
    user: AbstractBaseUser,
    org_ids: Sequence[int],
    review_id: int,
    fingerprint: str,
    outcome: str = "",
    checks: dict[str, str] | None = None,
    note: str = "",
    keep_as_learning: bool = False,
    now: datetime | None = None,
) -> DecisionResult:
    """Record the operator's decision on the review they were shown, or refuse and write nothing.

    1. Validate the shape: a draft outcome (a note for reject and send back), or a verdict for every check.
    2. Lock the review; refuse when it was decided already, when the caller does not hold a live lease on it,
       when `fingerprint` is not the review's (the page showed other evidence), or when the review stopped
       counting (the item changed, a newer review replaced it, or new criteria were published).
    3. Write the decision, end the claim, record the audit event; on commit, tell the draft's pipeline.
    4. After commit, turn the note into an org learning if asked (an embedding call: never inside the lock).
    """
    now = now or timezone.now()
    note = note.strip()
    with transaction.atomic():
        review = _locked_review(org_ids, review_id)
        values = _decision_values(review, outcome=outcome, checks=checks or {}, note=note)
        if keep_as_learning and not note:
            raise Refused("invalid", "Write the note to keep it as an org learning.")
        decided = Decision.objects.filter(review=review).select_related("decided_by").first()
        if decided is not None:
            by = decided.decided_by.get_username() if decided.decided_by else "someone"
            raise Refused("decided", f"This item was already decided ({decided.get_outcome_display()}) by {by}.")
        claim = Claim.objects.filter(review=review, ended_at__isnull=True).select_related("holder").first()
        if claim is None or claim.holder_id != user.pk or claim.expires_at <= now:
            if claim is None:
                claim = (
                    Claim.objects.filter(review=review, holder=user).select_related("holder").order_by("-pk").first()
                )
            raise Refused(*_why_not_holder(claim, user, now))
        if fingerprint != review.fingerprint or not review_still_counts(review):
            raise Refused(
                "changed", f"The item changed since you opened it; nothing was recorded. {stale_reason(review)}"
            )
        try:
            with transaction.atomic():
                decision = Decision.objects.create(
                    org_id=review.org_id,
                    review=review,
                    claim=claim,
                    kind=review.kind,
                    note=note,
                    fingerprint=review.fingerprint,
                    criteria_version_id=review.criteria_version_id,
                    decided_by=user,
                    decided_at=now,
                    **values,
                )
        except IntegrityError:  # the constraint is the last line: a concurrent decision got in first
            raise Refused("decided", "This item was already decided by someone else.") from None
        claim.ended_at, claim.end = now, Claim.End.DECIDED
        claim.save(update_fields=["ended_at", "end"])
        audit_record(
            action="decision.create",
            org=review.org,
            actor=user,
            target=decision,
            detail={
                "review": review.pk,
                "kind": review.kind,
                "outcome": decision.outcome,
                "checks": decision.checks,
                "fingerprint": review.fingerprint,
                "criteria_version": review.criteria_version.number,
                "keep_as_learning": keep_as_learning,
            },
        )
        evaluations_export_on_commit(review_id=review.pk, decision_id=decision.pk)
        if review.kind == ItemKind.DRAFT and review.draft.callback_url:
            decision_id = decision.pk
            transaction.on_commit(lambda: decision_notify_pipeline(decision_id=decision_id))
        org_id, priority = review.org_id, PRIORITIES[review.kind]
        transaction.on_commit(lambda: queue_head_advance(org_id=org_id, priority=priority), robust=True)
    learning_error = None
    if keep_as_learning:
        learning_error = _keep_as_learning(decision)
    return DecisionResult(decision, learning_error)


def _decision_values(review: Review, *, outcome: str, checks: dict[str, str], note: str) -> dict:
    if review.kind == ItemKind.DRAFT:
        if outcome not in DRAFT_OUTCOMES:
            raise Refused("invalid", "Choose approve, reject or send back.")
        if outcome in NOTE_REQUIRED and not note:
            raise Refused("invalid", f"A note is required to {Decision.Outcome(outcome).label}.")
        return {"outcome": outcome, "checks": {}}
    if set(checks) != set(CHECKS) or any(verdict not in VERDICTS for verdict in checks.values()):
        raise Refused("invalid", "Give a verdict (pass, fail or unknown) for every check.")
    if not note:
        raise Refused("invalid", "A note is required with a verdict: say what the evidence shows.")
    verdicts = [checks[name] for name in CHECKS]
    if "fail" in verdicts:
        summary = Decision.Outcome.FAIL
    elif "unknown" in verdicts:
        summary = Decision.Outcome.UNKNOWN
    else:
        summary = Decision.Outcome.PASS
    return {"outcome": summary, "checks": {name: checks[name] for name in CHECKS}}


def _keep_as_learning(decision: Decision) -> str | None:
    """Store the note as an org learning and link it to the decision; a failure leaves the decision standing."""
    try:
        from grading.memory import memory_add

        item = memory_add(
            org=decision.org,
            kind=MemoryItem.Kind.LEARNING,
            text=decision.note,
            source=MemoryItem.Source.OPERATOR_DECISION,
        )
    except Exception as exc:  # an embeddings backend that is down must not undo a decision
        logger.warning("decision %s: the note could not become an org learning: %s", decision.pk, exc)
        return f"The decision is recorded, but the note could not be kept as an org learning ({exc})."
    Decision.objects.filter(pk=decision.pk).update(learning=item)
    decision.learning = item
    return None


def decision_notify_pipeline(*, decision_id: int) -> None:
    """The one place an operator's draft decision reaches the pipeline's webhook (DESIGN 5.6). Runs on commit;
    the payload reads the decision back through `review.decisions`."""
    review = Review.objects.filter(decisions__pk=decision_id).select_related("draft").first()
    if review is not None and review.draft is not None and review.draft.callback_url:
        notify_pipeline(review_id=review.pk, event=HUMAN_DECISION)


# --- the decided prefix ---------------------------------------------------------------------------------------

HEAD_MARGIN = timedelta(minutes=10)  # far longer than a grading transaction takes from stamping to commit
HEAD_BATCH = 1000


def queue_head_advance(
    *, org_id: int, priority: int, now: datetime | None = None, max_rows: int = 20 * HEAD_BATCH
) -> None:
    """Move the org's decided-prefix mark (QueueHead) forward over current reviews that have a decision.

    1. Walk the queue index from the mark, in order, over reviews finished more than HEAD_MARGIN ago.
    2. Stop at the first one without a decision (waiting, held, or no longer counting: none of those may be
       skipped), or after `max_rows`.
    3. Store the last decided key, only ever forwards (a conditional upsert, so racing advances are harmless).
    Called after each decision; the decided items stay in the index but reads start after them.
    """
    now = now or timezone.now()
    head = queue_heads([org_id]).get((org_id, priority))
    reviews = (
        Review.objects.filter(is_current=True, route=Route.HUMAN, org_id=org_id, finished_at__lt=now - HEAD_MARGIN)
        .annotate(priority=PRIORITY, decided=Exists(Decision.objects.filter(review_id=OuterRef("pk"))))
        .filter(priority=priority)
    )
    moved, scanned = None, 0
    while scanned < max_rows:
        batch = (
            reviews
            if head is None
            else reviews.filter(Q(finished_at__gt=head[0]) | Q(finished_at=head[0], pk__gt=head[1]))
        )
        rows = list(batch.order_by("finished_at", "pk").values_list("finished_at", "pk", "decided")[:HEAD_BATCH])
        scanned += len(rows)
        decided = list(itertools.takewhile(lambda row: row[2], rows))
        if decided:
            head = moved = decided[-1][:2]
        if len(decided) < HEAD_BATCH:
            break
    if moved is None:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            f"""INSERT INTO {QueueHead._meta.db_table} (org_id, priority, finished_at, review_id, updated_at)
                VALUES (%s, %s, %s, %s, %s)
                ON CONFLICT (org_id, priority) DO UPDATE
                SET finished_at = EXCLUDED.finished_at, review_id = EXCLUDED.review_id, updated_at = EXCLUDED.updated_at
                WHERE ({QueueHead._meta.db_table}.finished_at, {QueueHead._meta.db_table}.review_id)
                    < (EXCLUDED.finished_at, EXCLUDED.review_id)""",  # noqa: S608 - our table name; values are parameters
            [org_id, priority, moved[0], moved[1], now],
        )

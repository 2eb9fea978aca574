"""Writes of the review queue: claims (leases), their heartbeat, release and decline, answers and decisions.

Concurrency rests on the review row: every claim, answer and decision locks it first (`SELECT ... FOR UPDATE`),
then reads the claims, answers and decision with fresh statements, which under READ COMMITTED see everything
committed before the lock was granted. So an item several people decide never gets more claims and answers than
places. The constraints (one open claim per person and review, one answer per person and review, one decision
per review) make a double hold, a double answer or a double decision impossible even if that reasoning were
wrong.

Every service reads the person's reach (`operator_reaches`); `org_id` narrows it to one org of theirs, as a personal
token acting in that org does over the API (reviewer/queue/api.py): the pages pass none.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from grading.models import Answer, Decision, Review, ReviewState, for_people
from grading.models.audit import audit_record
from grading.models.reach import Reach, within
from grading.reviews.memory import decision_learning_keep
from grading.reviews.reads import review_slots
from grading.reviews.services import (
    Answered,
    AwaitingAnswers,
    InvalidDecision,
    NotWaiting,
    PersonVerdict,
    answer_record,
    decision_record,
)
from reviewer.models import Claim, Preferences
from reviewer.queue.assignments import Assignee, reservation_of
from reviewer.queue.display import stale_reason
from reviewer.queue.reads import (
    NO_FILTERS,
    QueueFilters,
    claim_standing,
    operator_reaches,
    queue_first_free,
    queue_lanes,
    queue_versions,
    slots_now,
)

logger = logging.getLogger(__name__)


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
    filters: QueueFilters = NO_FILTERS,
    now: datetime | None = None,
    org_id: int | None = None,
    reaches: Sequence[Reach] | None = None,
) -> Claim | None:
    """Claim the first item of the queue (within `filters` and the person's reach) this person may claim, in the
    order the page lists it: drafts first, then the soonest due, then the oldest. An item reserved for them is theirs
    to claim, but does not jump that order: a reservation says who may claim, not what comes first. None when there
    is none.

    1. Read the first such item in queue order, locking its review row and skipping rows that other claimers hold
       locked (`FOR UPDATE SKIP LOCKED`), so concurrent claimers spread over items.
    2. The scan's snapshot may predate a claim or an answer committed meanwhile; after the lock, look again
       (`Slots.place_for`). If the place was taken (or the item decided) in between, remember it and go on.
    3. Close expired claims on it (recording each expiry) and open ours.

    `reaches`: the person's operator reaches when the caller has read them already (`operator_reaches`).
    """
    now = now or timezone.now()
    if reaches is None:
        reaches = operator_reaches(user, org_id=org_id)
    lanes = queue_lanes(queue_versions(reaches), reaches, filters, user_id=user.pk, now=now)
    with transaction.atomic():  # the row lock lasts until the claim is written
        passed_over: list[int] = []
        rules: dict[int, list[Assignee]] = {}  # per org, as the scan read them
        while True:
            review = queue_first_free(
                lanes=lanes, filters=filters, user_id=user.pk, now=now, passed_over=passed_over, rules=rules
            )
            if review is None:
                return None
            if _waiting(review):
                standing = claim_standing(review, now, user_id=user.pk, rules=rules[review.org_id])
                if standing.slots.place_for(user.pk) is None and not standing.reserved_for_others:
                    return _open_claim(review, user, now, via="next", expired=standing.expired)
            passed_over.append(review.pk)


def claim_take(
    *, user: AbstractBaseUser, review_id: int, now: datetime | None = None, org_id: int | None = None
) -> Claim:
    """Claim one particular item ("claim this"). Claiming an item you already hold renews your lease; an item
    several people decide takes as many claims as it has places (`Slots.place_for` says who may take one)."""
    now = now or timezone.now()
    with transaction.atomic():
        review = locked_review(operator_reaches(user, org_id=org_id), review_id)
        _refuse_unless_open(review)
        mine = Claim.objects.filter(review_id=review.pk, holder=user, ended_at__isnull=True).first()
        if mine is not None and mine.expires_at > now:
            mine.expires_at = now + lease_length()
            mine.save(update_fields=["expires_at"])
            return mine
        reservation = reservation_of(review, now)
        if reservation is not None and not reservation.allows(user.pk):
            until = f" until {reservation.until:%Y-%m-%d %H:%M} UTC" if reservation.until else ""
            raise Refused("assigned", f"This item is assigned to {reservation.named}{until}: only they may claim it.")
        refusal = slots_now(review, now).place_for(user.pk)
        if refusal is not None:
            code, message = refusal
            holder = Claim.objects.filter(review_id=review.pk, ended_at__isnull=True, expires_at__gt=now).first()
            if code == "held" and holder is not None and review_slots(review) == 1:
                message = _held_message(holder, now)
            raise Refused(code, message)
        return _open_claim(review, user, now, via="this")


def claim_decline(
    *, user: AbstractBaseUser, review_id: int, reason: str, now: datetime | None = None, org_id: int | None = None
) -> None:
    """Give a claimed item back with a reason: the place returns to the queue at once, the decline is recorded (and
    never counts as an answer), and the next claims pass the item over for this person."""
    now = now or timezone.now()
    reason = reason.strip()
    if not reason:
        raise Refused("invalid", "Say why you decline the item: the reason is recorded.")
    with transaction.atomic():
        review = locked_review(operator_reaches(user, org_id=org_id), review_id)
        claim = Claim.objects.filter(review_id=review.pk, ended_at__isnull=True, holder=user).first()
        if claim is None or claim.expires_at <= now:
            raise Refused(*_why_not_holder(claim or _claim_to_explain(review.pk, user), user, now))
        claim_end(claim, end=Claim.End.DECLINED, now=now, reason=reason)
        audit_record(
            action="claim.decline",
            org=review.org,
            actor=user,
            target=claim,
            detail={"review": review.pk, "reason": reason},
            item=review,
        )


def claim_extend(
    *, user: AbstractBaseUser, review_id: int, now: datetime | None = None, org_id: int | None = None
) -> Claim:
    """The heartbeat: push the lease end forward while the holder has the item open. A conditional UPDATE, so
    an expired or lost lease is never revived (the operator claims again instead)."""
    now = now or timezone.now()
    reaches = operator_reaches(user, org_id=org_id)
    extended = Claim.objects.filter(
        within(reaches, "review__"), review_id=review_id, holder=user, ended_at__isnull=True, expires_at__gt=now
    ).update(expires_at=now + lease_length())
    claim = _claim_to_explain(review_id, user, reaches=reaches)
    if not extended:
        raise Refused(*_why_not_holder(claim, user, now))
    return claim


def claim_release(
    *, user: AbstractBaseUser, review_id: int, now: datetime | None = None, org_id: int | None = None
) -> None:
    """Give the item back to the queue. Releasing a lease that already ran out records its expiry."""
    now = now or timezone.now()
    with transaction.atomic():
        review = locked_review(operator_reaches(user, org_id=org_id), review_id)
        claim = Claim.objects.filter(review_id=review.pk, ended_at__isnull=True, holder=user).first()
        if claim is None:
            raise Refused(*_why_not_holder(_claim_to_explain(review.pk, user), user, now))
        if claim.expires_at <= now:
            _end_expired(claim, review, now, noticed_by=user)
            return
        claim_end(claim, end=Claim.End.RELEASED, now=now)
        audit_record(
            action="claim.release", org=review.org, actor=user, target=claim, detail={"review": review.pk}, item=review
        )


def locked_review(reaches: Sequence[Reach], review_id: int) -> Review:
    """The review, locked, when it is an item for people within `reaches`; else Refused ("not_found")."""
    review = (
        Review.objects.with_state()
        .select_for_update(of=("self",))
        .select_related("org", "criteria_version", "conversation", "draft")
        .filter(within(reaches), pk=review_id)
        .first()
    )
    if review is None or not for_people(route=review.route, audit=review.audit, sent=review.sent):
        raise Refused("not_found", "There is no such item in your queue.")
    return review


def _waiting(review: Review) -> bool:
    """Whether the review, read under its row lock with its state (`with_state`), waits for people now: `waiting()`
    for the row in hand, without a query of its own."""
    return review.state_now == ReviewState.WAITING


def _refuse_unless_open(review: Review) -> None:
    _refuse_if_decided(review)
    if not _waiting(review):
        raise Refused("changed", f"The item changed since it was queued, so it left the queue. {stale_reason(review)}")


def _open_claim(
    review: Review, user: AbstractBaseUser, now: datetime, *, via: str, expired: bool | None = None
) -> Claim:
    """`expired`: whether an open claim on the review ran out unrecorded, when the caller read it under the lock."""
    if expired is not False:
        for claim in Claim.objects.filter(review_id=review.pk, ended_at__isnull=True, expires_at__lte=now):
            _end_expired(claim, review, now, noticed_by=user)
    claim = Claim.objects.create(
        org_id=review.org_id, review_id=review.pk, holder=user, claimed_at=now, expires_at=now + lease_length()
    )
    audit_record(
        action="claim.create",
        org=review.org,
        actor=user,
        target=claim,
        detail={"review": review.pk, "via": via, "expires_at": claim.expires_at.isoformat()},
        item=review,
    )
    return claim


def claim_end(claim: Claim, *, end: Claim.End, now: datetime, reason: str | None = None) -> None:
    """Close a lease at `now`, saying how it ended (decided, answered, released, expired, or declined with the
    person's `reason`); the caller audits it as its act."""
    claim.ended_at, claim.end = now, end
    ended = ["ended_at", "end"]
    if reason is not None:
        claim.reason = reason
        ended.append("reason")
    claim.save(update_fields=ended)


def _end_expired(claim: Claim, review: Review, now: datetime, *, noticed_by: AbstractBaseUser) -> None:
    """Close a lease that ran out. It stopped counting at `expires_at`; this only records that it ended."""
    claim_end(claim, end=Claim.End.EXPIRED, now=now)
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
        item=review,
    )


def _held_message(claim: Claim, now: datetime) -> str:
    minutes = max(1, int((claim.expires_at - now).total_seconds() // 60))
    return f"{claim.holder.get_username()} holds this item (lease ends in {minutes} min)."


def holder_claim(review: Review, user: AbstractBaseUser, now: datetime) -> Claim:
    """The live lease `user` holds on the locked `review`, before anything is written in their name on it (a
    decision, a correction, an expected reply); Refused, saying why, when the item was decided or they hold none."""
    _refuse_if_decided(review)
    claim = Claim.objects.filter(review=review, holder=user, ended_at__isnull=True).select_related("holder").first()
    if claim is None or claim.expires_at <= now:
        raise Refused(*_why_not_holder(claim or _claim_to_explain(review.pk, user), user, now))
    return claim


def _claim_to_explain(
    review_id: int, user: AbstractBaseUser, *, reaches: Sequence[Reach] | None = None
) -> Claim | None:
    """The claim a refusal speaks of: the person's latest on the item, or else the one someone else holds."""
    claims = Claim.objects.filter(review_id=review_id).select_related("holder")
    if reaches is not None:
        claims = claims.filter(within(reaches, "review__"))
    mine = claims.filter(holder=user).order_by("-pk").first()
    return mine or claims.filter(ended_at__isnull=True).order_by("pk").first()


def _why_not_holder(claim: Claim | None, user: AbstractBaseUser, now: datetime) -> tuple[str, str]:
    if claim is None:
        return "not_claimed", "You do not hold this item: claim it first."
    if claim.holder_id == user.pk:
        if claim.end == Claim.End.DECIDED:
            return "decided", "You already decided this item."
        if claim.end == Claim.End.RELEASED:
            return "released", "You released this item: claim it again to decide."
        if claim.end == Claim.End.ANSWERED:
            return "answered", "You answered this item: claim it again to change your answer while places are open."
        if claim.end == Claim.End.DECLINED:
            return "declined", "You declined this item: claim it again to decide after all."
        if claim.ended_at is not None or claim.expires_at <= now:
            return "expired", f"Your lease expired at {claim.expires_at:%H:%M:%S} UTC: claim the item again to decide."
    elif claim.ended_at is None and claim.expires_at > now:
        return "held", f"Taken by someone else: {_held_message(claim, now)}"
    return "not_claimed", "You do not hold this item: claim it first."


# --- decisions ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DecisionResult:
    decision: Decision | None  # the item's verdict: one person's, the answers' when they agreed, or adjudicated
    answer: Answer | None = None  # one person's answer on an item several people decide
    learning_error: str | None = None  # the decision stands even when its note could not become a learning


def decision_create(
    *,
    user: AbstractBaseUser,
    review_id: int,
    fingerprint: str,
    verdict: PersonVerdict,
    keep_as_learning: bool = False,
    now: datetime | None = None,
    org_id: int | None = None,
    reaches: Sequence[Reach] | None = None,
) -> DecisionResult:
    """Record what the operator decided on the review they were shown, or refuse and write nothing.

    1. Lock the review; refuse when it was decided already, when the caller does not hold a live lease on it,
       or when `fingerprint` is not the review's (the page showed other evidence).
    2. Grading records it (refusing a review that stopped counting and a shape that does not fit): the item's
       decision (`decision_record`); on an item several people decide, this person's answer while places are
       open (`answer_record`, which decides the item when the last answer agrees with the others), and the
       adjudication once every answer is in and they differ.
    3. End the claim and record the audit event (grading tells a draft's pipeline of the decision, on commit).
    4. After commit, turn the note into an org learning if asked (an embedding call: never inside the lock).

    `reaches`: the person's operator reaches when the caller has read them already (`operator_reaches`).
    """
    now = now or timezone.now()
    verdict = replace(verdict, note=verdict.note.strip())
    if reaches is None:
        reaches = operator_reaches(user, org_id=org_id)
    with transaction.atomic():
        review = locked_review(reaches, review_id)
        if keep_as_learning and not verdict.note:
            raise Refused("invalid", "Write the note to keep it as an org learning.")
        claim = holder_claim(review, user, now)
        if fingerprint != review.fingerprint:
            raise Refused(
                "changed", f"The item changed since you opened it; nothing was recorded. {stale_reason(review)}"
            )
        answering = review_slots(review) > 1 and not slots_now(review, now).answers_in
        if answering and keep_as_learning:
            raise Refused(
                "invalid", "An answer is one of several: only the item's decision can become an org learning."
            )
        try:
            if answering:
                answered = answer_record(review_id=review.pk, person=user, answered_at=now, verdict=verdict)
                decision, answer = answered.decision, answered.answer
            else:
                decision = decision_record(review_id=review.pk, decided_by=user, decided_at=now, verdict=verdict)
                answer = None
        except InvalidDecision as exc:
            raise Refused("invalid", str(exc)) from None
        except AwaitingAnswers as exc:
            raise Refused("answers", str(exc)) from None
        except NotWaiting:
            _refuse_if_decided(review)
            raise Refused(
                "changed", f"The item changed since you opened it; nothing was recorded. {stale_reason(review)}"
            ) from None
        claim_end(claim, end=Claim.End.ANSWERED if answering else Claim.End.DECIDED, now=now)
        if answering:
            _audit_answer(review, claim, answered)
        if decision is not None:
            _audit_decision(review, claim, decision, keep_as_learning=keep_as_learning)
    learning_error = _keep_as_learning(decision) if keep_as_learning else None
    return DecisionResult(decision, answer, learning_error)


def _audit_answer(review: Review, claim: Claim, answered: Answered) -> None:
    answer = answered.answer
    replaced = {"replaced": answered.replaced} if answered.replaced else {}
    said = {"outcome": answer.outcome, "checks": answer.checks, "fingerprint": answer.fingerprint,
            "slots": answer.slots, **replaced}  # fmt: skip
    _audit_said("answer.replace" if answered.replaced else "answer.create", review, claim, answer, said)


def _audit_decision(review: Review, claim: Claim, decision: Decision, *, keep_as_learning: bool) -> None:
    said = {"kind": review.kind, "basis": decision.basis, "outcome": decision.outcome, "checks": decision.checks,
            "fingerprint": review.fingerprint, "criteria_version": review.criteria_version.number,
            "keep_as_learning": keep_as_learning}  # fmt: skip
    _audit_said("decision.create", review, claim, decision, said)


def _audit_said(action: str, review: Review, claim: Claim, target: Answer | Decision, said: dict) -> None:
    """What the claim's holder answered or decided on the review, as an audit event of its item."""
    detail = {"review": review.pk, "claim": claim.pk, **said}
    audit_record(action=action, org=review.org, actor=claim.holder, target=target, detail=detail, item=review)


def _refuse_if_decided(review: Review) -> None:
    decided = Decision.objects.filter(review=review).select_related("decided_by").first()
    if decided is not None:
        if decided.basis == Decision.Basis.AGREED:
            by = "the answers, which agreed"
        else:
            by = decided.decided_by.get_username() if decided.decided_by else "someone"
        raise Refused("decided", f"This item was already decided ({decided.get_outcome_display()}) by {by}.")


def _keep_as_learning(decision: Decision) -> str | None:
    """Store the note as an org learning and link it to the decision; a failure leaves the decision standing."""
    try:
        decision_learning_keep(decision=decision)
    except Exception as exc:  # an embeddings backend that is down must not undo a decision
        logger.warning("decision %s: the note could not become an org learning: %s", decision.pk, exc)
        return f"The decision is recorded, but the note could not be kept as an org learning ({exc})."
    return None


# --- a person's own settings ------------------------------------------------------------------------------------


def preferences_of(user: AbstractBaseUser) -> Preferences:
    """The person's settings: the defaults until they change one."""
    return Preferences.objects.filter(user_id=user.pk).first() or Preferences(user_id=user.pk)


def preferences_set(*, user: AbstractBaseUser, next_after_decision: bool) -> Preferences:
    preferences, _ = Preferences.objects.update_or_create(
        user_id=user.pk, defaults={"next_after_decision": next_after_decision}
    )
    return preferences

"""Writing reviews of either kind and their state: what a review's stored state is, decided here for every write
that changes it (a review recorded, superseded or gone stale, reinstated, marked for audit, decided) and for both
INSERTs (`review_record`, the item's live review; `trial_review_record`, a trial's, with its own state). They are
sent by grading/reviews/sql.py (`review_insert`, `review_state_write`), which only this module calls, with the
rollups booked around each. The identity constraint makes a second review of the same evidence impossible.

A grader hands a review over as two typed objects: its `ScoreIdentity` (what was read, by which judge, under which
criteria) and its `ReviewOutcome` (what grading came to). A person's decision or answer comes as a `PersonVerdict`.
"""

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import lru_cache

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone

from grading.checks.answers import answers_refusal, item_outcome
from grading.checks.definitions import CheckSet
from grading.checks.routing import routing_match, routing_salt
from grading.checks.rules import DraftRules
from grading.core.errors import FieldRefused
from grading.core.outcomes import SENT_BY_PERSON
from grading.core.weeks import monday
from grading.delivery import enqueue
from grading.delivery.evaluations import evaluations_export_on_commit
from grading.judge.pass_probability import item_pass_probability, review_pass_probability
from grading.models import (
    COUNTING_STATES,
    DECIDED_ALONE,
    LIVE_STATES,
    UNGRADED,
    Answer,
    ApiKey,
    Conversation,
    CriteriaVersion,
    Decision,
    Draft,
    Feedback,
    ItemKind,
    Review,
    ReviewState,
)
from grading.models import for_people as is_for_people
from grading.models.audit import audit_record
from grading.models.criteria import ANSWERED_CANNOT_ADJUDICATE, answers_stand, may_adjudicate
from grading.models.reviews import ReviewQuerySet
from grading.reviews.reads import review_slots
from grading.reviews.rollups import SpendEntry, rollups_tracking
from grading.reviews.spend import spend_book, spend_entry, utc_day
from grading.reviews.sql import (
    filing_lock,
    review_id_with_identity,
    review_insert,
    review_state_write,
    statements_pipelined,
)
from grading.reviews.targets import due_time, targets_of
from grading.reviews.versions import criteria_active


@dataclass(frozen=True)
class ScoreIdentity:
    """What a review read and who read it. Two finished reviews of one item with the same identity are one grading:
    the identity constraint on `Review` refuses the second (errors and trials are exempt)."""

    fingerprint: str  # of the evidence the judge read (grading/core/evidence.py)
    criteria_version: CriteriaVersion
    judge: dict  # the judge as recorded: its name, backend, model, prompt-template hash, sampling settings
    judge_key: str  # a hash of `judge`: what the constraint compares
    criteria_fingerprint: str = ""  # of what the judge read of the criteria: rubric, rules and examples
    memory_snapshot: str = ""  # drafts: the org memory the judge read


@dataclass(frozen=True)
class ReviewOutcome:
    """What grading an item came to, as its review keeps it: the route and why, and what the judge and the checks
    said. A conversation's fills `checks`; a draft's the scores, the findings, the repairs and the memory read (and
    `checks` for a draft version's verdict and category checks). The defaults are the review's own (`Review`), so an
    outcome states only what its grading found."""

    route: str  # Route
    reason: str = ""  # a code: why humans, why not scorable, what failed (grading/core/outcomes.py)
    detail: str = ""
    stages: int = 0  # judge calls: the slices of a conversation's path, one for a draft
    usage: dict = field(default_factory=dict)  # the judge's token counts, as the judge client reports them
    # Per check key: its answer ("verdict"), the message ids behind it (a draft's: "quotes") and the rationale; a check
    # a rule matched adds "source": "rule" and the rule's "findings" (grading/checks/conversation_rules.py).
    checks: dict = field(default_factory=dict)
    score: float | None = None
    judge_score: float | None = None
    judge_passed: bool | None = None
    spread: float | None = None
    sub_scores: dict = field(default_factory=dict)
    findings: list = field(default_factory=list)
    judge_issues: list = field(default_factory=list)
    repairs: dict | None = None
    memory_used: dict = field(default_factory=dict)
    # Per check key (a draft's verdict: pass_fail), the probability the judge gave the answer that stands; and where
    # that came from: "logprobs", or "" with none (grading/judge/confidence.py). The certificate the item was routed
    # under (grading/certify/routing.py; None: the fixed bands routed it).
    confidences: dict = field(default_factory=dict)
    confidence_source: str = ""
    certificate_id: int | None = None


def _columns(identity: ScoreIdentity, outcome: ReviewOutcome) -> dict:
    """The review's columns the identity and the outcome fill (shallow: the frozen objects are not copied), and the
    judge's probability that the item passes, which they decide (`item_pass_probability`)."""
    version = identity.criteria_version
    probability = item_pass_probability(
        kind=version.kind,
        checks=published_check_set(version) if version.kind == ItemKind.CONVERSATION else None,
        route=outcome.route,
        judge_passed=outcome.judge_passed,
        answers=outcome.checks,
        confidences=outcome.confidences,
    )
    return vars(identity) | vars(outcome) | {"pass_probability": probability}


def earlier_review(*, subject: Conversation | Draft, identity: ScoreIdentity) -> Review | None:
    """What a grader asks before judging: `review_with_identity`, unless the subject as `subject_to_grade` read it
    says no finished review ever read its evidence (`evidence_reviewed`) and the identity names that evidence: the
    first grading of new evidence, nearly every grading, then costs no query."""
    if identity.fingerprint == subject.fingerprint and not subject.evidence_reviewed:
        return None
    return review_with_identity(subject=subject, identity=identity)


def review_with_identity(*, subject: Conversation | Draft, identity: ScoreIdentity) -> Review | None:
    """The finished, non-error review of `subject` with this score identity, if there is one. Trial reviews
    are not: they stand for no grading of the item (ReviewState.TRIAL)."""
    # Asked before every judge call and nearly always absent: ask for the id alone (the identity constraint
    # allows at most one, so there is nothing to order), and read the whole review only when there is one.
    # The judge is compared by its key; a conversation's identity has no memory.
    match = {
        "fingerprint": identity.fingerprint,
        "criteria_version": identity.criteria_version.pk,
        "judge_key": identity.judge_key,
    }
    if isinstance(subject, Draft):
        match["memory_snapshot"] = identity.memory_snapshot
    pk = review_id_with_identity(subject, match)
    return None if pk is None else Review.objects.filter(pk=pk).first()  # None too when erased since


# --- the criteria a grader applies ------------------------------------------------------------------------------


_SUBJECT_KINDS = {Conversation: ItemKind.CONVERSATION, Draft: ItemKind.DRAFT}


def criteria_of(subject: Conversation | Draft) -> CriteriaVersion:
    """The criteria a grader applies to a subject read by `subject_to_grade`: the active version it named, as
    `criteria_active` gives it.

    Only which version is active, and its revision, is asked each time. A published version never changes
    (criteria_update refuses, and it is published before it can be active) but for an erasure taking one of its
    examples, which moves its revision on: so it is read once per process and revision.
    """
    if subject.active_criteria_id is None:
        return criteria_active(org=subject.org, kind=_SUBJECT_KINDS[type(subject)])  # seeds v1, or says why not
    return _published_version(subject.active_criteria_id, subject.active_criteria_revision)


def published_draft_rules(version: CriteriaVersion) -> DraftRules:
    """`version.draft_rules()`, validated once per process for a published version (read-only: shared)."""
    return _published_rules(version.pk, version.revision) if version.published_at is not None else version.draft_rules()


def published_check_set(version: CriteriaVersion) -> CheckSet:
    """`version.check_set()`, validated once per process for a published version (frozen: shared)."""
    return _published_checks(version.pk, version.revision) if version.published_at is not None else version.check_set()


# Versions are few (a handful per org and kind) and small; a process keeps the recent ones.
@lru_cache(maxsize=256)
def _published_version(pk: int, revision: int) -> CriteriaVersion:
    return CriteriaVersion.objects.get(pk=pk, published_at__isnull=False)


@lru_cache(maxsize=256)
def _published_checks(pk: int, revision: int) -> CheckSet:
    return _published_version(pk, revision).check_set()


@lru_cache(maxsize=256)
def _published_rules(pk: int, revision: int) -> DraftRules:
    return _published_version(pk, revision).draft_rules()


# --- the stored state: every write that changes what a review is worth goes through here --------------------


def _stored_state(*, matches_item: bool, for_people: bool, decided: bool) -> ReviewState:
    """The state of an item's latest review, as far as the item and the decisions go (ReviewState says what
    is read when asked instead). `for_people`: see `grading.models.for_people`."""
    if not matches_item:
        return ReviewState.STALE
    if for_people:
        return ReviewState.DECIDED if decided else ReviewState.WAITING
    return ReviewState.CURRENT


def review_record(
    *,
    subject: Conversation | Draft,
    identity: ScoreIdentity,
    outcome: ReviewOutcome,
    started_at: datetime,
    ticket: str = "",
) -> Review | None:
    """Write a finished review as the subject's latest, in one short transaction, with its state.

    1. Lock the subject's row: writers of one subject are serialised, so one review ends up live.
    2. A grader that read evidence the item no longer has (or criteria no longer active) cannot write a
       review that counts: its review is stale, or, if the item was graded again meanwhile and that review
       counts, history at once (superseded), so it never displaces the review that matches.
    3. Otherwise the previous live review is superseded and this one takes its place.
    If another worker wrote this identity first (the same task delivered twice), the constraint refuses ours
    and theirs is kept. The review is filed for the dashboards as the item stands (application, week, when its
    evidence arrived), and the rollups are booked in the same transaction. So is the item's ticket, when the
    grading task `ticket` still holds it (grading/reviews/inflight.py): a written review and an item still owed one
    never coexist, and the task has no statement left to send for it (`Review.ticket_returned` says so).
    An item erased since the grader read it (grading/erasure) gets nothing: the lock of step 1 waits for the
    erasure's commit and finds no row, so no review, no counter and no export is written, and None is returned.
    """
    field = _subject_field(subject)
    try:
        # Pipelined: the counters' and the ledger's upsert (one statement), last, goes out with the COMMIT
        # (statements_pipelined).
        with statements_pipelined(), transaction.atomic():
            # Only what the review is filed by and the live review's id are needed: reading whole rows (a
            # draft's body, a conversation's evidence state, thirty columns of review) would be most of this
            # block's CPU.
            item, criteria_active, ticket_returned, live = filing_lock(subject, identity.criteria_version.pk, ticket)
            matches = identity.fingerprint == item["fingerprint"]
            fresh = matches and criteria_active
            sent = ""  # a routing rule of the version that sends it to people whatever the machine decided
            with rollups_tracking([live]) as tracked:
                if not fresh and live is not None and Review.objects.counting().filter(pk=live).exists():
                    state = ReviewState.SUPERSEDED
                else:
                    if live is not None:
                        review_state_write(live, ReviewState.SUPERSEDED)
                    if fresh and outcome.route in DECIDED_ALONE:
                        sent = _rule_sending(identity.criteria_version, subject)
                    for_people = is_for_people(route=outcome.route, audit=False, sent=sent)  # or marked later
                    state = _stored_state(matches_item=matches, for_people=for_people, decided=False)
                finished_at = timezone.now()
                kind = ItemKind.DRAFT if field == "draft" else ItemKind.CONVERSATION
                filing = _filing(field, item, finished_at, dimensions=subject.org.dimensions)
                routed_at = due_at = None
                if state == ReviewState.WAITING:  # routed to people now: when they owe a decision
                    routed_at = finished_at
                    due_at = due_time(
                        targets_of(subject.org_id), kind=kind, application=filing["application"],
                        reason=outcome.reason, audit=False, routed_at=finished_at,
                    )  # fmt: skip
                review = review_insert(
                    tracked,
                    org=subject.org,
                    kind=kind,
                    **{field: subject},
                    started_at=started_at,
                    finished_at=finished_at,
                    state=state,
                    routed_at=routed_at,
                    due_at=due_at,
                    sent=sent,
                    **filing,
                    **_columns(identity, outcome),
                )
                # Booked last, after the counters and in their statement: the ledger's row is the org's hottest, so
                # its lock is held the shortest.
                tracked.spend = _spend_entry(subject, identity, outcome, finished_at)
            if state in COUNTING_STATES:
                evaluations_export_on_commit(review_id=review.pk)
            review.ticket_returned = ticket_returned
            return review
    except IntegrityError:
        # Another delivery of the task wrote this identity first; the judge was paid for ours all the same.
        _spend_book_alone(subject, identity, outcome)
        return review_with_identity(subject=subject, identity=identity)
    except type(subject).DoesNotExist:
        # Erased while the judge read it: the ledger still books what the judge was paid (it names no item).
        _spend_book_alone(subject, identity, outcome)
        return None


def _rule_sending(version: CriteriaVersion, subject: Conversation | Draft) -> str:
    """The code of the version's first routing rule the item matches, "" for none (grading/checks/routing.py): its
    metadata as it is now, and for a conversation a user's thumbs down on a message of its present path (the one the
    review read: the caller asks only for a review of the item's present evidence). Reads nothing without rules."""
    if not version.routing:
        return ""
    salt = routing_salt(subject.org_id)
    if isinstance(subject, Draft):
        metadata, external_id = Draft.objects.filter(pk=subject.pk).values_list("metadata", "external_id").get()
        return routing_match(version.routing, metadata=metadata, thumbs_down=False, external_id=external_id, salt=salt)
    metadata, path, external_id = (
        Conversation.objects.filter(pk=subject.pk).values_list("metadata", "active_path_ids", "external_id").get()
    )
    thumbs_down = Feedback.objects.filter(
        conversation_id=subject.pk, value=Feedback.Value.DOWN, message_external_id__in=path
    ).exists()
    return routing_match(
        version.routing, metadata=metadata, thumbs_down=thumbs_down, external_id=external_id, salt=salt
    )


def _spend_book_alone(subject: Conversation | Draft, identity: ScoreIdentity, outcome: ReviewOutcome) -> None:
    """Book what the judge was paid for a grading whose review was not written, on today's UTC day."""
    spend_book(_spend_entry(subject, identity, outcome, timezone.now()))


def _spend_entry(
    subject: Conversation | Draft, identity: ScoreIdentity, outcome: ReviewOutcome, at: datetime
) -> SpendEntry | None:
    """What the judge was paid for this grading, booked on the UTC day of `at`."""
    return spend_entry(org_id=subject.org_id, version=identity.criteria_version, route=outcome.route,
                       usage=outcome.usage, calls=outcome.stages, day=utc_day(at))  # fmt: skip


def _filing(field: str, item: dict, finished_at: datetime, *, dimensions: Sequence[str]) -> dict:
    """Where the dashboards file a review: conversations by application and the ISO week they started, drafts by
    the week of their verdict; under the item's values of the org's dimensions (its slice); and when the evidence
    it read arrived."""
    metadata = item["metadata"]  # read by plain SQL: jsonb arrives as text
    metadata = json.loads(metadata) if isinstance(metadata, str) else metadata
    metadata = metadata if isinstance(metadata, dict) else {}
    filed_under = {"slice": {name: metadata[name] for name in dimensions if name in metadata}}
    if field == "draft":
        return {"application": "", "week": monday(finished_at), "submitted_at": item["updated_at"], **filed_under}
    return {
        "application": item["application"],
        "week": monday(item["started_at"]),
        "submitted_at": item["last_activity_at"],
        **filed_under,
    }


def trial_review_record(
    *, subject: Conversation | Draft, identity: ScoreIdentity, outcome: ReviewOutcome, started_at: datetime
) -> Review:
    """Write a trial review (grading/criteria/trials.py): the whole identity, the outcome, the state `trial`. It
    touches no other review and sends nothing anywhere (no webhook, no evaluation export); the rollups count
    nothing of it, by their own rule for the state. Its judge usage is booked in the spend ledger like any review's,
    in the caller's transaction."""
    field = _subject_field(subject)
    with rollups_tracking() as tracked:
        review = review_insert(
            tracked,
            org_id=subject.org_id,
            kind=_SUBJECT_KINDS[type(subject)],
            **{field: subject},
            started_at=started_at,
            finished_at=timezone.now(),
            state=ReviewState.TRIAL,
            **_columns(identity, outcome),
        )
        tracked.spend = _spend_entry(subject, identity, outcome, review.finished_at)
    return review


def review_state_refresh(*, subject: Conversation | Draft) -> None:
    """Keep the subject's reviews true to its fingerprint, after the subject was written. Call it in the
    transaction that wrote the subject, with its row locked (an append, an edit, a resubmit).

    1. The live review still reads the subject's evidence: its state follows its route and decision.
    2. The evidence moved to content an earlier review already read under the active criteria (a branch
       switched back, an edit undone): the newest such review counts again, with no judge call.
    3. Otherwise the live review is stale, in the same commit, until the item is graded again.
    """
    field = _subject_field(subject)
    live = _live_review(field, subject.pk)
    if live is None or live.fingerprint != subject.fingerprint:
        earlier = (
            Review.objects.select_for_update()
            .filter(**{field: subject.pk}, fingerprint=subject.fingerprint, criteria_version__is_active=True)
            .exclude(state=ReviewState.TRIAL)
            .order_by("-finished_at", "-pk")
            .first()
        )
        if earlier is None:
            if live is not None:
                _set_state(live, ReviewState.STALE)
            return
        if live is not None:
            _set_state(live, ReviewState.SUPERSEDED)
        live = earlier
    for_people = is_for_people(route=live.route, audit=live.audit, sent=live.sent)
    decided = for_people and Decision.objects.filter(review=live).exists()
    _set_state(live, _stored_state(matches_item=True, for_people=for_people, decided=decided))


def review_states_refresh(*, subjects: Sequence[Conversation]) -> None:
    """`review_state_refresh` for several conversations written in one transaction, their rows locked: one
    statement finds which of them have reviews at all, and only those are refreshed (one without a review has
    nothing to keep true, and none can be written while its row is locked)."""
    if not subjects:
        return
    reviewed = set(
        Review.objects.filter(conversation_id__in=[subject.pk for subject in subjects])
        .values_list("conversation_id", flat=True)
        .distinct()
    )
    for subject in subjects:
        if subject.pk in reviewed:
            review_state_refresh(subject=subject)


def _set_state(review: Review, state: ReviewState) -> None:
    """Change a review's stored state, booking what that changes in the rollups."""
    if review.state != state:
        with rollups_tracking([review.pk]):
            review_state_write(review.pk, state)
        review.state = state


def review_audit_mark(*, review_ids: list[int]) -> list[int]:
    """Send counting reviews to people as audit items, whatever the machine decided; return the ids newly marked.

    An audit item waits for a person like any item routed to humans (its stored state says so), and its page
    hides the machine's verdict until the person decided. Reviews that stopped counting, and reviews marked
    before, are left alone: marking twice changes nothing.
    """
    marked = []
    with transaction.atomic():
        reviews = (
            Review.objects.counting()
            .select_for_update(of=("self",))
            .filter(pk__in=list(review_ids), audit=False)
            .exclude(route__in=UNGRADED)
            .order_by("pk")
        )
        targets = {}
        now = timezone.now()
        for review in reviews:
            with rollups_tracking([review.pk]):
                decided = Decision.objects.filter(review=review).exists()
                state = _stored_state(matches_item=True, for_people=True, decided=decided)
                review_state_write(review.pk, state, audit=True)
            if state == ReviewState.WAITING:  # routed to people now, as an audit item
                org_targets = targets.setdefault(review.org_id, targets_of(review.org_id))
                due_at = due_time(org_targets, kind=review.kind, application=review.application, reason=review.reason,
                                  audit=True, routed_at=now)  # fmt: skip
                Review.objects.filter(pk=review.pk).update(routed_at=now, due_at=due_at)
            marked.append(review.pk)
    return marked


def pass_probabilities_backfill(*, org_id: int) -> int:
    """Give the org's reviews that the judge graded with no pass probability theirs, booking what that adds to the
    counters; return how many. Only a worker still on the code from before the probability was stored writes such a
    review: during an upgrade, between the migration and the workers' restart. The certified panel weighs no such
    review, and the rebuild, counting from the same rows, finds nothing amiss: so the beat's rebuild task asks this
    too, every hour (the index `review_unweighed` holds only such reviews, none at all out of an upgrade)."""
    with transaction.atomic():
        reviews = list(
            Review.objects.select_for_update(of=("self",))
            .filter(org_id=org_id, pass_probability__isnull=True)
            .exclude(route__in=UNGRADED)
            .select_related("criteria_version")
            .order_by("pk")
        )
        if not reviews:
            return 0
        with rollups_tracking([review.pk for review in reviews]):
            for review in reviews:
                review.pass_probability = review_pass_probability(review)
            Review.objects.bulk_update(reviews, ["pass_probability"])
    return len(reviews)


class SendRefused(FieldRefused):
    """A send to people that cannot be: `field` names what to change, the message says why. Nothing was written."""


SEND_REASON_MAX = 500  # characters: a sentence or two, shown in the item's trail


def send_reason_clean(reason: str) -> str:
    """The reason a person gives for sending items to people, stripped: refused when empty or too long."""
    reason = reason.strip()
    if not reason:
        raise SendRefused("reason", "Say why you send it to review.")
    if len(reason) > SEND_REASON_MAX:
        raise SendRefused("reason", f"The reason is {len(reason)} characters long; at most {SEND_REASON_MAX}.")
    return reason


def review_send(
    *, review_ids: list[int], reason: str, by: AbstractBaseUser | None = None, api_key: ApiKey | None = None
) -> list[int]:
    """A person (or an org's key, for one) sends counting reviews to people whatever the machine decided, with a
    reason; return the ids newly sent.

    Like the audit mark it changes who decides the item, never what the machine said: the route and its reason stay
    as graded, `sent` says a person sent it, and the trail keeps who and why (a `review.send` event per review, naming
    its item). Unlike the audit sample, a sent item is not blind (the sender chose it for what they saw) and its
    decision is no part of the sample the judge is measured on. Reviews already for people (routed there, sampled or
    sent before), that stopped counting, errors and items the machine could not score are left alone.
    """
    reason = send_reason_clean(reason)
    sent = []
    with transaction.atomic():
        reviews = _sendable(
            Review.objects.filter(pk__in=list(review_ids)).select_related("org", "conversation", "draft")
        )
        targets = {}
        now = timezone.now()
        for review in reviews:
            org_targets = targets.setdefault(review.org_id, targets_of(review.org_id))
            _send_write(review, sent=SENT_BY_PERSON, targets=org_targets, now=now)
            audit_record(action="review.send", org=review.org, actor=by, api_key=api_key, item=review,
                         detail={"reason": reason})  # fmt: skip
            sent.append(review.pk)
    return sent


def _sendable(reviews: ReviewQuerySet) -> list[Review]:
    """Those of the reviews that may be sent to people (`Review.sendable`), locked, by id."""
    locked = reviews.filter(state__in=COUNTING_STATES).with_state().select_for_update(of=("self",)).order_by("pk")
    return [review for review in locked if review.sendable]


def _send_write(review: Review, *, sent: str, targets: list, now: datetime) -> None:
    """Send one locked, sendable review to people now: waiting, `sent` saying who sent it, due by the targets."""
    with rollups_tracking([review.pk]):
        review_state_write(review.pk, ReviewState.WAITING)
    due_at = due_time(targets, kind=review.kind, application=review.application, reason=review.reason, audit=False,
                      routed_at=now)  # fmt: skip
    Review.objects.filter(pk=review.pk).update(sent=sent, routed_at=now, due_at=due_at)


def review_rules_send(*, conversation: Conversation) -> Review | None:
    """A user's thumbs came after the conversation was graded: send its counting review to people if a routing rule
    of its version matches now, as `review_record` does at grading (the rule's code in `sent`); the review sent, or
    None. In the caller's transaction, the conversation's row locked."""
    sendable = _sendable(Review.objects.filter(conversation=conversation).select_related("criteria_version"))
    review = sendable[0] if sendable else None
    if review is None or not review.criteria_version.routing:
        return None
    sent = _rule_sending(review.criteria_version, conversation)
    if not sent:
        return None
    _send_write(review, sent=sent, targets=targets_of(review.org_id), now=timezone.now())
    return review


def review_reinstate(*, review: Review) -> Review | None:
    """A grader found a review of exactly the evidence it was about to judge: make it the subject's live one
    (it may have been replaced by a review of other evidence since) rather than call the judge again. None when
    the item was erased meanwhile (its reviews with it)."""
    model, pk = (Draft, review.draft_id) if review.kind == ItemKind.DRAFT else (Conversation, review.conversation_id)
    with transaction.atomic():
        subject = model.objects.select_for_update().filter(pk=pk).first()
        if subject is None:
            return None
        review_state_refresh(subject=subject)
    review.refresh_from_db(fields=["state"])
    return review


def _live_review(field: str, subject_id: int) -> Review | None:
    return Review.objects.select_for_update().filter(**{field: subject_id}, state__in=LIVE_STATES).first()


class NotWaiting(Exception):
    """The review is not waiting for a person (decided already, or it stopped counting); nothing was written."""


class InvalidDecision(Exception):
    """A decision that does not fit the review's kind; the message says what to give. Nothing was written."""


class AwaitingAnswers(Exception):
    """The review asks several people and not all of them have answered (`answer_record` takes their answers);
    or, for `answer_record`, every slot is answered and the item waits for its adjudication. Nothing was written."""


DRAFT_OUTCOMES = (Decision.Outcome.APPROVE, Decision.Outcome.REJECT, Decision.Outcome.SEND_BACK)
NOTE_REQUIRED = (Decision.Outcome.REJECT, Decision.Outcome.SEND_BACK)


@dataclass(frozen=True)
class PersonVerdict:
    """What a person says of an item, as a decision or an answer keeps it: a draft's outcome, or a conversation's
    answer to each check (its outcome is then summarised from them, `_verdict_fitted`); and the note."""

    outcome: str = ""  # Decision.Outcome
    checks: dict[str, str] | None = None  # check key -> pass, fail or unknown (grading/checks/answers.py)
    note: str = ""


def decision_record(
    *, review_id: int, decided_by: AbstractBaseUser, decided_at: datetime, verdict: PersonVerdict
) -> Decision:
    """Record a person's decision on a review waiting for one, and mark the review decided.

    1. Drafts take an outcome (a note for reject and send back); conversations an answer to every check of the
       review's criteria version (grading/checks/answers.py) and a note, summarised as the machine's outcome would
       be: fail if a required check's answer fails, else unknown if one is unknown, else pass.
    2. The review must be waiting at the moment of writing: evidence and criteria still current, undecided.
    3. A review several people decide takes this only as its adjudication: after every slot was answered and the
       answers differed (AwaitingAnswers before), from someone who gave none of them, with a note saying why.
    Runs inside the caller's transaction when there is one (the people side checks the lease under the same
    row lock first).
    """
    with transaction.atomic():
        review, fitted = _waiting_review(review_id, verdict)
        basis = Decision.Basis.ONE
        slots = review_slots(review)
        if slots > 1:
            answered_by = list(Answer.objects.filter(review_id=review_id).values_list("person_id", flat=True))
            if not answers_stand(slots=slots, answered=len(answered_by)):
                raise AwaitingAnswers(
                    f"{len(answered_by)} of {slots} people have answered; it is not for adjudication yet."
                )
            if not may_adjudicate(slots=slots, answered_by=answered_by, person_id=decided_by.pk):
                raise InvalidDecision(ANSWERED_CANNOT_ADJUDICATE)
            if not fitted.note:
                raise InvalidDecision("Say why, in the note: the adjudication settles answers that differed.")
            basis = Decision.Basis.ADJUDICATED
        decision = _decision_write(review, fitted, basis=basis, decided_by=decided_by, decided_at=decided_at)
    return decision


def decision_as_corrected_record(
    *, review_id: int, decided_by: AbstractBaseUser, decided_at: datetime, basis: str, note: str
) -> Decision:
    """Approve the gate's review of a corrected draft for the person who corrected it (grading/drafts/corrections.py
    settles the correction so when no hard check fails). They decided before this review existed, on the authority
    they had on the review they corrected (`basis`: the one person's, or the adjudicator's), so no answers are asked
    of this one. Like `decision_record`, only a review still waiting, inside the caller's transaction."""
    with transaction.atomic():
        review, fitted = _waiting_review(review_id, PersonVerdict(outcome=Decision.Outcome.APPROVE, note=note))
        return _decision_write(review, fitted, basis=basis, decided_by=decided_by, decided_at=decided_at)


def _waiting_review(review_id: int, verdict: PersonVerdict) -> tuple[Review, PersonVerdict]:
    """Lock the review and fit what a person said to it (`_verdict_fitted`); refuse a shape that does not fit
    (InvalidDecision) and a review no longer waiting for a person (NotWaiting). Inside the caller's transaction."""
    # The statement locks the criteria version's row as well as the review's (no `of`), so what both say holds until
    # commit: whether the review waits is decided from the row in hand (`state_now`), with no second query.
    review = Review.objects.with_state().select_for_update().filter(pk=review_id).first()
    if review is None:
        raise NotWaiting(review_id)
    fitted = _verdict_fitted(review, verdict)
    if review.state_now != ReviewState.WAITING:
        raise NotWaiting(review_id)
    return review, fitted


def _decision_write(
    review: Review, verdict: PersonVerdict, *, basis: str, decided_by: AbstractBaseUser | None, decided_at: datetime
) -> Decision:
    """Write the item's human verdict and mark the review decided, in the caller's transaction (review row locked).
    Every decision is written here, whoever gives it: so here, once it commits, the evaluation export is sent and a
    draft's pipeline told (a webhook, when the draft names a callback URL)."""
    with rollups_tracking([review.pk]):
        try:
            with transaction.atomic():
                decision = Decision.objects.create(
                    org_id=review.org_id,
                    review=review,
                    basis=basis,
                    outcome=verdict.outcome,
                    checks=verdict.checks,
                    note=verdict.note,
                    decided_by=decided_by,
                    decided_at=decided_at,
                )
        except IntegrityError:  # the constraint is the last line: a concurrent decision got in first
            raise NotWaiting(review.pk) from None
        review_state_write(review.pk, ReviewState.DECIDED)
    evaluations_export_on_commit(review_id=review.pk, decision_id=decision.pk)
    if review.kind == ItemKind.DRAFT and Draft.objects.filter(pk=review.draft_id).exclude(callback_url="").exists():
        transaction.on_commit(lambda: enqueue.webhook_delivery(review_id=review.pk, event=enqueue.HUMAN_DECISION))
    return decision


@dataclass(frozen=True)
class Answered:
    answer: Answer
    replaced: dict | None  # the person's earlier answer on the item, as it was: the audit trail keeps it
    decision: Decision | None  # the item's verdict, when this answer filled the last slot and every answer agreed


def answer_record(
    *, review_id: int, person: AbstractBaseUser, answered_at: datetime, verdict: PersonVerdict
) -> Answered:
    """Record one person's answer on a review several people decide, kept apart from the others'.

    1. The answer takes the shape of a decision (the same rules), about the review's evidence (its fingerprint).
    2. The review must be waiting with a slot open, or with the person's own answer to replace: once every slot
       is answered, the answers stand (AwaitingAnswers: the item waits for its adjudication, or was decided).
    3. The answer that fills the last slot decides the item when every answer agrees (on the outcome, and on
       each check): the agreed verdict, by no one person. Answers that differ leave it waiting for adjudication
       (`decision_record`). Nothing counts as the item's human verdict before either.
    """
    with transaction.atomic():
        review, fitted = _waiting_review(review_id, verdict)
        slots = review_slots(review)
        answers = {a.person_id: a for a in Answer.objects.filter(review_id=review_id).order_by("pk")}
        if answers_stand(slots=slots, answered=len(answers)):
            raise AwaitingAnswers("Every slot is answered: the answers stand, and the item waits for its adjudication.")
        mine = answers.get(person.pk)
        replaced = None
        with rollups_tracking([review_id]):
            if mine is None:
                mine = Answer(org_id=review.org_id, review=review, person=person, fingerprint=review.fingerprint)
            else:
                replaced = {"outcome": mine.outcome, "checks": mine.checks, "note": mine.note,
                            "answered_at": mine.answered_at.isoformat()}  # fmt: skip
            mine.outcome, mine.checks, mine.note = fitted.outcome, fitted.checks, fitted.note
            mine.answered_at, mine.slots = answered_at, slots
            mine.save()
        answers[person.pk] = mine
        decision = None
        if len(answers) == slots and len({(a.outcome, _sorted(a.checks)) for a in answers.values()}) == 1:
            notes = "\n\n".join(a.note for a in answers.values() if a.note)
            decision = _decision_write(review, replace(fitted, note=notes), basis=Decision.Basis.AGREED,
                                       decided_by=None, decided_at=answered_at)  # fmt: skip
    return Answered(mine, replaced, decision)


def _sorted(checks: dict) -> tuple:
    return tuple(sorted(checks.items()))


def _verdict_fitted(review: Review, verdict: PersonVerdict) -> PersonVerdict:
    """The verdict as the review's kind keeps it, or InvalidDecision saying what to give: a draft's outcome and no
    checks; a conversation's answer to every check of the review's version, and the outcome they come to."""
    outcome, checks, note = verdict.outcome, verdict.checks or {}, verdict.note
    if review.kind == ItemKind.DRAFT:
        if outcome not in DRAFT_OUTCOMES:
            raise InvalidDecision("Choose approve, reject or send back.")
        if outcome in NOTE_REQUIRED and not note:
            raise InvalidDecision(f"A note is required to {Decision.Outcome(outcome).label}.")
        return PersonVerdict(outcome=outcome, checks={}, note=note)
    check_set = review.criteria_version.check_set()
    if refusal := answers_refusal(check_set, checks):
        raise InvalidDecision(f"checks: {refusal}.")
    if not note:
        raise InvalidDecision("A note is required with a verdict: say what the evidence shows.")
    # Only the version's checks are kept (jsonb keeps keys in an order of its own; readers follow the version's).
    kept = {key: checks[key] for key in check_set.keys}
    return PersonVerdict(outcome=item_outcome(check_set, checks).value, checks=kept, note=note)


def _subject_field(subject: Conversation | Draft) -> str:
    return "draft" if isinstance(subject, Draft) else "conversation"

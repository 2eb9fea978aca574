"""The queue over the API. Assignment (`/api/v1/conversations/{id}/assignment`, `/api/v1/drafts/{id}/assignment`): an
org's key, or a lead's personal token within the lead's reach, reads, sets or clears who may claim the item's waiting
review first, as a lead does from the item page. Sending to review (`.../send-to-review`): the item's counting review
goes to people whatever the machine decided, with a reason, as a lead does from a list. Every change is audited under
the key or the person.

The queue's own work (`/api/v1/queue`, claims, decisions) is a person's: under a personal token only (an org key is
refused with a 403 that says so, since a decision names who made it), through the services and rules the pages use
(reviewer/queue/services.py), in the token's org and the person's reach there."""

from datetime import datetime
from typing import Annotated

from django.contrib.auth.models import AbstractBaseUser
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from ninja import Query, Router, Schema, Status
from ninja.errors import HttpError, ValidationError

from grading.api.errors import AUTH_ERRORS, ConflictOut, ErrorOut, FieldErrorsOut
from grading.api.keys import caller_reach
from grading.core.schemas import ConversationId, Identifier, Storable, ZonedTime
from grading.core.weeks import iso_week
from grading.dashboard.figures import InvalidScope, scope_for
from grading.models import UNGRADED, Conversation, Draft, ItemKind, Review, for_people
from grading.models.reach import Reach
from grading.reviews.services import SendRefused, review_send
from reviewer.access import people_of, reaches_of
from reviewer.dashboards.service import service_figures
from reviewer.models import Claim, Pool, Role
from reviewer.queue.assignments import InvalidAssignment, assignment_clear, assignment_set, reservation_of
from reviewer.queue.display import queue_page
from reviewer.queue.forms import (
    ConversationDecisionForm,
    DecisionForm,
    DeclineForm,
    QueueFilterForm,
    decided,
    decision_form,
)
from reviewer.queue.reads import PAGE_SIZE, QueueFilters, operator_reaches, review_for_operator
from reviewer.queue.sending import SENDER_ROLES
from reviewer.queue.services import Refused, claim_decline, claim_next, claim_release, claim_take, decision_create

router = Router(tags=["queue"])


class AssignmentIn(Schema):
    person: Identifier | None = None  # a username
    pool: Identifier | None = None  # a pool's name
    until: ZonedTime | None = None  # empty: reserved for as long as the item waits


class AssignmentOut(Schema):
    review: int  # the waiting review the assignment belongs to
    to: str | None  # "ann", "pool billing"; null when anyone in reach may claim it
    until: datetime | None
    by_rule: int | None  # the rule's position when a rule reserves it; null when assigned by hand


class SendIn(Schema):
    reason: str  # why people should look at it: kept in the item's trail


class SentOut(Schema):
    review: int  # the item's counting review, now with people
    state: str  # waiting, or decided when people decided it already
    sent_now: bool  # false: it was with people already (routed there by the machine, sampled, or sent before)


def _send(request: HttpRequest, item: Conversation | Draft | None, payload: SendIn) -> dict:
    """Send the item's counting review to people: 404 when the org has no such item, 409 when nothing of it counts
    or the machine could not grade it, 400 naming `reason` when the reason is empty or too long."""
    if item is None:
        raise HttpError(404, "no such item")
    field = "conversation" if isinstance(item, Conversation) else "draft"
    review = Review.objects.counting().filter(**{field: item}).order_by("-pk").first()
    if review is None or review.route in UNGRADED:
        raise HttpError(409, "nothing of this item is graded as it stands now (new, changed since, or not scorable)")
    try:
        sent = review_send(review_ids=[review.pk], reason=payload.reason, **_acting(request))
    except SendRefused as refused:
        raise ValidationError([{"loc": ["body", "payload", refused.field], "msg": str(refused)}]) from None
    review.refresh_from_db(fields=["state"])
    return {"review": review.pk, "state": review.state, "sent_now": review.pk in sent}


def _waiting_review(request: HttpRequest, item: Conversation | Draft | None) -> Review:
    """The item's review waiting for people: 404 when the org has no such item, 409 when nothing of it waits."""
    if item is None:
        raise HttpError(404, "no such item")
    field = "conversation" if isinstance(item, Conversation) else "draft"
    review = Review.objects.waiting().filter(**{field: item}).order_by("-pk").first()
    if review is None or not for_people(route=review.route, audit=review.audit, sent=review.sent):
        raise HttpError(409, "nothing of this item waits in the queue (decided, passed or failed, or changed since)")
    return review


def _conversation(request: HttpRequest, external_id: str, *roles: Role) -> Conversation | None:
    """The org's conversation, when a person's memberships of `roles` (those of the page that does the same) reach
    it; out of reach is as absent as another org's."""
    conversation = Conversation.objects.filter(org=request.auth.org, external_id=external_id).first()
    if conversation is None or not _reach(request, roles).covers(ItemKind.CONVERSATION, conversation.application):
        return None
    return conversation


def _draft(request: HttpRequest, draft_id: int, *roles: Role) -> Draft | None:
    draft = Draft.objects.filter(org=request.auth.org, pk=draft_id).first()
    return draft if draft is not None and _reach(request, roles).covers(ItemKind.DRAFT, "") else None


def _reach(request: HttpRequest, roles: tuple[Role, ...]) -> Reach:
    """An org key's whole org, or what the person's memberships of `roles` in the token's org cover."""
    person = request.auth.person
    if person is None:
        return caller_reach(request.auth)
    return reaches_of(person, *roles).get(request.auth.org_id) or Reach(request.auth.org_id, frozenset(), False)


def _acting(request: HttpRequest) -> dict:
    """Who a change is audited under: the person of a token, or the org's key."""
    person = request.auth.person
    return {"by": person} if person is not None else {"api_key": request.auth}


def _out(review: Review) -> dict:
    reservation = reservation_of(review, timezone.now())
    if reservation is None:
        return {"review": review.pk, "to": None, "until": None, "by_rule": None}
    return {"review": review.pk, "to": reservation.named, "until": reservation.until, "by_rule": reservation.by_rule}


def _assign(request: HttpRequest, review: Review, payload: AssignmentIn) -> dict:
    org = request.auth.org
    person = pool = None
    if payload.person is not None:
        person = people_of(org.pk).filter(username=payload.person).first()  # another org's: as unknown as nobody
        if person is None:
            raise HttpError(422, f"no person {payload.person!r} in this org")
    if payload.pool is not None:
        pool = Pool.objects.filter(org=org, name=payload.pool).first()
        if pool is None:
            raise HttpError(422, f"no pool {payload.pool!r} in this org")
    try:
        assignment_set(review_id=review.pk, person=person, pool=pool, until=payload.until, **_acting(request))
    except InvalidAssignment as refused:
        raise HttpError(422, str(refused)) from None
    return _out(review)


def _unassign(request: HttpRequest, review: Review) -> dict:
    assignment_clear(review_id=review.pk, **_acting(request))
    return _out(review)


@router.get("/conversations/{external_id}/assignment", response=AssignmentOut, summary="Who may claim it first")
def get_conversation_assignment(request: HttpRequest, external_id: ConversationId) -> dict:
    return _out(_waiting_review(request, _conversation(request, external_id, Role.LEAD)))


@router.put("/conversations/{external_id}/assignment", response=AssignmentOut, summary="Assign its queue item")
def put_conversation_assignment(request: HttpRequest, external_id: ConversationId, payload: AssignmentIn) -> dict:
    return _assign(request, _waiting_review(request, _conversation(request, external_id, Role.LEAD)), payload)


@router.delete("/conversations/{external_id}/assignment", response=AssignmentOut, summary="Unassign its queue item")
def delete_conversation_assignment(request: HttpRequest, external_id: ConversationId) -> dict:
    return _unassign(request, _waiting_review(request, _conversation(request, external_id, Role.LEAD)))


@router.get("/drafts/{draft_id}/assignment", response=AssignmentOut, summary="Who may claim it first")
def get_draft_assignment(request: HttpRequest, draft_id: int) -> dict:
    return _out(_waiting_review(request, _draft(request, draft_id, Role.LEAD)))


@router.put("/drafts/{draft_id}/assignment", response=AssignmentOut, summary="Assign its queue item")
def put_draft_assignment(request: HttpRequest, draft_id: int, payload: AssignmentIn) -> dict:
    return _assign(request, _waiting_review(request, _draft(request, draft_id, Role.LEAD)), payload)


@router.delete("/drafts/{draft_id}/assignment", response=AssignmentOut, summary="Unassign its queue item")
def delete_draft_assignment(request: HttpRequest, draft_id: int) -> dict:
    return _unassign(request, _waiting_review(request, _draft(request, draft_id, Role.LEAD)))


@router.post("/conversations/{external_id}/send-to-review", response=SentOut, summary="Send it to people")
def post_conversation_send(request: HttpRequest, external_id: ConversationId, payload: SendIn) -> dict:
    return _send(request, _conversation(request, external_id, *SENDER_ROLES), payload)


@router.post("/drafts/{draft_id}/send-to-review", response=SentOut, summary="Send it to people")
def post_draft_send(request: HttpRequest, draft_id: int, payload: SendIn) -> dict:
    return _send(request, _draft(request, draft_id, *SENDER_ROLES), payload)


@router.get("/queue/service", response=dict, summary="The queue's service-level figures, as the dashboard shows them")
def get_queue_service(
    request: HttpRequest,
    since: str | None = Query(None, alias="from"),
    until: str | None = Query(None, alias="to"),
    application: str | None = None,
) -> dict:
    """Share decided within target per week, time to decision against target, overdue now by application and
    reason, and workload per person, over the org's whole reach (an org key reads the whole org)."""
    try:
        reach = caller_reach(request.auth)
        scope = scope_for(request.auth.org, since=since, until=until, application=application, reach=reach)
    except InvalidScope as exc:  # answered as the dashboard's own API answers it
        raise ValidationError([{"loc": ["query", exc.field], "msg": exc.message}]) from exc
    return {"org": request.auth.org.slug, "from": iso_week(scope.since), "to": iso_week(scope.until),
            **service_figures(scope)}  # fmt: skip


# --- the queue's work, a person's: list, claim, release, decline, decide ------------------------------------------

PERSON_NEEDED = (
    "the queue's work is a person's: call it with a personal token (Authorization: Bearer tg_pat_..., made at "
    "/account/tokens/), since a claim and a decision name who made them and an org's API key names no one"
)
QUEUE_LIMIT = 100  # rows a page of the queue holds at most
# A refusal that says the item is not in a state to do this now, as the page's 409: everything but these two.
_REFUSED_AS = {"not_found": 404, "invalid": 400}


def _person(request: HttpRequest) -> AbstractBaseUser:
    person = request.auth.person
    if person is None:
        raise HttpError(403, PERSON_NEEDED)
    return person


def _refused(refusal: Refused, field: str = "body") -> Status:
    """A service's refusal as the API answers it; nothing was written."""
    status = _REFUSED_AS.get(refusal.code, 409)
    if status == 400:
        return Status(
            400, {"detail": f"{field}: {refusal.message}", "errors": [{"field": field, "message": refusal.message}]}
        )
    if status == 404:
        return Status(404, {"detail": refusal.message})
    return Status(409, {"detail": refusal.message, "code": refusal.code})


QUEUE_ERRORS = {**AUTH_ERRORS, 404: ErrorOut, 409: ConflictOut}


class QueueRowOut(Schema):
    review: int  # the review waiting for people: the id the item routes take
    kind: str
    title: str  # a draft's slug, a conversation's external id
    context: str  # a draft's title, a conversation's application
    blind: bool  # an audit item not yet decided: nothing the machine said of it is shown (reason, summary, checks)
    reason: str  # why the machine sent it to people; "" while blind
    reason_label: str
    summary: str
    checks: list[list[str]]  # the machine's answer per check: [name, answer, what it reads as]; none while blind
    criteria: str  # "conversation v3"
    waiting: str
    due: str
    overdue: bool
    mine: bool  # you hold it
    held_by: str
    places: str  # an item several people decide: answered and open places, or awaiting adjudication
    assigned: str
    not_claimable: str  # why claim next passes it over for you; "" when it is yours to claim
    page_url: str


class QueuePageOut(Schema):
    items: list[QueueRowOut]
    total: int  # waiting within your reach and the filters, counted up to the page's cap (see total_label)
    total_label: str
    next: int | None  # pass as `after` for the next page; null on the last


class QueueFiltersIn(Schema):
    kind: str = ""  # draft or conversation
    application: str = ""
    reason: str = ""
    criteria: int | None = None  # a criteria version's id
    overdue: bool = False
    mine: bool = False  # only items assigned to you
    slice: str = ""  # a dimension value, as name=value (release=2.4)


def _filters(asked: QueueFiltersIn) -> QueueFilters:
    """The page's filters, refused with a 400 naming the field where the page would fall back to none: a client
    that asks for a filter should learn it was not applied."""
    form = QueueFilterForm(
        {
            "kind": asked.kind,
            "application": asked.application,
            "reason": asked.reason,
            "criteria": asked.criteria or "",
            "overdue": asked.overdue,
            "mine": asked.mine,
            "slice": asked.slice,
        }
    )
    if not form.is_valid():
        raise ValidationError(
            [{"loc": ["query", name], "msg": " ".join(errors)} for name, errors in form.errors.items()]
        )
    return form.filters()


@router.get(
    "/queue", response={200: QueuePageOut, **AUTH_ERRORS, 400: FieldErrorsOut}, summary="The queue as you see it"
)
def get_queue(
    request: HttpRequest, filters: Query[QueueFiltersIn], after: int | None = None, limit: int = PAGE_SIZE
) -> dict:
    """Your queue in the token's org, as the page lists it: drafts first, then the soonest due, then the oldest;
    only what your reach covers; blind review hides what the page hides. Paged by cursor: `after` is the `next` of
    the page before (a review id), `limit` at most 100."""
    person = _person(request)
    if not 1 <= limit <= QUEUE_LIMIT:
        raise ValidationError([{"loc": ["query", "limit"], "msg": f"must be from 1 to {QUEUE_LIMIT}"}])
    page = queue_page(user=person, filters=_filters(filters), after=after, page_size=limit, org_id=request.auth.org_id)
    items = [
        {
            "review": row.review_id, "kind": row.kind, "title": row.title, "context": row.context, "blind": row.blind,
            "reason": row.reason, "reason_label": row.reason_label, "summary": row.summary,
            "checks": [list(check) for check in row.checks], "criteria": row.criteria_label, "waiting": row.waiting,
            "due": row.due, "overdue": row.overdue, "mine": row.mine, "held_by": row.held_by, "places": row.places,
            "assigned": row.assigned, "not_claimable": row.not_claimable,
            "page_url": request.build_absolute_uri(row.url),
        }
        for row in page.rows
    ]  # fmt: skip
    return {"items": items, "total": page.total, "total_label": page.total_label, "next": page.next_cursor}


class CheckAskedOut(Schema):
    key: str
    name: str
    question: str
    answers: list[str]  # what `checks.<key>` of a decision may say


class ClaimOut(Schema):
    review: int
    kind: str
    title: str
    fingerprint: str  # of the evidence you hold: a decision names it, and is refused if the item changed since
    expires_at: datetime  # your lease's end: decide, release or claim again before it
    outcomes: list[str]  # a draft's decision: one of these; [] for a conversation
    checks: list[CheckAskedOut]  # a conversation's decision: an answer to each; [] for a draft
    page_url: str


def _claimed(request: HttpRequest, claim: Claim) -> dict:
    review = Review.objects.select_related("criteria_version", "draft", "conversation").get(pk=claim.review_id)
    form = decision_form(review)
    conversation = isinstance(form, ConversationDecisionForm)
    return {
        "review": review.pk,
        "kind": review.kind,
        "title": review.conversation.external_id if conversation else review.draft.slug,
        "fingerprint": review.fingerprint,
        "expires_at": claim.expires_at,
        "outcomes": [] if conversation else [value for value, _ in form.fields["outcome"].choices],
        "checks": [
            {"key": check.key, "name": check.name, "question": check.question, "answers": list(check.answers)}
            for check in (form.check_set.checks if conversation else [])
        ],
        "page_url": request.build_absolute_uri(reverse("review_detail", args=[review.pk])),
    }


class ClaimNextOut(Schema):
    claimed: ClaimOut | None  # null: nothing left for you to claim


@router.post(
    "/queue/claim-next",
    response={200: ClaimNextOut, **AUTH_ERRORS, 400: FieldErrorsOut},
    summary="Claim the next item that is yours to claim",
)
def post_claim_next(request: HttpRequest, filters: Query[QueueFiltersIn]) -> dict:
    """The page's "claim next": the first item in queue order (within the filters) with a place for you."""
    person = _person(request)
    claim = claim_next(user=person, filters=_filters(filters), org_id=request.auth.org_id)
    return {"claimed": _claimed(request, claim) if claim is not None else None}


@router.post("/queue/items/{review_id}/claim", response={200: ClaimOut, **QUEUE_ERRORS}, summary="Claim this item")
def post_claim(request: HttpRequest, review_id: int) -> Status:
    """Claim it (claiming one you hold renews the lease): 404 when it is no item of your queue, 409 when someone
    holds it, it is assigned to others, decided or changed since."""
    person = _person(request)
    try:
        claim = claim_take(user=person, review_id=review_id, org_id=request.auth.org_id)
    except Refused as refusal:
        return _refused(refusal)
    return Status(200, _claimed(request, claim))


class DoneOut(Schema):
    review: int


@router.post(
    "/queue/items/{review_id}/release", response={200: DoneOut, **QUEUE_ERRORS}, summary="Give it back to the queue"
)
def post_release(request: HttpRequest, review_id: int) -> Status:
    person = _person(request)
    try:
        claim_release(user=person, review_id=review_id, org_id=request.auth.org_id)
    except Refused as refusal:
        return _refused(refusal)
    return Status(200, {"review": review_id})


class DeclineIn(Schema):
    reason: Annotated[
        str, Storable
    ]  # why you give it back: recorded; claim next passes the item over for you from then on


@router.post(
    "/queue/items/{review_id}/decline",
    response={200: DoneOut, **QUEUE_ERRORS, 400: FieldErrorsOut},
    summary="Give it back with a reason",
)
def post_decline(request: HttpRequest, review_id: int, payload: DeclineIn) -> Status:
    person = _person(request)
    form = DeclineForm({"reason": payload.reason})
    if not form.is_valid():
        raise ValidationError([{"loc": ["body", "payload", "reason"], "msg": " ".join(form.errors["reason"])}])
    try:
        claim_decline(user=person, review_id=review_id, reason=form.cleaned_data["reason"], org_id=request.auth.org_id)
    except Refused as refusal:
        return _refused(refusal, "reason")
    return Status(200, {"review": review_id})


class DecisionIn(Schema):
    fingerprint: Annotated[str, Storable]  # the claim's: what you read
    outcome: Annotated[str, Storable] = ""  # a draft: approve, reject or send_back (reject and send_back need a note)
    checks: Annotated[dict[str, str], Storable] = {}  # a conversation: an answer to every check of its version, by key
    note: Annotated[str, Storable] = ""  # why; a conversation's decision needs one
    keep_as_learning: bool = False  # keep the note as an org learning (a decision's, not one answer of several)


class DecisionOut(Schema):
    review: int
    answered: bool  # your answer is one of several (double review); the item is decided once they are in
    decided: bool  # the item's verdict stands: yours, the answers' when they agreed, or your adjudication
    outcome: str | None  # the item's verdict, when decided
    learning_error: str | None  # the decision stands, but its note could not become a learning


@router.post(
    "/queue/items/{review_id}/decision",
    response={200: DecisionOut, **QUEUE_ERRORS, 400: FieldErrorsOut},
    summary="Decide the item you hold (or answer it, on an item several people decide)",
)
def post_decision(request: HttpRequest, review_id: int, payload: DecisionIn) -> Status:
    """The page's decision form, field for field: a field it refuses is a 400 naming it (`checks.grounded`,
    `note`, `outcome`) and nothing is written; 409 when you do not hold the item, it was decided, or it changed
    since you claimed it (the fingerprint is not the item's now)."""
    person = _person(request)
    review = review_for_operator(reaches=operator_reaches(person, org_id=request.auth.org_id), review_id=review_id)
    if review is None:
        return Status(404, {"detail": "There is no such item in your queue."})
    form = _decision_form_for(review, payload)
    try:
        result = decision_create(user=person, review_id=review.pk, **decided(form), org_id=request.auth.org_id)
    except Refused as refusal:
        return _refused(refusal)
    decision = result.decision
    return Status(
        200,
        {
            "review": review.pk,
            "answered": result.answer is not None,
            "decided": decision is not None,
            "outcome": decision.outcome if decision is not None else None,
            "learning_error": result.learning_error,
        },
    )


def _decision_form_for(review: Review, payload: DecisionIn) -> DecisionForm:
    """The page's form bound to the payload, valid; else a 400 naming each field as the payload does."""
    is_conversation = review.conversation_id is not None
    asked = set(review.criteria_version.check_set().keys) if is_conversation else set()
    problems = [
        {"loc": ["body", "payload", "checks", key], "msg": "is not a check this item's criteria version asks"}
        for key in sorted(set(payload.checks) - asked)
    ]
    if payload.outcome and is_conversation:
        problems.append({"loc": ["body", "payload", "outcome"], "msg": "a conversation is decided by its checks"})
    data = {"fingerprint": payload.fingerprint, "note": payload.note, "outcome": payload.outcome}
    if payload.keep_as_learning:
        data["keep_as_learning"] = "on"
    data |= {key: answer for key, answer in payload.checks.items() if key in asked}
    form = decision_form(review, data)
    if not form.is_valid():
        for name, errors in form.errors.items():
            where = ["checks", name] if name in asked else [name if name != "__all__" else "payload"]
            problems.append({"loc": ["body", "payload", *where], "msg": " ".join(errors)})
    if problems:
        raise ValidationError(problems)
    return form

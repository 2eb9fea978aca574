"""The queue over the API. Assignment (`/api/v1/conversations/{id}/assignment`, `/api/v1/drafts/{id}/assignment`): an
org's key reads, sets or clears who may claim the item's waiting review first, as a lead does from the item page.
Sending to review (`.../send-to-review`): an org's key sends the item's counting review to people whatever the
machine decided, with a reason, as a lead does from a list. Every change is audited under the key."""

from datetime import datetime

from django.http import HttpRequest
from django.utils import timezone
from ninja import Query, Router, Schema
from ninja.errors import HttpError, ValidationError

from grading.core.schemas import ConversationId, Identifier, ZonedTime
from grading.core.weeks import iso_week
from grading.dashboard.figures import InvalidScope, scope_for
from grading.models import Conversation, Draft, Review, Route, for_people
from grading.reviews.services import SendRefused, review_send
from reviewer.access import people_of
from reviewer.dashboards.service import service_figures
from reviewer.models import Pool
from reviewer.queue.assignments import InvalidAssignment, assignment_clear, assignment_set, reservation_of

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
    if review is None or review.route in (Route.ERROR, Route.NOT_SCORABLE):
        raise HttpError(409, "nothing of this item is graded as it stands now (new, changed since, or not scorable)")
    try:
        sent = review_send(review_ids=[review.pk], reason=payload.reason, api_key=request.auth)
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


def _conversation(request: HttpRequest, external_id: str) -> Conversation | None:
    return Conversation.objects.filter(org=request.auth.org, external_id=external_id).first()


def _draft(request: HttpRequest, draft_id: int) -> Draft | None:
    return Draft.objects.filter(org=request.auth.org, pk=draft_id).first()


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
        assignment_set(review_id=review.pk, person=person, pool=pool, until=payload.until, api_key=request.auth)
    except InvalidAssignment as refused:
        raise HttpError(422, str(refused)) from None
    return _out(review)


def _unassign(request: HttpRequest, review: Review) -> dict:
    assignment_clear(review_id=review.pk, api_key=request.auth)
    return _out(review)


@router.get("/conversations/{external_id}/assignment", response=AssignmentOut, summary="Who may claim it first")
def get_conversation_assignment(request: HttpRequest, external_id: ConversationId) -> dict:
    return _out(_waiting_review(request, _conversation(request, external_id)))


@router.put("/conversations/{external_id}/assignment", response=AssignmentOut, summary="Assign its queue item")
def put_conversation_assignment(request: HttpRequest, external_id: ConversationId, payload: AssignmentIn) -> dict:
    return _assign(request, _waiting_review(request, _conversation(request, external_id)), payload)


@router.delete("/conversations/{external_id}/assignment", response=AssignmentOut, summary="Unassign its queue item")
def delete_conversation_assignment(request: HttpRequest, external_id: ConversationId) -> dict:
    return _unassign(request, _waiting_review(request, _conversation(request, external_id)))


@router.get("/drafts/{draft_id}/assignment", response=AssignmentOut, summary="Who may claim it first")
def get_draft_assignment(request: HttpRequest, draft_id: int) -> dict:
    return _out(_waiting_review(request, _draft(request, draft_id)))


@router.put("/drafts/{draft_id}/assignment", response=AssignmentOut, summary="Assign its queue item")
def put_draft_assignment(request: HttpRequest, draft_id: int, payload: AssignmentIn) -> dict:
    return _assign(request, _waiting_review(request, _draft(request, draft_id)), payload)


@router.delete("/drafts/{draft_id}/assignment", response=AssignmentOut, summary="Unassign its queue item")
def delete_draft_assignment(request: HttpRequest, draft_id: int) -> dict:
    return _unassign(request, _waiting_review(request, _draft(request, draft_id)))


@router.post("/conversations/{external_id}/send-to-review", response=SentOut, summary="Send it to people")
def post_conversation_send(request: HttpRequest, external_id: ConversationId, payload: SendIn) -> dict:
    return _send(request, _conversation(request, external_id), payload)


@router.post("/drafts/{draft_id}/send-to-review", response=SentOut, summary="Send it to people")
def post_draft_send(request: HttpRequest, draft_id: int, payload: SendIn) -> dict:
    return _send(request, _draft(request, draft_id), payload)


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
        scope = scope_for(request.auth.org, since=since, until=until, application=application)
    except InvalidScope as exc:  # answered as the dashboard's own API answers it
        raise ValidationError([{"loc": ["query", exc.field], "msg": exc.message}]) from exc
    return {"org": request.auth.org.slug, "from": iso_week(scope.since), "to": iso_week(scope.until),
            **service_figures(scope)}  # fmt: skip

"""The audit trail over the API (`GET /api/v1/audit-events`): the key's org's events with the audit page's filters,
a page at a time (`next` is the cursor of the one after), or all of them as CSV."""

from datetime import datetime

from django.http import HttpRequest, StreamingHttpResponse
from ninja import Router, Schema
from ninja.errors import ValidationError

from grading.models import AuditEvent
from grading.reviews.audit_reads import (
    PAGE_SIZE,
    PAGE_SIZE_MAX,
    InvalidAuditFilter,
    audit_csv,
    audit_filters_from,
    audit_page,
)

router = Router(tags=["audit"])


class ApiKeyOut(Schema):
    id: int
    name: str
    prefix: str


class AuditObjectOut(Schema):
    type: str  # the model, as `reviewer.claim`
    id: str


class AuditItemOut(Schema):
    kind: str  # conversation or draft
    id: int


class AuditEventOut(Schema):
    id: int
    at: datetime
    action: str
    actor: str | None  # the person's username; null for a key, the machine, or a person since deleted
    api_key: ApiKeyOut | None
    object: AuditObjectOut | None
    item: AuditItemOut | None  # the conversation or draft the event concerns
    detail: dict


class AuditEventsOut(Schema):
    events: list[AuditEventOut]
    next: str | None  # pass as `before` for the older events; null on the last page


def event_out(event: AuditEvent) -> dict:
    return {
        "id": event.pk,
        "at": event.at,
        "action": event.action,
        "actor": event.actor.get_username() if event.actor else None,
        "api_key": {"id": event.api_key.pk, "name": event.api_key.name, "prefix": event.api_key.prefix}
        if event.api_key
        else None,
        "object": {"type": event.object_type, "id": event.object_id} if event.object_type else None,
        "item": {"kind": event.item_kind, "id": event.item_id} if event.item_kind else None,
        "detail": event.detail if isinstance(event.detail, dict) else {"detail": event.detail},
    }


@router.get("/audit-events", response=AuditEventsOut, summary="The org's audit events, newest first, filtered")
def get_audit_events(
    request: HttpRequest, actor: str | None = None, api_key: str | None = None, action: str | None = None,
    object_type: str | None = None, object_id: str | None = None, item_kind: str | None = None,
    item_id: str | None = None, conversation: str | None = None, since: str | None = None, until: str | None = None,
    before: str | None = None, limit: int = PAGE_SIZE, format: str = "json",
):  # fmt: skip
    """Who did what, when, to which object and item. `actor` is a username, `api_key` a key's id, `action` one
    action or a family (`claim` is every `claim.*`), `item_kind` with `item_id` one item (`conversation` names one
    by its external id), `since` (inclusive) and `until` (exclusive; a date means through that day) ISO-8601 dates
    or times, UTC unless they say otherwise. Pages of `limit` events (at most 500); `before` takes the `next` of
    the page before. `?format=csv` gives every event the filters keep, streamed, without paging."""
    if format not in ("json", "csv"):
        raise ValidationError([{"loc": ["query", "format"], "msg": "must be json or csv"}])
    if not 1 <= limit <= PAGE_SIZE_MAX:
        raise ValidationError([{"loc": ["query", "limit"], "msg": f"must be from 1 to {PAGE_SIZE_MAX}"}])
    try:
        filters = audit_filters_from(request.GET)
        if format == "csv":
            response = StreamingHttpResponse(
                audit_csv(request.auth.org_id, filters, reader_id=None), content_type="text/csv; charset=utf-8"
            )
            response["Content-Disposition"] = f'attachment; filename="audit-{request.auth.org.slug}.csv"'
            return response
        page = audit_page(request.auth.org_id, filters, reader_id=None, before=before or "", size=limit)
    except InvalidAuditFilter as exc:
        raise ValidationError([{"loc": ["query", exc.field], "msg": exc.message}]) from exc
    return {"events": [event_out(event) for event in page.events], "next": page.older}

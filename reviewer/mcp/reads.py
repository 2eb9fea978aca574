"""The MCP server's reads of items: finding items and the queue in due order (no API twin to answer for them), and an
item's verdict as the API answers it. The lists are bounded (a page of at most MAX_PAGE rows, at most MAX_OFFSET rows
deep); all read only within the caller's reach, and for a person (`blinded`) keep to blind review
(grading/reviews/blind.py): what the machine said of an item people decide blind is withheld while it waits, and
the answer says so (`"blind": true`), as the queue page and the item page do."""

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Exists, F, OuterRef, Q, QuerySet, Subquery, TextField, Value
from django.db.models.functions import Cast
from django.utils import timezone

from grading.api.views import conversation_detail, draft_detail
from grading.core.errors import ConversationNotFound, FieldInvalid, NotFound
from grading.core.weeks import in_weeks, week_named
from grading.models import Conversation, Draft, ItemKind, Message, Review, Route
from grading.models.reach import Reach
from grading.reviews.blind import item_blind, verdicts_hidden
from reviewer.queue.reads import NO_FILTERS, QueueFilters, cursor_key, queue_lanes, queue_rows, queue_versions

MAX_PAGE = 50
MAX_OFFSET = 1000  # a search is a question, not an export: the export reads every item
VERDICTS = (*Route.values, "pending")  # pending: nothing counts for the item yet (new, changed, or being graded)


class InvalidSearch(FieldInvalid, ValueError):
    pass


@dataclass(frozen=True)
class ItemSearch:
    text: str = ""  # in a conversation's id or messages, a draft's id, title or body; any case
    kind: str = ""  # "" both
    application: str = ""  # conversations filed under it (drafts have none)
    verdict: str = ""  # the route of the review that counts now, or "pending"
    week: str = ""  # ISO week of the item's last activity, like 2026-W41

    def checked(self) -> "ItemSearch":
        if self.kind not in ("", *ItemKind.values):
            raise InvalidSearch("kind", f"must be one of {', '.join(ItemKind.values)}")
        if self.verdict not in ("", *VERDICTS):
            raise InvalidSearch("verdict", f"must be one of {', '.join(VERDICTS)}")
        if self.week:
            try:
                week_named(self.week)
            except ValueError as exc:
                raise InvalidSearch("week", str(exc)) from None
        if len(self.text) > 200:
            raise InvalidSearch("text", "at most 200 characters")
        return self


def _verdict_of(field: str) -> Subquery:
    return Subquery(Review.objects.counting().filter(**{field: OuterRef("pk")}).order_by("-pk").values("route")[:1])


def _narrowed(items: QuerySet, search: ItemSearch, *, at: str, item: str, blinded: bool) -> QuerySet:
    items = items.annotate(blind=verdicts_hidden(item) if blinded else Value(False))
    if search.verdict and blinded:  # matching a blind item by its verdict would tell the verdict
        items = items.filter(blind=False)
    if search.week:
        week = week_named(search.week)
        items = items.filter(in_weeks(at, since=week, until=week))
    if search.verdict == "pending":
        items = items.filter(verdict__isnull=True)
    elif search.verdict:
        items = items.filter(verdict=search.verdict)
    return items


def _conversations(reach: Reach, search: ItemSearch, blinded: bool) -> QuerySet[Conversation]:
    items = Conversation.objects.filter(org_id=reach.org_id).annotate(
        verdict=_verdict_of("conversation"), activity=F("last_activity_at")
    )
    if reach.limited:
        items = items.filter(application__in=sorted(reach.applications))
    if search.application:
        items = items.filter(application=search.application)
    if search.text:
        said = Message.objects.annotate(said=Cast("content", TextField())).filter(
            conversation=OuterRef("pk"), said__icontains=search.text
        )
        items = items.filter(Q(external_id__icontains=search.text) | Exists(said))
    return _narrowed(items, search, at="last_activity_at", item="conversation", blinded=blinded)


def _drafts(reach: Reach, search: ItemSearch, blinded: bool) -> QuerySet[Draft]:
    items = Draft.objects.filter(org_id=reach.org_id).annotate(verdict=_verdict_of("draft"), activity=F("updated_at"))
    if search.text:
        text = search.text
        items = items.filter(Q(external_id__icontains=text) | Q(title__icontains=text) | Q(body__icontains=text))
    return _narrowed(items, search, at="updated_at", item="draft", blinded=blinded)


def item_search(*, reach: Reach, search: ItemSearch, offset: int, limit: int, blinded: bool) -> dict:
    """Items matching `search`, latest activity first: `offset` and `limit` page through them. `blinded`: for a
    person, a blind item's verdict is withheld (null, `blind` true) and a verdict filter never matches it."""
    search = search.checked()
    if not 0 <= offset <= MAX_OFFSET:
        raise InvalidSearch("offset", f"must be from 0 to {MAX_OFFSET}")
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidSearch("limit", f"must be from 1 to {MAX_PAGE}")
    kinds = [search.kind] if search.kind else list(ItemKind.values)
    if search.application:
        kinds = [kind for kind in kinds if kind == ItemKind.CONVERSATION]
    if not reach.covers(ItemKind.DRAFT, ""):
        kinds = [kind for kind in kinds if kind != ItemKind.DRAFT]
    rows: list[dict] = []
    wanted = offset + limit + 1  # one more tells whether a next page exists
    if ItemKind.CONVERSATION in kinds:
        for c in _conversations(reach, search, blinded).order_by("-last_activity_at", "-pk")[:wanted]:
            rows.append({"kind": ItemKind.CONVERSATION, "external_id": c.external_id, "application": c.application,
                         **_verdict(c), "last_activity_at": c.activity})  # fmt: skip
    if ItemKind.DRAFT in kinds:
        for d in _drafts(reach, search, blinded).order_by("-updated_at", "-pk")[:wanted]:
            rows.append({"kind": ItemKind.DRAFT, "id": d.pk, "external_id": d.external_id, "title": d.title,
                         **_verdict(d), "last_activity_at": d.activity})  # fmt: skip
    rows.sort(key=lambda row: row["last_activity_at"], reverse=True)
    page = rows[offset : offset + limit]
    more = len(rows) > offset + limit
    return {"items": page, "offset": offset, "next_offset": offset + limit if more else None}


def _verdict(item: Conversation | Draft) -> dict:
    return {"verdict": None if item.blind else item.verdict or "pending", "blind": item.blind}


def queue_list(*, reaches: list[Reach], kind: str, application: str, after: int | None, limit: int) -> dict:
    """What waits for people within `reaches`, in the queue's order (drafts first, then soonest due, then oldest):
    the order the queue page shows. `after` is the last review id of the page before."""
    if kind not in ("", *ItemKind.values):
        raise InvalidSearch("kind", f"must be one of {', '.join(ItemKind.values)}")
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidSearch("limit", f"must be from 1 to {MAX_PAGE}")
    filters = QueueFilters(kind=kind, application=application) if kind or application else NO_FILTERS
    key = cursor_key(reaches, after)
    if after is not None and key is None:
        raise InvalidSearch("after", f"no review {after} in this org's queue")
    lanes = queue_lanes(queue_versions(reaches), reaches, filters)
    reviews = queue_rows(lanes=lanes, filters=filters, after=key, limit=limit + 1)
    now = timezone.now()
    rows = [_queue_row(review, now) for review in reviews[:limit]]
    return {"waiting": rows, "next_after": rows[-1]["review"] if len(reviews) > limit else None}


def _queue_row(review: Review, now: datetime) -> dict:
    is_draft = review.kind == ItemKind.DRAFT
    return {
        "review": review.pk,
        "kind": review.kind,
        "item": review.draft_id if is_draft else review.conversation.external_id,
        "title": review.draft.title if is_draft else None,
        "application": review.application or None,
        # An audit item's reason is the machine's, none of a reader's business until it is decided (blind review):
        # every row waits, so its review is the item's live one and `audit` is `Blind.verdicts`.
        "blind": review.audit,
        "reason": None if review.audit else review.reason,
        "criteria_version": review.criteria_version.number,
        "waiting_since": review.finished_at,
        "due_at": review.due_at,
        "overdue": review.due_at is not None and review.due_at < now,
    }


# What a blind item's answer keeps for a person: what says which item it is and where it stands, nothing the machine
# said of it. Kept fields are named, so a field the API answers later is withheld until someone decides otherwise.
_DRAFT_KEPT = frozenset({"id", "external_id", "run_id", "metadata", "state", "identity", "waiting"})
_REVIEW_KEPT = frozenset({"state", "is_current", "identity"})


def verdict_detail(*, reach: Reach, blinded: bool, conversation: str | None, draft: int | None) -> dict:
    """An item's verdict with its evidence and score identity, as `GET /api/v1/conversations/{id}` or
    `GET /api/v1/drafts/{id}` answers it; an item out of `reach` is as absent as another org's. For a person
    (`blinded`), what the machine said of a blind item (route, reason, checks, scores, findings, confidences,
    a decision or correction) is null while it waits, and `blind` says so."""
    if conversation is not None:
        item = Conversation.objects.filter(org_id=reach.org_id, external_id=conversation).select_related("org").first()
        if item is None or not reach.covers(ItemKind.CONVERSATION, item.application):
            raise ConversationNotFound(conversation)
        detail = conversation_detail(org=item.org, external_id=conversation)
        if not blinded:
            return detail
        blind = item_blind(ItemKind.CONVERSATION, item.pk).verdicts
        if blind and detail["review"] is not None:
            detail["review"] = _withheld(detail["review"], _REVIEW_KEPT)
        return detail | {"blind": blind}
    found = Draft.objects.filter(org_id=reach.org_id, pk=draft).select_related("org").first()
    if found is None or not reach.covers(ItemKind.DRAFT, ""):
        raise NotFound(f"no draft {draft}")
    detail = draft_detail(org=found.org, draft_id=found.pk)
    if not blinded:
        return detail
    blind = item_blind(ItemKind.DRAFT, found.pk).verdicts
    return (_withheld(detail, _DRAFT_KEPT) if blind else detail) | {"blind": blind}


def _withheld(answer: dict, kept: frozenset[str]) -> dict:
    return {key: value if key in kept else None for key, value in answer.items()}

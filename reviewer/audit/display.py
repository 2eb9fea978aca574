"""How the audit trail reads to people: an action in words, who did it, its detail as text, and an item's trail as
its pages show it. Details are JSON that people and pipelines put words into: they are only ever turned into text
here, which the templates escape."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Self
from urllib.parse import urlencode

from django.apps import apps
from django.urls import reverse

from grading.models import AuditEvent, Conversation, Draft, ItemKind
from grading.reviews.audit_reads import GRADED, TrailEntry, Why, item_trail
from reviewer.access import orgs_for
from reviewer.models import Role

ACTION_WORDS = {
    "claim.create": "claimed",
    "claim.release": "released",
    "claim.expire": "lease ran out",
    "claim.decline": "declined",
    "answer.create": "answered",
    "answer.replace": "changed their answer",
    "decision.create": "decided",
    "correction.create": "corrected the body",
    "correction.approved": "correction approved: no hard check fails",
    "correction.refused": "correction refused: a hard check still fails",
    "correction.overtaken": "correction overtaken: the draft or its criteria changed first",
    "expected_reply.create": "wrote an expected reply",
    "expected_reply.replace": "changed their expected reply",
    "assignment.create": "assigned",
    "assignment.replace": "reassigned",
    "assignment.delete": "unassigned",
    "escalation.due_soon": "due soon: escalated",
    "escalation.overdue": "overdue: escalated",
    "label.create": "labelled",
    "label.update": "label changed",
    "criteria.example.add": "made a worked example",
    "criteria.example.explain": "worked example explained",
    "criteria.example.remove": "worked example removed",
    "item.erase": "erased",
    "erasure.request": "erasure asked for",
    "user.login": "signed in",
    "org.create": "org created",
    "person.create": "person added",
    "person.password_link": "password link sent",
    "person.password_set": "password set",
    "membership.create": "role given",
    "membership.update": "role changed",
    "membership.delete": "role taken away",
    "sign_in_identity.create": "single sign-on identity linked",
    "api_key.create": "API key created",
    "api_key.revoke": "API key revoked",
    "webhook_secret.rotate": "webhook secret rotated",
    "retention.set": "retention set",
    "criteria.create": "criteria version created",
    "criteria.update": "criteria edited",
    "criteria.publish": "criteria published",
    "criteria.trial": "criteria trial started",
    "spend.cap_set": "spend cap set",
    "spend.cap_removed": "spend cap removed",
    "sample.audit": "audit sample drawn",
    "review.send": "sent to review",
    "pool.create": "pool created",
    "pool.update": "pool changed",
    "pool.delete": "pool removed",
    "assignment_rule.create": "assignment rule added",
    "assignment_rule.replace": "assignment rule changed",
    "assignment_rule.delete": "assignment rule removed",
    "service_target.create": "service-level target added",
    "service_target.replace": "service-level target changed",
    "service_target.delete": "service-level target removed",
    "escalation.create": "escalation set up",
    "escalation.update": "escalation changed",
    "escalation.delete": "escalation turned off",
}
# Ids of the writes' own bookkeeping: they mean nothing to a reader, and the CSV export keeps them.
UNSHOWN_DETAILS = {"claim", "revision"}
DETAIL_WORDS = {"expires_at": "lease until", "via": "by", "human_verdict": "the person's verdict"}
FINGERPRINT_SHOWN = 16  # characters of a fingerprint in words: enough to tell two apart; the export has it whole
WHY_WORDS = {
    Why.FIRST: "first grading",
    Why.EVIDENCE: "new evidence",
    Why.CRITERIA: "new criteria version",
    Why.RETRY: "retry after a judge error",
    Why.JUDGE: "another judge",
    Why.MEMORY: "org memory changed",
    Why.AGAIN: "graded again",
}
BASIS_WORDS = {"agreed": "decided: the answers agreed", "adjudicated": "adjudicated"}


def action_choices(current: str = "") -> list[tuple[str, str]]:
    """The audit page's action filter: each family of actions ("claim": every claim.*), then each action, in words;
    the filter's `current` value kept when it is neither (a bookmarked code)."""
    families = sorted({code.rsplit(".", 1)[0] for code in ACTION_WORDS if "." in code})
    choices = [(family, f"any {family.replace('_', ' ').replace('.', ' ')} event") for family in families]
    choices += sorted(((code, f"{words} ({code})") for code, words in ACTION_WORDS.items()), key=lambda c: c[1])
    if current and current not in {value for value, _ in choices}:
        choices.append((current, current))
    return choices


def object_words(object_type: str) -> str:
    """`grading.criteriaversion` as people say it: "criteria version" (the model's verbose name)."""
    try:
        return str(apps.get_model(object_type)._meta.verbose_name)
    except (LookupError, ValueError):
        return object_type


def object_choices() -> list[tuple[str, str]]:
    """The audit page's object filter: every model of Tollgate's own apps an event may name, in words."""
    models = [m for m in apps.get_models() if m._meta.app_label in ("grading", "reviewer", "otlp")]
    return sorted(((m._meta.label_lower, str(m._meta.verbose_name)) for m in models), key=lambda c: c[1])


def action_words(action: str, detail: dict) -> str:
    if action == "decision.create" and detail.get("basis") in BASIS_WORDS:
        return BASIS_WORDS[detail["basis"]]
    return ACTION_WORDS.get(action, action)


def who(actor: str, api_key: str) -> str:
    if actor:
        return actor
    return f"key {api_key}" if api_key else "Tollgate"


def detail_text(detail: dict) -> list[tuple[str, str | datetime]]:
    """The detail's keys and values in words: keys without underscores, nested values as "key value" lists rather than
    JSON, fingerprints shortened, and times as datetimes (the page shows them in the reader's time zone)."""
    return [
        (DETAIL_WORDS.get(str(key), str(key).replace("_", " ")), _value(value, key=str(key)))
        for key, value in detail.items()
        if key not in UNSHOWN_DETAILS
    ]


def _value(value: object, *, key: str) -> str | datetime:
    if isinstance(value, str) and key.endswith("_at"):
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            return value
    return _text(value, key=key)


def _text(value: object, *, key: str = "") -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value[:FINGERPRINT_SHOWN] + "…" if "fingerprint" in key and len(value) > FINGERPRINT_SHOWN else value
    if isinstance(value, dict):
        return ", ".join(f"{str(k).replace('_', ' ')} {_text(v, key=str(k))}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(_text(item) for item in value)
    return str(value)


@dataclass(frozen=True)
class Said:
    """An event as people read it, on the audit page and in an item's trail alike: the action in words, who did it,
    its detail as text."""

    what: str
    who: str
    details: list[tuple[str, str | datetime]]

    @classmethod
    def of(cls, action: str, detail: dict, *, actor: str, api_key: str, **row: Any) -> Self:
        """The row of an event (`row`: the row's own fields)."""
        return cls(what=action_words(action, detail), who=who(actor, api_key), details=detail_text(detail), **row)


# --- the audit page ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EventRow(Said):
    event: AuditEvent
    item: str  # "conversation cv-7 (#12)", "" for none
    item_trail_url: str  # the audit page filtered by the item
    item_page_url: str  # the item's criteria page, for a criteria admin of the org; ""
    object: str  # what the event changed, in words: "criteria version"


def event_rows(events: list[AuditEvent], *, org_slug: str, criteria_admin: bool) -> list[EventRow]:
    """The page's rows, with the items' external ids where the items still exist (one query per kind)."""
    names = _external_ids(events)
    rows = []
    for event in events:
        detail = event.detail if isinstance(event.detail, dict) else {"detail": event.detail}
        item = trail_url = page_url = ""
        if event.item_kind:
            external_id = names.get((event.item_kind, event.item_id))
            item = _item_name(event.item_kind, event.item_id, external_id)
            trail_url = audit_url(org_slug, item_kind=event.item_kind, item_id=event.item_id)
            if criteria_admin and external_id is not None:
                page_url = reverse("criteria_item", kwargs={"kind": event.item_kind, "pk": event.item_id})
        rows.append(
            EventRow.of(
                event.action,
                detail,
                actor=event.actor.get_username() if event.actor else "",
                api_key=event.api_key.name if event.api_key else "",
                event=event,
                item=item,
                item_trail_url=trail_url,
                item_page_url=page_url,
                object=object_words(event.object_type) if event.object_type else "",
            )
        )
    return rows


def _item_name(kind: str, item_id: int, external_id: str | None) -> str:
    return f"{kind} {external_id} (#{item_id})" if external_id else f"{kind} #{item_id}"


def _external_ids(events: list[AuditEvent]) -> dict[tuple[str, int], str]:
    names: dict[tuple[str, int], str] = {}
    for kind, model in ((ItemKind.CONVERSATION, Conversation), (ItemKind.DRAFT, Draft)):
        ids = {event.item_id for event in events if event.item_kind == kind}
        if ids:
            found = model.objects.filter(pk__in=ids, org_id=events[0].org_id).values_list("pk", "external_id")
            names |= {(kind.value, pk): external_id for pk, external_id in found}
    return names


def audit_url(org_slug: str, **filters: object) -> str:
    return reverse("audit") + "?" + urlencode({"org": org_slug, **filters})


# --- an item's own trail ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrailRow(Said):
    at: datetime
    review_id: int | None  # a grading's review


@dataclass(frozen=True)
class Trail:
    rows: list[TrailRow]
    audit_url: str  # every event of the item on the audit page, for an org admin of its org; ""


def trail_of(user, item: Conversation | Draft) -> Trail:
    """The item's trail as its pages show it to `user` (newest first, bounded, blind review's rule applied:
    grading/reviews/audit_reads.py `item_trail`), and a link to the whole of it on the audit page for the org's
    admins."""
    rows = [_trail_row(entry) for entry in item_trail(item, reader_id=user.pk)]
    kind = ItemKind.DRAFT if isinstance(item, Draft) else ItemKind.CONVERSATION
    admin_of = orgs_for(user, Role.ORG_ADMIN).filter(pk=item.org_id).first()
    return Trail(rows, audit_url(admin_of.slug, item_kind=kind.value, item_id=item.pk) if admin_of else "")


def _trail_row(entry: TrailEntry) -> TrailRow:
    if entry.action == GRADED:
        review = entry.review
        details = [("criteria", f"v{review.criteria_version.number}")]
        if not entry.verdicts_hidden:
            details.append(("route", review.get_route_display()))
            if review.score is not None:
                details.append(("score", f"{review.score:.1f}"))
        what = f"graded: {WHY_WORDS[entry.why]}"
        return TrailRow(what=what, who="Tollgate", details=details, at=entry.at, review_id=review.pk)
    return TrailRow.of(
        entry.action, entry.detail, actor=entry.actor, api_key=entry.api_key, at=entry.at, review_id=None
    )

"""Corrections as data: the export of what people said items should have been (grading.models.Correction), for
the dashboard's export links and `GET /api/v1/corrections`.

Two formats. `jsonl`: one object per correction with the original and the corrected text, the fingerprints (the
evidence corrected, the corrected revision's), the checks of the corrected review (a draft's findings and scores, a
conversation's check answers) and, for a corrected draft, the gate's review of the corrected revision, each with the
decision people made on it, the author and the times. `chat`: the expected replies as chat fine-tuning examples
(OpenAI's chat format), one `{"messages": [...]}` per reply: the active path before the corrected message, then the
expected reply as the assistant's turn; a reply whose path the conversation no longer holds (a message on it was
edited, or another branch became the active one) is left out, since the path it answered is gone.

Filtered like the dashboard's export: the scope's ISO weeks (of the correction), application and reach, and the
kind of item, the state, the author, a check that failed on the corrected review. Streamed from a server-side
cursor a chunk at a time, so memory stays flat however many corrections there are.

Not exported while the item waits for people (its live review is `waiting()`): a correction says what a person made
of the item and its review's checks what the machine said, which blind review (grading/reviews/blind.py) hides from
the others deciding it, and an undecided item's correction is not yet the answer people settled on. This holds for
every reader, the correction's author and API keys included, and whether the item is decided by one person or
several (places open, or answers waiting for an adjudication): so it is stricter than blind review, which it implies.
It is exported once nobody owes the item a decision: decided, or back to the machine.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, fields
from datetime import date, datetime

from django.db.models import Q, QuerySet

from grading.core.errors import FieldInvalid
from grading.core.evidence import EvidenceMessage, fingerprint
from grading.core.weeks import in_weeks
from grading.dashboard.figures import Scope
from grading.models import Correction, Decision, ItemKind, Review
from grading.reviews.conversation_reads import conversation_path

CHUNK = 500  # corrections per fetch: each carries two texts, a body's perhaps
FORMATS = ("jsonl", "chat")
KINDS = {ItemKind.DRAFT: Correction.Kind.DRAFT_BODY, ItemKind.CONVERSATION: Correction.Kind.EXPECTED_REPLY}
CHECK_LENGTH = 64  # a finding's code or a check's key, as the dashboard's links write them


class InvalidCorrectionFilter(FieldInvalid):
    pass


@dataclass(frozen=True)
class CorrectionFilter:
    """Which corrections, beside the scope: the kind of item (`any`: both), the state, the author (a user id), a
    check that failed on the corrected review (`failed_checks`)."""

    kind: str = "any"
    state: str = ""
    author: int | None = None
    check: str = ""

    def as_query(self) -> dict[str, str]:
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value not in ("", None) and not (f.name == "kind" and value == "any"):
                out[f.name] = str(value)
        return out


def correction_filter_from(params: Mapping[str, str]) -> CorrectionFilter:
    """The filter from a query string; a value we never write is an error naming its field."""
    kind = params.get("kind", "").strip() or "any"
    if kind not in (*ItemKind.values, "any"):
        raise InvalidCorrectionFilter("kind", f"must be one of {', '.join((*ItemKind.values, 'any'))}")
    state = params.get("state", "").strip()
    if state and state not in Correction.State.values:
        raise InvalidCorrectionFilter("state", f"must be one of {', '.join(Correction.State.values)}")
    author = params.get("author", "").strip()
    if author and not (author.isascii() and author.isdigit() and len(author) <= 18):
        raise InvalidCorrectionFilter("author", "must be a user id")
    check = check_named(params.get("check", ""))
    return CorrectionFilter(kind=kind, state=state, author=int(author) if author else None, check=check)


def check_named(value: str) -> str:
    """A check's key or a finding's code as a link names it (InvalidCorrectionFilter when it cannot be one)."""
    check = value.strip()
    if check and not (len(check) <= CHECK_LENGTH and check.isascii() and check.replace("_", "").isalnum()):
        raise InvalidCorrectionFilter("check", "must be a check's key or a finding's code (letters, digits, _)")
    return check


def failed_checks(kind: str, *, findings: object, checks: object) -> list[str]:
    """The checks that failed on a review, as the figures and the `check` filter name them: a draft's finding
    codes (each finding fails the draft), a conversation's checks the machine answered `fail`. The one reading."""
    if kind == ItemKind.DRAFT:
        codes = (f.get("code") for f in findings if isinstance(f, dict)) if isinstance(findings, list) else ()
        return sorted({code for code in codes if isinstance(code, str)})
    if not isinstance(checks, dict):
        return []
    return sorted(key for key, answer in checks.items() if isinstance(answer, dict) and answer.get("verdict") == "fail")


def corrections_behind(scope: Scope, f: CorrectionFilter) -> QuerySet[Correction]:
    """The corrections of the scope (its org, weeks of the correction, application, reach) that `f` keeps, but for
    its `check`, which is read on the rows in hand (`failed_checks`)."""
    rows = Correction.objects.filter(org=scope.org).filter(in_weeks("created_at", since=scope.since, until=scope.until))
    if scope.reach is not None:
        rows = rows.filter(scope.reach.rows("review__"))
    if scope.application:
        rows = rows.filter(Q(kind=Correction.Kind.DRAFT_BODY) | Q(review__application=scope.application))
    if f.kind != "any":
        rows = rows.filter(kind=KINDS[f.kind])
    if f.state:
        rows = rows.filter(state=f.state)
    if f.author is not None:
        rows = rows.filter(author_id=f.author)
    return rows


def _decision_json(decision: Decision | None) -> dict | None:
    if decision is None:
        return None
    return {
        "outcome": decision.outcome,
        "basis": decision.basis,
        "checks": decision.checks,
        "note": decision.note,
        "decided_by": decision.decided_by.get_username() if decision.decided_by else None,
        "decided_at": decision.decided_at,
    }


def _review_json(review: Review) -> dict:
    """What the machine said of a review, and what people decided on it."""
    said: dict = {
        "review": review.pk,
        "fingerprint": review.fingerprint,
        "route": review.route,
        "reason": review.reason,
    }
    if review.kind == ItemKind.DRAFT:
        said |= {"score": review.score, "sub_scores": review.sub_scores, "findings": review.findings}
    else:
        said |= {"checks": review.checks}
    decision = getattr(review, "decision", None)  # reverse one-to-one: absent when undecided
    return said | {"failed": failed_checks(review.kind, findings=review.findings, checks=review.checks),
                   "decision": _decision_json(decision)}  # fmt: skip


def correction_json(correction: Correction) -> dict:
    """One row of the `jsonl` format."""
    review = correction.review
    item = correction.draft if correction.kind == Correction.Kind.DRAFT_BODY else correction.conversation
    return {
        "id": correction.pk,
        "kind": correction.kind,
        "item_kind": review.kind,
        "item": item.external_id,
        "application": review.application,
        "criteria_version": review.criteria_version.number,
        "message_external_id": correction.message_external_id,
        "evidence_fingerprint": correction.evidence_fingerprint,
        "corrected_fingerprint": correction.corrected_fingerprint,
        "original": correction.original,
        "corrected": correction.corrected,
        "diff": correction.diff,
        "state": correction.state,
        "author": correction.author.get_username() if correction.author else None,
        "created_at": correction.created_at,
        "settled_at": correction.settled_at,
        "checks": _review_json(review),
        "regrade": _review_json(correction.regrade) if correction.regrade is not None else None,
    }


def _chat_message(m: EvidenceMessage) -> dict:
    """A message of the path in the chat format: its role and content, and its tool calls, tool call id and name
    where it has them (as the source sent them)."""
    out: dict = {"role": m.role, "content": m.content}
    if m.tool_calls:
        out["tool_calls"] = m.tool_calls
    if m.tool_call_id:
        out["tool_call_id"] = m.tool_call_id
    if m.name:
        out["name"] = m.name
    return out


def correction_chat(correction: Correction, path: list[EvidenceMessage]) -> dict | None:
    """One row of the `chat` format from the conversation's active `path`, or None when it no longer holds the path
    the reply answered (its fingerprint up to and including the corrected message is not the one the correction is
    bound to)."""
    at = next((n for n, m in enumerate(path) if m.id == correction.message_external_id), None)
    if at is None or fingerprint(path[: at + 1]) != correction.evidence_fingerprint:
        return None
    return {"messages": [*map(_chat_message, path[:at]), {"role": "assistant", "content": correction.corrected}]}


def _waiting_items(corrections: list[Correction]) -> set[tuple[str, int]]:
    """The (correction kind, item id) of these corrections' items that wait for people now: one query per kind."""
    waiting = set()
    for kind, field in ((Correction.Kind.DRAFT_BODY, "draft_id"), (Correction.Kind.EXPECTED_REPLY, "conversation_id")):
        item_ids = {_item_id(c) for c in corrections if c.kind == kind}
        if item_ids:
            found = Review.objects.waiting().filter(**{f"{field}__in": item_ids}).values_list(field, flat=True)
            waiting |= {(kind, item_id) for item_id in found}
    return waiting


def _item_id(correction: Correction) -> int:
    return correction.draft_id if correction.kind == Correction.Kind.DRAFT_BODY else correction.conversation_id


# What the rows never read of the rows joined in: the item's own text (the correction holds the text it corrected)
# and the reviews' largest columns.
_UNREAD = ("draft__body", "review__memory_used", "review__repairs", "regrade__memory_used", "regrade__repairs")


def export_corrections(corrections: QuerySet[Correction], *, f: CorrectionFilter, file_format: str) -> Iterator[dict]:
    """The rows of `file_format`, oldest correction first, `CHUNK` at a time through a server-side cursor, without
    the corrections of items waiting for people (one query per kind and chunk: the module's docstring)."""
    if file_format == "chat":
        corrections = corrections.filter(kind=Correction.Kind.EXPECTED_REPLY)
    rows = (
        corrections.select_related(
            "author", "draft", "conversation", "review__criteria_version", "review__decision__decided_by",
            "regrade__decision__decided_by",
        )
        .defer(*_UNREAD)
        .order_by("created_at", "pk")
        .iterator(chunk_size=CHUNK)
    )  # fmt: skip
    while chunk := list(itertools.islice(rows, CHUNK)):
        waiting = _waiting_items(chunk)
        paths: dict[int, list[EvidenceMessage]] = {}  # a conversation's active path, read once for its replies
        for correction in chunk:
            if (correction.kind, _item_id(correction)) in waiting:
                continue
            review = correction.review
            if f.check and f.check not in failed_checks(review.kind, findings=review.findings, checks=review.checks):
                continue
            if file_format == "jsonl":
                yield correction_json(correction)
                continue
            conversation = correction.conversation
            if conversation.pk not in paths:
                paths[conversation.pk] = conversation_path(conversation).path
            if (row := correction_chat(correction, paths[conversation.pk])) is not None:
                yield row


def _iso(value: object) -> str:
    if isinstance(value, datetime | date):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON")


# Characters JSON leaves as themselves that some readers of lines take for a line's end (Python's splitlines, a few
# JavaScript parsers): written escaped, so a row is one line whatever text it carries.
_LINE_BREAKS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def as_jsonl(rows: Iterable[dict]) -> Iterator[str]:
    """Each row a line of JSON (text as itself, not escaped to ASCII, but for `_LINE_BREAKS`), streamed."""
    for row in rows:
        yield json.dumps(row, ensure_ascii=False, default=_iso).translate(_LINE_BREAKS) + "\n"

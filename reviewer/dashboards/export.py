"""The export of reviews (DESIGN 8): each with its whole score identity, its state, the decision and who made it,
filtered like the page. Streamed as CSV or JSONL from a server-side cursor, so a million reviews cost the memory
of one chunk."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator
from datetime import date, datetime

from django.db.models import QuerySet

from grading.models import Review
from grading.outcomes import CHECKS

CHUNK = 2000  # rows per fetch from the server-side cursor

COLUMNS = (
    "review_id", "kind", "item", "application", "week", "state", "route", "reason", "score",
    *(f"check_{name}" for name in CHECKS),
    "fingerprint", "criteria_kind", "criteria_version", "judge", "judge_key", "memory_snapshot", "started_at",
    "finished_at", "stages", "prompt_tokens", "completion_tokens", "audit",
    "decision", "decision_checks", "decision_note", "decided_by", "decided_at",
)  # fmt: skip

_VALUES = (
    "pk", "kind", "conversation__external_id", "draft__external_id", "application", "week", "state_now", "route",
    "reason", "score", "checks", "fingerprint", "criteria_version__kind", "criteria_version__number", "judge",
    "judge_key", "memory_snapshot", "started_at", "finished_at", "stages", "usage", "audit", "decision__outcome",
    "decision__checks", "decision__note", "decision__decided_by__username", "decision__decided_at",
)  # fmt: skip


def export_rows(reviews: QuerySet[Review]) -> Iterator[dict]:
    """One dict per review, oldest first, read `CHUNK` rows at a time through a server-side cursor."""
    rows = reviews.with_state().order_by("pk").values_list(*_VALUES).iterator(chunk_size=CHUNK)
    for (pk, kind, conversation, draft, application, week, state, route, reason, score, checks, fingerprint,
         criteria_kind, criteria_number, judge, judge_key, memory_snapshot, started_at, finished_at, stages, usage,
         audit, outcome, decision_checks, note, decided_by, decided_at) in rows:  # fmt: skip
        checks = checks if isinstance(checks, dict) else {}
        usage = usage if isinstance(usage, dict) else {}
        yield {
            "review_id": pk,
            "kind": kind,
            "item": conversation if conversation is not None else draft,
            "application": application,
            "week": week,
            "state": state,
            "route": route,
            "reason": reason,
            "score": score,
            **{
                f"check_{name}": (checks.get(name) or {}).get("verdict") if isinstance(checks.get(name), dict) else None
                for name in CHECKS
            },  # fmt: skip
            "fingerprint": fingerprint,
            "criteria_kind": criteria_kind,
            "criteria_version": criteria_number,
            "judge": judge,
            "judge_key": judge_key,
            "memory_snapshot": memory_snapshot,
            "started_at": started_at,
            "finished_at": finished_at,
            "stages": stages,
            "prompt_tokens": usage.get("prompt_tokens"),
            "completion_tokens": usage.get("completion_tokens"),
            "audit": audit,
            "decision": outcome,
            "decision_checks": decision_checks or None,
            "decision_note": note,
            "decided_by": decided_by,
            "decided_at": decided_at,
        }


def _plain(value: object) -> object:
    if isinstance(value, datetime | date):
        return value.isoformat()
    return value


class _Line:
    """A file-like object whose write returns what was written: csv.writer then yields one line at a time."""

    def write(self, text: str) -> str:
        return text


def as_csv(rows: Iterable[dict]) -> Iterator[str]:
    writer = csv.writer(_Line())
    yield writer.writerow(COLUMNS)
    for row in rows:
        values = []
        for name in COLUMNS:
            value = _plain(row[name])
            if isinstance(value, dict | list):
                value = json.dumps(value, sort_keys=True, ensure_ascii=False)
            values.append("" if value is None else value)
        yield writer.writerow(values)


def as_jsonl(rows: Iterable[dict]) -> Iterator[str]:
    for row in rows:
        yield json.dumps({name: _plain(row[name]) for name in COLUMNS}, ensure_ascii=False) + "\n"

"""The export of reviews (DESIGN 8): each with its whole score identity, its state, the decision and who made it,
every label about the evidence it read (each labeller's verdict per check) and, once they are no longer blind, the
answers of the people the queue asked to decide it, filtered like the page. Streamed as CSV or JSONL from a
server-side cursor, so a million reviews cost the memory of one chunk. The CSV is written by
`grading.figures.spreadsheets`, safe to open in a spreadsheet."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator, Sequence
from datetime import date, datetime

from django.contrib.postgres.aggregates import JSONBAgg
from django.db.models import Count, Exists, F, Max, OuterRef, Q, QuerySet, Subquery
from django.db.models.fields.json import KeyTextTransform, KeyTransform
from django.db.models.functions import JSONObject

from grading.figures.spreadsheets import csv_lines
from grading.models import Answer, Decision, Label, Review
from grading.outcomes import CHECKS

CHUNK = 2000  # rows per fetch from the server-side cursor

COLUMNS = (
    "review_id", "kind", "item", "application", "week", "state", "route", "reason", "score",
    *(f"check_{name}" for name in CHECKS),
    "fingerprint", "criteria_kind", "criteria_version", "judge", "judge_key", "memory_snapshot", "started_at",
    "finished_at", "stages", "prompt_tokens", "completion_tokens", "audit",
    "decision", "decision_checks", "decision_note", "decided_by", "decided_at", "routed_at", "due_at", "labels",
    "answers",
)  # fmt: skip

_VALUES = (
    "pk", "kind", "conversation__external_id", "draft__external_id", "application", "week", "state_now", "route",
    "reason", "score", *(f"check_{name}" for name in CHECKS), "fingerprint", "criteria_version__kind",
    "criteria_version__number", "judge", "judge_key", "memory_snapshot", "started_at", "finished_at", "stages",
    "prompt_tokens", "completion_tokens", "audit", "decision__outcome", "decision__checks", "decision__note",
    "decision__decided_by__username", "decision__decided_at", "routed_at", "due_at", "labels",
)  # fmt: skip
# Every label of the review's item that speaks about the evidence it read, as [{labeller, check, verdict}], in one
# order: each person's answer apart, so agreement between people can be worked out from the export too.
_LABELS = Subquery(
    Label.objects.filter(fingerprint=OuterRef("fingerprint"))
    .filter(Q(conversation_id=OuterRef("conversation_id")) | Q(draft_id=OuterRef("draft_id")))
    .values("fingerprint")
    .annotate(
        answers=JSONBAgg(
            JSONObject(labeller="labeller", check="check_name", verdict="verdict"),
            order_by=("check_name", "labeller"),
        )
    )
    .values("answers")
)
# Read in SQL what the export needs of the JSON columns, rather than parse a review's whole checks (rationales,
# message ids) in Python for one word each: that parsing would be most of the export's time.
_EXTRACTED = {
    **{f"check_{name}": KeyTextTransform("verdict", KeyTransform(name, "checks")) for name in CHECKS},
    "prompt_tokens": KeyTransform("prompt_tokens", "usage"),
    "completion_tokens": KeyTransform("completion_tokens", "usage"),
    "labels": _LABELS,
}


def _answers_shown(review_ids: Sequence[int]) -> dict[int, list[dict]]:
    """The answers people gave on these reviews, each review's in the order given, in one query that hands back one
    JSON list per review (decoded once, not answer by answer). Only those no longer blind: the review's places are
    all answered (as many answers as the item asked for when they were given), or it is decided (agreed or
    adjudicated). Until then nobody sees another's answer, in the queue or here."""
    shown = (
        Answer.objects.filter(review_id__in=review_ids)
        .values("review_id")
        .annotate(
            given=Count("pk"),
            asked=Max("slots"),
            decided=Exists(Decision.objects.filter(review_id=OuterRef("review_id"))),
            answers=JSONBAgg(
                JSONObject(
                    person="person__username",
                    outcome="outcome",
                    checks="checks",
                    note="note",
                    answered_at="answered_at",
                ),
                order_by=("answered_at", "pk"),
            ),
        )
        .filter(Q(given__gte=F("asked")) | Q(decided=True))
        .values_list("review_id", "answers")
    )
    return dict(shown)


def export_rows(reviews: QuerySet[Review]) -> Iterator[tuple]:
    """One tuple per review in `COLUMNS` order, oldest first, read `CHUNK` rows at a time through a server-side
    cursor; the answers of each chunk's reviews in one more query."""
    rows = reviews.with_state().annotate(**_EXTRACTED).order_by("pk").values_list(*_VALUES).iterator(chunk_size=CHUNK)
    while chunk := list(itertools.islice(rows, CHUNK)):
        answers = _answers_shown([row[0] for row in chunk])
        for row in chunk:
            yield (row[0], row[1], row[2] if row[2] is not None else row[3], *row[4:], answers.get(row[0]))


# Columns that need more than str() in a CSV cell (csv writes None as an empty cell): times, and JSON.
_TIMES = [COLUMNS.index(name) for name in ("week", "started_at", "finished_at", "decided_at", "routed_at", "due_at")]
_JSON = [COLUMNS.index(name) for name in ("judge", "decision_checks", "labels", "answers")]


def _csv_row(row: tuple) -> list:
    cells = list(row)
    for i in _TIMES:
        if cells[i] is not None:
            cells[i] = cells[i].isoformat()
    for i in _JSON:
        if cells[i] is not None:
            cells[i] = json.dumps(cells[i], sort_keys=True, ensure_ascii=False)
    return cells


def as_csv(rows: Iterable[tuple]) -> Iterator[str]:
    return csv_lines(itertools.chain([COLUMNS], map(_csv_row, rows)))


def _iso(value: object) -> str:
    if isinstance(value, datetime | date):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON")


def as_jsonl(rows: Iterable[tuple]) -> Iterator[str]:
    for row in rows:
        yield json.dumps(dict(zip(COLUMNS, row, strict=True)), ensure_ascii=False, default=_iso) + "\n"

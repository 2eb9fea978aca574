"""The export of reviews: each with its whole score identity, the dimension values it was filed under (`slice`), its
state, the decision and who made it, every label about the evidence it read (each labeller's verdict per check) and
the answers of the people the queue asked to decide it, the judge's confidence in each answer and the certificate it
was routed under (so the quality rate's interval, grading/dashboard/certified.py, can be worked out from the export
too); filtered like the page, as blind review lets the reader see them (`export_rows`). Streamed as CSV or JSONL from
a server-side cursor, so a million reviews cost the memory of one chunk. The CSV is written by
`grading.core.spreadsheets`, safe to open in a spreadsheet."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator, Sequence
from datetime import date, datetime

from django.contrib.postgres.aggregates import ArrayAgg, JSONBAgg
from django.db.models import OuterRef, Q, QuerySet, Subquery, TextField
from django.db.models.fields.json import KeyTextTransform, KeyTransform
from django.db.models.functions import Cast, Coalesce, JSONObject

from grading.core.spreadsheets import csv_lines
from grading.core.weeks import iso_week
from grading.models import Answer, ItemKind, Label, Review, state_now
from grading.reviews.blind import SEEN, blind_items
from reviewer.dashboards.reads import ReviewFilter

CHUNK = 2000  # rows per fetch from the server-side cursor

# The columns before and after the checks' (one column per check: `check_<key>`, the answer as stored).
_BEFORE = ("review_id", "kind", "item", "application", "week", "slice", "state", "route", "reason", "score")
_AFTER = (
    "fingerprint", "criteria_kind", "criteria_version", "judge", "judge_key", "memory_snapshot", "started_at",
    "finished_at", "stages", "prompt_tokens", "completion_tokens", "audit", "confidences", "certificate",
    "decision", "decision_checks", "decision_note", "decided_by", "decided_at", "routed_at", "due_at", "labels",
    "answers",
)  # fmt: skip
# What the rows read, in the columns' order; a JSON column is read as its text (`_JSON_READ`) and decoded in Python.
_VALUES_BEFORE = (
    "pk", "kind", "conversation__external_id", "draft__external_id", "application", "week", "slice_text", "state",
    "route", "reason", "score",
)  # fmt: skip
_VALUES_AFTER = (
    "fingerprint", "criteria_version__kind",
    "criteria_version__number", "judge_text", "judge_key", "memory_snapshot", "started_at", "finished_at", "stages",
    "prompt_tokens_text", "completion_tokens_text", "audit", "confidences_text", "certificate_id", "decision__outcome",
    "decision_checks_text", "decision__note",
    "decision__decided_by__username", "decision__decided_at", "routed_at", "due_at", "labels_text",
    "answers_text", "answered_by", "criteria_version__is_active", "conversation_id", "draft_id",
)  # fmt: skip
_STATE = _BEFORE.index("state")
_WEEK = _BEFORE.index("week")


def columns_for(checks: Sequence[str]) -> tuple[str, ...]:
    """The export's columns with a column for each of `checks` (reviewer/dashboards/reads.py, `checks_asked`)."""
    return (*_BEFORE, *(f"check_{key}" for key in checks), *_AFTER)


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
# message ids) in Python for one word each. Each JSON cell comes as its text, decoded once per distinct text in a
# chunk (`_Decoded`): most repeat from row to row (the judge, an empty slice, the labels' few patterns).
_JSON_READ = {
    "slice_text": Cast("slice", TextField()),
    "judge_text": Cast("judge", TextField()),
    "prompt_tokens_text": Cast(KeyTransform("prompt_tokens", "usage"), TextField()),
    "completion_tokens_text": Cast(KeyTransform("completion_tokens", "usage"), TextField()),
    "confidences_text": Cast("confidences", TextField()),
    "decision_checks_text": Cast("decision__checks", TextField()),
    "labels_text": Cast(_LABELS, TextField()),
}


def _answer_of(key: str) -> Coalesce:
    """A check's answer as the row stores it: a conversation's `checks[key].verdict`, a draft's score."""
    return Coalesce(KeyTextTransform("verdict", KeyTransform(key, "checks")), KeyTextTransform(key, "sub_scores"))


# The answers people gave on the review, in the order given, as one JSON list, and who gave each in the same order
# (for blind review): read with the row, each review's answers by the index on their review, since a chunk's answers
# read apart by their reviews' ids made PostgreSQL scan every answer of the table (bench/README.md).
_ANSWER_ORDER = ("answered_at", "pk")
_ANSWERS = Subquery(
    Answer.objects.filter(review_id=OuterRef("pk"))
    .values("review_id")
    .annotate(
        answers=JSONBAgg(
            JSONObject(
                person="person__username", outcome="outcome", checks="checks", note="note", answered_at="answered_at"
            ),
            order_by=_ANSWER_ORDER,
        )
    )
    .values("answers")
)
_ANSWERED_BY = Subquery(
    Answer.objects.filter(review_id=OuterRef("pk"))
    .values("review_id")
    .annotate(people=ArrayAgg("person_id", order_by=_ANSWER_ORDER))
    .values("people")
)
_ANSWERS_READ = {"answers_text": Cast(_ANSWERS, TextField()), "answered_by": _ANSWERED_BY}


class _Decoded(dict):
    """JSON texts decoded, each distinct text once; a chunk's worth, so memory stays flat."""

    def __missing__(self, text: str) -> object:
        value = self[text] = json.loads(text)
        return value


# What the machine (and labellers) said of a review: empty in the rows of items people decide blind.
_VERDICTS_SAID = ("route", "reason", "score", "labels", "confidences", "certificate")


def export_rows(
    reviews: QuerySet[Review], *, f: ReviewFilter, reader_id: int | None, checks: Sequence[str]
) -> Iterator[tuple]:
    """One tuple per review in `columns_for(checks)` order, oldest first, read `CHUNK` rows at a time through a
    server-side cursor, each with its labels and people's answers; blind review's rule (grading/reviews/blind.py) for
    each chunk's items in one more query.

    Blind review: a review of an item people decide blind is exported without what the machine or labellers said
    of it (withheld altogether when `f` picked it by what the machine said), and with only `reader_id`'s own
    answers while places are open; so are the answers of every other item."""
    columns = columns_for(checks)
    said = [columns.index(name) for name in (*_VERDICTS_SAID, *(f"check_{key}" for key in checks))]
    # Where each JSON column lands in a row once the item's two ids became one column (`item`).
    json_at = [columns.index(name) for name in ("slice", "judge", "prompt_tokens", "completion_tokens", "confidences",
                                                "decision_checks", "labels")]  # fmt: skip
    answers_of = {f"check_{key}": _answer_of(key) for key in checks}
    values = (*_VALUES_BEFORE, *answers_of, *_VALUES_AFTER)
    rows = reviews.annotate(**_JSON_READ, **_ANSWERS_READ, **answers_of).order_by("pk").values_list(*values)
    rows = rows.iterator(chunk_size=CHUNK)
    while chunk := list(itertools.islice(rows, CHUNK)):
        blind = {
            kind: blind_items(kind, {row[-1] if kind == ItemKind.DRAFT else row[-2] for row in chunk if row[1] == kind})
            for kind in ItemKind.values
        }
        decoded = _Decoded()
        weeks: dict[date, str] = {}
        for row in chunk:
            seen = blind[row[1]].get(row[-1] if row[1] == ItemKind.DRAFT else row[-2], SEEN)
            if seen.verdicts and f.reads_machine:
                continue
            out = [row[0], row[1], row[2] if row[2] is not None else row[3], *row[4:-5]]
            for i in json_at:
                if out[i] is not None:
                    out[i] = decoded[out[i]]
            out[_STATE] = state_now(out[_STATE], criteria_active=row[-3])  # as the review reads now
            week = out[_WEEK]
            if week is not None:  # named as the page names it (2026-W49), not by its Monday
                out[_WEEK] = weeks.get(week) or weeks.setdefault(week, iso_week(week))
            if seen.verdicts:
                for i in said:
                    out[i] = None
            given = None if row[-5] is None else json.loads(row[-5])
            if given is not None and seen.answers:
                given = [
                    answer
                    for answer, person_id in zip(given, row[-4], strict=True)
                    if not seen.hides_answer(person_id=person_id, reader_id=reader_id)
                ]
            yield (*out, given or None)


# Columns that need more than str() in a CSV cell (csv writes None as an empty cell): times, and JSON.
_TIMES = ("started_at", "finished_at", "decided_at", "routed_at", "due_at")
_JSON = ("slice", "judge", "confidences", "decision_checks", "labels", "answers")


# One encoder each, made once: json.dumps with options makes a new one for every value.
_CSV_JSON = json.JSONEncoder(sort_keys=True, ensure_ascii=False).encode


def _csv_row(row: tuple, times: Sequence[int], json_cells: Sequence[int]) -> list:
    cells = list(row)
    for i in times:
        if cells[i] is not None:
            cells[i] = cells[i].isoformat()
    for i in json_cells:
        if cells[i] is not None:
            cells[i] = _CSV_JSON(cells[i])
    return cells


def as_csv(rows: Iterable[tuple], columns: Sequence[str]) -> Iterator[str]:
    times = [columns.index(name) for name in _TIMES]
    json_cells = [columns.index(name) for name in _JSON]
    return csv_lines(itertools.chain([columns], (_csv_row(row, times, json_cells) for row in rows)))


def _iso(value: object) -> str:
    if isinstance(value, datetime | date):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON")


_JSONL = json.JSONEncoder(ensure_ascii=False, default=_iso).encode


def as_jsonl(rows: Iterable[tuple], columns: Sequence[str]) -> Iterator[str]:
    for row in rows:
        yield _JSONL(dict(zip(columns, row, strict=True))) + "\n"

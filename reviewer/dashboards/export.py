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
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import date
from json.encoder import encode_basestring as _string  # the encoders' own escaping of a text (ensure_ascii off)

from django.contrib.auth import get_user_model
from django.contrib.postgres.aggregates import ArrayAgg, JSONBAgg
from django.contrib.postgres.fields import ArrayField
from django.db.models import Func, OuterRef, Q, QuerySet, Subquery, TextField
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
    "criteria_version__number", "judge_text", "judge_key", "memory_snapshot", "started_at_text", "finished_at_text",
    "stages", "prompt_tokens_text", "completion_tokens_text", "audit", "confidences_text", "certificate_id",
    "decision__outcome", "decision_checks_text", "decision__note",
    "decision__decided_by__username", "decided_at_text", "routed_at_text", "due_at_text", "labels_text",
    "answers_given", "criteria_version__is_active", "conversation_id", "draft_id",
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
# message ids) in Python for one word each. Each JSON cell comes as its text, which the writers decode or encode
# once per distinct text (`_PerText`): most repeat from row to row (the judge, an empty slice, the labels' few
# patterns). Times come as text too, rewritten as Python writes them (`_iso_time`): parsing each into a datetime
# to print it again cost more than the rest of its row.
_JSON_READ = {
    "started_at_text": Cast("started_at", TextField()),
    "finished_at_text": Cast("finished_at", TextField()),
    "decided_at_text": Cast("decision__decided_at", TextField()),
    "routed_at_text": Cast("routed_at", TextField()),
    "due_at_text": Cast("due_at", TextField()),
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


# The answers people gave on the review, in the order given, each as a record of text: who gave it (their id), its
# checks as JSON, its note, its outcome, and when, as JSON renders a time. Read with the row, each review's answers by
# the index on their review, since a chunk's answers read apart by their reviews' ids made PostgreSQL scan every
# answer of the table; as plain arrays, not a JSON object built per answer (and decoded again here), which was 40% of
# PostgreSQL's time on a row with answers (bench/README.md). The writers compose each answer's JSON.
_ANSWER_ORDER = ("answered_at", "pk")
_ANSWER_RECORD = Func(
    Cast("person_id", TextField()),
    Cast("checks", TextField()),
    "note",
    "outcome",
    Cast(Func("answered_at", function="to_json"), TextField()),
    template="ARRAY[%(expressions)s]",
    output_field=ArrayField(TextField()),
)
_ANSWERS = Subquery(
    Answer.objects.filter(review_id=OuterRef("pk"))
    .values("review_id")
    .annotate(given=ArrayAgg(_ANSWER_RECORD, order_by=_ANSWER_ORDER))
    .values("given")
)
_ANSWERS_READ = {"answers_given": _ANSWERS}


class _PerText(dict):
    """What `make` gives for each JSON text, made once per distinct text; emptied now and then, so memory stays flat
    however many rows go through."""

    def __init__(self, make: Callable[[str], object]) -> None:
        super().__init__()
        self.make = make

    def __missing__(self, text: str) -> object:
        if len(self) >= _PER_TEXT_KEPT:
            self.clear()
        value = self[text] = self.make(text)
        return value


_PER_TEXT_KEPT = 4096


def _iso_time(text: str) -> str:
    """PostgreSQL's text of a timestamptz (ISO DateStyle, which psycopg requires: "2026-12-05 17:00:00.25+00") as
    Python's isoformat() writes the same time ("2026-12-05T17:00:00.250000+00:00"): microseconds in six digits or
    none, the offset with its minutes."""
    if text[19] == ".":
        zone = max(text.rfind("+"), text.rfind("-"))  # the offset's sign, after the date's dashes
        clock = text[11:20] + text[20:zone].ljust(6, "0")
    else:
        zone = 19
        clock = text[11:19]
    offset = text[zone:]
    return text[:10] + "T" + clock + (offset + ":00" if len(offset) == 3 else offset)


# What the machine (and labellers) said of a review: empty in the rows of items people decide blind.
_VERDICTS_SAID = ("route", "reason", "score", "labels", "confidences", "certificate")


def export_rows(
    reviews: QuerySet[Review], *, f: ReviewFilter, reader_id: int | None, checks: Sequence[str]
) -> Iterator[tuple]:
    """One tuple per review in `columns_for(checks)` order, oldest first, read `CHUNK` rows at a time through a
    server-side cursor, each with its labels and people's answers; blind review's rule (grading/reviews/blind.py) for
    each chunk's items in one more query. Cells as `as_csv` and `as_jsonl` write them: the JSON columns as their JSON
    text, times as ISO text, the answers as records (person, checks as JSON, note, outcome, time as JSON).

    Blind review: a review of an item people decide blind is exported without what the machine or labellers said
    of it (withheld altogether when `f` picked it by what the machine said), and with only `reader_id`'s own
    answers while places are open; so are the answers of every other item."""
    columns = columns_for(checks)
    said = [columns.index(name) for name in (*_VERDICTS_SAID, *(f"check_{key}" for key in checks))]
    times = [columns.index(name) for name in _TIMES]
    answers_of = {f"check_{key}": _answer_of(key) for key in checks}
    values = (*_VALUES_BEFORE, *answers_of, *_VALUES_AFTER)
    rows = reviews.annotate(**_JSON_READ, **_ANSWERS_READ, **answers_of).order_by("pk").values_list(*values)
    rows = rows.iterator(chunk_size=CHUNK)
    people: dict[str, str] = {}  # who answered, by id as the records give it: their username
    while chunk := list(itertools.islice(rows, CHUNK)):
        blind = {
            kind: blind_items(kind, {row[-1] if kind == ItemKind.DRAFT else row[-2] for row in chunk if row[1] == kind})
            for kind in ItemKind.values
        }
        _people_read(people, {given[0] for row in chunk if row[-4] for given in row[-4]})
        weeks: dict[date, str] = {}
        for row in chunk:
            seen = blind[row[1]].get(row[-1] if row[1] == ItemKind.DRAFT else row[-2], SEEN)
            if seen.verdicts and f.reads_machine:
                continue
            out = [row[0], row[1], row[2] if row[2] is not None else row[3], *row[4:-4]]
            for i in times:
                if out[i] is not None:
                    out[i] = _iso_time(out[i])
            out[_STATE] = state_now(out[_STATE], criteria_active=row[-3])  # as the review reads now
            week = out[_WEEK]
            if week is not None:  # named as the page names it (2026-W49), not by its Monday
                out[_WEEK] = weeks.get(week) or weeks.setdefault(week, iso_week(week))
            if seen.verdicts:
                for i in said:
                    out[i] = None
            given = row[-4]
            if given is not None and seen.answers:
                given = [
                    answer for answer in given
                    if not seen.hides_answer(person_id=int(answer[0]), reader_id=reader_id)
                ]  # fmt: skip
            yield (*out, [(people[a[0]], a[1], a[2], a[3], a[4]) for a in given] if given else None)


def _people_read(people: dict[str, str], ids: set[str]) -> None:
    """The usernames of those who gave the answers, read once an export for each person: not joined per answer."""
    if missing := ids - people.keys():
        users = get_user_model().objects.filter(pk__in=[int(i) for i in missing]).values_list("pk", "username")
        people.update((str(pk), username) for pk, username in users)


# Times come as ISO text; the JSON columns as their text, of which the CSV writes the token counts as the values
# they hold (a number stays a number) and the rest as JSON; the answers as records.
_TIMES = ("started_at", "finished_at", "decided_at", "routed_at", "due_at")
_JSON = ("slice", "judge", "confidences", "decision_checks", "labels")
_VALUES = ("prompt_tokens", "completion_tokens")


# One encoder each, made once: json.dumps with options makes a new one for every value.
_CSV_JSON = json.JSONEncoder(sort_keys=True, ensure_ascii=False).encode


def _csv_answers(given: list[tuple], checks_of: _PerText) -> str:
    """The answers as `_CSV_JSON` writes them (sorted keys), composed from each record's parts: its checks encoded
    once per distinct text, the time already JSON, each text through the encoder's own string escaping."""
    return (
        "["
        + ", ".join(
            f'{{"answered_at": {at}, "checks": {checks_of[checks]}, "note": {_string(note)}, '
            f'"outcome": {_string(outcome)}, "person": {_string(person)}}}'
            for person, checks, note, outcome, at in given
        )
        + "]"
    )


def as_csv(rows: Iterable[tuple], columns: Sequence[str]) -> Iterator[str]:
    json_cells = [columns.index(name) for name in _JSON]
    value_cells = [columns.index(name) for name in _VALUES]
    answers_at = columns.index("answers")
    encoded, decoded = _PerText(lambda text: _CSV_JSON(json.loads(text))), _PerText(json.loads)

    def cells(row: tuple) -> list:
        cells = list(row)
        for i in json_cells:
            if cells[i] is not None:
                cells[i] = encoded[cells[i]]
        for i in value_cells:
            if cells[i] is not None:
                cells[i] = decoded[cells[i]]
        if cells[answers_at] is not None:
            cells[answers_at] = _csv_answers(cells[answers_at], encoded)
        return cells

    return csv_lines(itertools.chain([columns], map(cells, rows)))


_JSONL = json.JSONEncoder(ensure_ascii=False).encode


def as_jsonl(rows: Iterable[tuple], columns: Sequence[str]) -> Iterator[str]:
    json_cells = [columns.index(name) for name in (*_JSON, *_VALUES)]
    answers_at = columns.index("answers")
    decoded = _PerText(json.loads)
    for row in rows:
        cells = list(row)
        for i in json_cells:
            if cells[i] is not None:
                cells[i] = decoded[cells[i]]
        if (given := cells[answers_at]) is not None:
            # Each answer's keys in the order jsonb gave them when an answer came as a jsonb object (shortest
            # first); a time as JSON has nothing to unescape, so its text is the JSON less its quotes.
            cells[answers_at] = [
                {"note": note, "checks": decoded[checks], "person": person, "outcome": outcome, "answered_at": at[1:-1]}
                for person, checks, note, outcome, at in given
            ]
        yield _JSONL(dict(zip(columns, cells, strict=True))) + "\n"

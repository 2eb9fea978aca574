"""Human verdicts from outside the queue (DESIGN 2, 8): a spreadsheet, another annotation tool. Each label is bound
to its item's fingerprint when it is recorded, so it speaks about that evidence and nothing later; agreement
pairs it with the machine's counting review of the same evidence (grading/rollups.py)."""

import csv
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Literal

from django.db import transaction
from django.utils import timezone
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from grading.models import LIVE_STATES, Conversation, Draft, ItemKind, Label, Org, Review
from grading.outcomes import CHECKS
from grading.rollups import rollups_tracking
from grading.schemas import ExternalId, Identifier, ZonedTime

MAX_LABELS_PER_REQUEST = 5000
CHECK_NAMES = (*CHECKS, Label.PASS_FAIL)


class LabelIn(BaseModel):
    """One label: the item's external id, what it judges (a check, or pass_fail), the verdict, who, when."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    item: ExternalId = Field(description="the conversation's or draft's external id")
    kind: Literal["conversation", "draft"] | None = Field(
        default=None, description="needed only when a conversation and a draft share the external id"
    )
    check: str = Field(description="grounded, complete, usable, or pass_fail (drafts: pass_fail only)")
    verdict: Literal["pass", "fail", "unknown"]
    labeller: Annotated[Identifier, Field(min_length=1, max_length=200)]
    time: ZonedTime | None = Field(default=None, description="when it was labelled (ISO-8601); default: now")

    @field_validator("check", mode="before")
    @classmethod
    def _check_name(cls, value: object) -> object:
        if isinstance(value, str) and value.strip().lower() in ("pass/fail", "pass-fail", "passfail"):
            return Label.PASS_FAIL
        if isinstance(value, str) and value.strip().lower() not in CHECK_NAMES:
            raise ValueError(f"must be one of {', '.join(CHECK_NAMES)}")
        return value.strip().lower() if isinstance(value, str) else value


class InvalidLabel(Exception):
    """A label that cannot be recorded; `field` names what to fix. Nothing was written."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class LabelResult:
    label: Label
    status: Literal["created", "updated", "unchanged"]


def label_record(*, org: Org, label: LabelIn, source: str) -> LabelResult:
    """Record one label against the item's present evidence; recording the same label again changes nothing.

    1. Find the item in the org (by kind when given); lock its row so its fingerprint holds while we write.
    2. A draft is labelled pass_fail only, with pass or fail.
    3. One label per (item, fingerprint, check, labeller): a new verdict or time replaces the old one.
    The rollups are booked for the item's live review, in the same transaction.
    """
    with transaction.atomic():
        subject = _locked_subject(org, label)
        if isinstance(subject, Draft):
            if label.check != Label.PASS_FAIL:
                raise InvalidLabel("check", "a draft is labelled pass_fail only")
            if label.verdict not in ("pass", "fail"):
                raise InvalidLabel("verdict", "a draft is labelled pass or fail")
        field = "draft" if isinstance(subject, Draft) else "conversation"
        live = Review.objects.filter(**{field: subject}, state__in=LIVE_STATES).values_list("pk", flat=True)
        labelled_at = label.time or timezone.now()
        with rollups_tracking(list(live)):
            existing = Label.objects.filter(
                **{field: subject}, fingerprint=subject.fingerprint, check_name=label.check, labeller=label.labeller
            ).first()
            if existing is None:
                created = Label.objects.create(
                    org=org,
                    kind=ItemKind.DRAFT if field == "draft" else ItemKind.CONVERSATION,
                    **{field: subject},
                    fingerprint=subject.fingerprint,
                    check_name=label.check,
                    verdict=label.verdict,
                    labeller=label.labeller,
                    source=source[:200],
                    labelled_at=labelled_at,
                )
                return LabelResult(created, "created")
            if existing.verdict == label.verdict and (label.time is None or existing.labelled_at == label.time):
                return LabelResult(existing, "unchanged")
            existing.verdict, existing.labelled_at, existing.source = label.verdict, labelled_at, source[:200]
            existing.save(update_fields=["verdict", "labelled_at", "source"])
            return LabelResult(existing, "updated")


def _locked_subject(org: Org, label: LabelIn) -> Conversation | Draft:
    found: list[Conversation | Draft] = []
    if label.kind in (None, ItemKind.CONVERSATION):
        found += Conversation.objects.select_for_update().filter(org=org, external_id=label.item)
    if label.kind in (None, ItemKind.DRAFT):
        found += Draft.objects.select_for_update().filter(org=org, external_id=label.item)
    if not found:
        raise InvalidLabel("item", f"no conversation or draft {label.item!r} in this org")
    if len(found) > 1:
        raise InvalidLabel("kind", f"{label.item!r} is both a conversation and a draft: give kind")
    return found[0]


# --- files: CSV or JSONL ------------------------------------------------------------------------------------

# Spreadsheet headings people use for the same thing.
_ALIASES = {"external_id": "item", "item_id": "item", "id": "item", "labelled_at": "time", "labeled_at": "time",
            "at": "time", "annotator": "labeller", "labeler": "labeller", "label": "verdict"}  # fmt: skip


@dataclass(frozen=True)
class ImportProblem:
    line: int
    field: str
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.field}: {self.message}"


@dataclass(frozen=True)
class ImportReport:
    created: int
    updated: int
    unchanged: int
    problems: list[ImportProblem]


def labels_import(*, org: Org, text: str, file_format: str, source: str) -> ImportReport:
    """Record every good row of a CSV (with a header line) or JSONL file, each in its own transaction; report each
    bad row by its line number and go on with the rest."""
    counts = {"created": 0, "updated": 0, "unchanged": 0}
    problems: list[ImportProblem] = []
    for line, row in _rows(text, file_format, problems):
        try:
            result = label_record(org=org, label=LabelIn.model_validate(row), source=source)
        except ValidationError as exc:
            for error in exc.errors():
                field = ".".join(str(part) for part in error["loc"]) or "row"
                problems.append(ImportProblem(line, field, error["msg"]))
            continue
        except InvalidLabel as exc:
            problems.append(ImportProblem(line, exc.field, exc.message))
            continue
        counts[result.status] += 1
    return ImportReport(**counts, problems=sorted(problems, key=lambda p: p.line))


def _rows(text: str, file_format: str, problems: list[ImportProblem]) -> Iterator[tuple[int, dict]]:
    if file_format == "jsonl":
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                problems.append(ImportProblem(number, "row", f"not JSON: {exc}"))
                continue
            if not isinstance(row, dict):
                problems.append(ImportProblem(number, "row", "each line must be a JSON object"))
                continue
            yield number, _canonical(row)
        return
    reader = csv.DictReader(io.StringIO(text))
    for row in reader:
        # The header is line 1; a quoted field may span lines, so ask the reader where this row ended.
        cleaned = {key: value for key, value in row.items() if key is not None and value not in (None, "")}
        if None in row:
            problems.append(ImportProblem(reader.line_num, "row", "more fields than the header names"))
            continue
        yield reader.line_num, _canonical(cleaned)


def _canonical(row: dict) -> dict:
    out = {}
    for key, value in row.items():
        name = str(key).strip().lower()
        out[_ALIASES.get(name, name)] = value
    return out


def file_format_of(path: str, given: str | None) -> str:
    if given:
        return given
    return "jsonl" if path.lower().endswith((".jsonl", ".ndjson", ".json")) else "csv"

"""Human verdicts from outside the queue: a spreadsheet, another annotation tool. Each label is bound
to its item's fingerprint when it is recorded, so it speaks about that evidence and nothing later; agreement
pairs it with the machine's counting review of the same evidence (grading/reviews/rollups.py)."""

import csv
import io
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Literal, TypeVar

from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from grading.checks.answers import answer_refusal
from grading.checks.definitions import CheckSet
from grading.core.errors import FieldInvalid
from grading.core.schemas import ExternalId, Identifier, ZonedTime
from grading.delivery import enqueue
from grading.models import (
    LIVE_STATES,
    ApiKey,
    AuditEvent,
    Conversation,
    CriteriaVersion,
    Draft,
    ItemKind,
    Label,
    Org,
    Review,
)
from grading.models.audit import audit_event
from grading.models.criteria import default_checks
from grading.reviews.rollups import rollups_tracking

# Pass or fail of the whole item, labelled beside (or instead of) its checks: a draft's only label.
PASS_FAIL_ANSWERS = {ItemKind.CONVERSATION: ("pass", "fail", "unknown"), ItemKind.DRAFT: ("pass", "fail")}
# Labels written per transaction: their items stay locked until it commits. A batch costs a few statements whatever
# its size plus a little per label (bench/bench_labels.py), so one this size holds its locks for a small part of a
# second, and a long request is written in many short transactions.
LABELS_PER_TRANSACTION = 200
T = TypeVar("T")


class LabelIn(BaseModel):
    """One label: the item's external id, what it judges (a check, or pass_fail), the answer, who, when. Which checks
    and answers an item may be labelled with is its criteria's business (`_refusal`), not the shape's."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    item: ExternalId = Field(description="the conversation's or draft's external id")
    kind: Literal["conversation", "draft"] | None = Field(
        default=None, description="needed only when a conversation and a draft share the external id"
    )
    check: str = Field(
        max_length=32,
        description="the key of a check the item's active criteria version asks, or pass_fail for the whole item "
        "(drafts: pass_fail only)",
    )
    verdict: str = Field(
        min_length=1,
        max_length=32,
        description="the answer, as the check allows it: pass, fail or unknown; a category's key; a score from 1 to "
        "the check's scale; unknown for any check",
    )
    labeller: Annotated[Identifier, Field(min_length=1, max_length=200)]
    time: ZonedTime | None = Field(default=None, description="when it was labelled (ISO-8601); default: now")

    @field_validator("check", mode="before")
    @classmethod
    def _check_name(cls, value: object) -> object:
        if isinstance(value, str) and value.strip().lower() in ("pass/fail", "pass-fail", "passfail"):
            return Label.PASS_FAIL
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("verdict", mode="before")
    @classmethod
    def _answer(cls, value: object) -> object:
        # A spreadsheet's score cell may arrive as a number; answers are stored as strings, lower-case.
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        return value.strip().lower() if isinstance(value, str) else value


class InvalidLabel(FieldInvalid):
    """A label that cannot be recorded; `field` names what to fix. Nothing was written for it."""


@dataclass(frozen=True)
class LabelResult:
    label: Label
    status: Literal["created", "updated", "unchanged"]


Subject = Conversation | Draft


def label_record(*, org: Org, label: LabelIn, source: str) -> LabelResult:
    """Record one label (see labels_record); raise InvalidLabel when it cannot be."""
    (result,) = labels_record(org=org, labels=[label], source=source)
    if isinstance(result, InvalidLabel):
        raise result
    return result


def labels_record(
    *, org: Org, labels: Sequence[LabelIn], source: str, api_key: ApiKey | None = None
) -> list[LabelResult | InvalidLabel]:
    """Record labels against their items' present evidence, in one transaction: for each, its result or why it
    cannot be recorded (the others are recorded all the same). Recording the same labels again changes nothing.

    1. Lock the items the labels name (in id order, so two writers cannot deadlock); their fingerprints hold.
    2. Refuse what cannot be recorded (_refusal): the others are recorded all the same.
    3. One label per (item, fingerprint, check, labeller): in the order given, a new verdict or time replaces the
       old one, whether it was stored before or sent earlier in `labels`.
    4. Write the new labels in one statement and the changed ones in another. The rollups are booked once for the
       items' live reviews, in the same transaction.
    5. Audit each label created or changed (under `api_key` when a key sent it), naming its item, in one more
       statement: the item's trail shows who labelled it.
    """
    source = source[:200]
    with transaction.atomic():
        subjects = _subjects(org, labels, lock=True)
        results: list[LabelResult | InvalidLabel | None] = _refusals(org, labels, subjects)
        chosen = {index: subjects[_key(label)][0] for index, label in enumerate(labels) if results[index] is None}
        if not chosen:
            return results  # type: ignore[return-value]
        live = Review.objects.filter(
            Q(conversation__in=[s for s in chosen.values() if isinstance(s, Conversation)])
            | Q(draft__in=[s for s in chosen.values() if isinstance(s, Draft)]),
            state__in=LIVE_STATES,
        ).values_list("pk", flat=True)
        with rollups_tracking(list(live)):
            stored = _stored_labels(labels, chosen)
            created: list[Label] = []
            changed: dict[int, Label] = {}
            now = timezone.now()
            for index, subject in chosen.items():
                label = labels[index]
                identity = _identity(subject, label.check, label.labeller)
                existing = stored.get(identity)
                if existing is None:
                    stored[identity] = _new_label(org, subject, label, source, now)
                    created.append(stored[identity])
                    results[index] = LabelResult(stored[identity], "created")
                elif existing.verdict == label.verdict and (label.time is None or existing.labelled_at == label.time):
                    results[index] = LabelResult(existing, "unchanged")
                else:
                    existing.verdict, existing.labelled_at, existing.source = label.verdict, label.time or now, source
                    if existing.pk is not None:
                        changed[existing.pk] = existing
                    results[index] = LabelResult(existing, "updated")
            Label.objects.bulk_create(created)
            Label.objects.bulk_update(changed.values(), ["verdict", "labelled_at", "source"])
            AuditEvent.objects.bulk_create(
                _label_event(org, results[index], subject, api_key)  # type: ignore[arg-type]
                for index, subject in chosen.items()
                if results[index].status != "unchanged"  # type: ignore[union-attr]
            )
        if (created or changed) and _certifies(org):
            transaction.on_commit(lambda: enqueue.certificates_refresh(org_id=org.pk))
    return results  # type: ignore[return-value]


def _certifies(org: Org) -> bool:
    """A version of the org routes by a certificate, which new labels may move."""
    return CriteriaVersion.objects.filter(org=org, is_active=True, certify_agreement__isnull=False).exists()


def _label_event(org: Org, result: LabelResult, subject: Subject, api_key: ApiKey | None) -> AuditEvent:
    label = result.label
    return audit_event(
        action=f"label.{'create' if result.status == 'created' else 'update'}",
        org=org,
        api_key=api_key,
        target=label,
        detail={
            "check": label.check_name,
            "verdict": label.verdict,
            "labeller": label.labeller,
            "source": label.source,
            "fingerprint": label.fingerprint,
            "labelled_at": label.labelled_at.isoformat(),
        },
        item=subject,
    )


class LabelsRefused(Exception):
    """Labels that cannot be recorded, by their index in what was sent."""

    def __init__(self, refusals: list[tuple[int, InvalidLabel]]) -> None:
        super().__init__("; ".join(f"{index}: {why}" for index, why in refusals))
        self.refusals = refusals


def labels_submit(*, org: Org, labels: Sequence[LabelIn], source: str, api_key: ApiKey | None = None) -> dict[str, int]:
    """Record all of `labels` or none (LabelsRefused names each that cannot be); how many were created, updated
    and unchanged. Written LABELS_PER_TRANSACTION at a time, so each item is locked for one batch only.

    1. Check every label first, reading without locks: a label that cannot be recorded refuses them all.
    2. Record them in batches, each in its own transaction. An item deleted or added (making an id ambiguous)
       between the check and its batch refuses that batch; the batches before it stay recorded. Recording the
       same labels again changes nothing, so sending the request again finishes what was cut short.
    """
    refusals = _refusals(org, labels, _subjects(org, labels, lock=False))
    if refused := [(index, why) for index, why in enumerate(refusals) if why is not None]:
        raise LabelsRefused(refused)
    counts = {"created": 0, "updated": 0, "unchanged": 0}
    for offset, batch in _batches(labels):
        results = labels_record(org=org, labels=batch, source=source, api_key=api_key)
        if refused := [(offset + i, why) for i, why in enumerate(results) if isinstance(why, InvalidLabel)]:
            raise LabelsRefused(refused)
        for result in results:
            counts[result.status] += 1  # type: ignore[union-attr]
    return counts


def _batches(items: Sequence[T]) -> Iterator[tuple[int, Sequence[T]]]:
    """`items` LABELS_PER_TRANSACTION at a time, each with its offset."""
    for offset in range(0, len(items), LABELS_PER_TRANSACTION):
        yield offset, items[offset : offset + LABELS_PER_TRANSACTION]


def _key(label: LabelIn) -> tuple[str | None, str]:
    return label.kind, label.item


def _subjects(org: Org, labels: Sequence[LabelIn], *, lock: bool) -> dict[tuple[str | None, str], list[Subject]]:
    """The items each (kind, external id) of `labels` can mean, the rows locked when `lock`."""
    wanted = {ItemKind.CONVERSATION: set(), ItemKind.DRAFT: set()}
    for label in labels:
        for kind in (label.kind,) if label.kind else wanted:
            wanted[kind].add(label.item)
    found: dict[tuple[str, str], Subject] = {}
    for kind, model in ((ItemKind.CONVERSATION, Conversation), (ItemKind.DRAFT, Draft)):
        if not wanted[kind]:
            continue
        rows = model.objects.filter(org=org, external_id__in=wanted[kind]).only("pk", "external_id", "fingerprint")
        for row in rows.select_for_update().order_by("pk") if lock else rows:
            found[kind, row.external_id] = row
    return {
        _key(label): [
            found[kind, label.item] for kind in ((label.kind,) if label.kind else wanted) if (kind, label.item) in found
        ]
        for label in labels
    }


def _refusals(org: Org, labels: Sequence[LabelIn], subjects: dict) -> list[InvalidLabel | None]:
    """For each label, why it cannot be recorded against the items `subjects` found, or None."""
    # Only a conversation is labelled on checks (a draft on pass_fail alone): its version is read when one is named.
    named = any(isinstance(subject, Conversation) for found in subjects.values() for subject in found)
    checks = _labelled_checks(org, ItemKind.CONVERSATION) if named else (default_checks(ItemKind.CONVERSATION), None)
    return [_refusal(label, subjects[_key(label)], checks) for label in labels]


def _labelled_checks(org: Org, kind: str) -> tuple[CheckSet, int | None]:
    """The checks an item of `kind` is labelled on: those its org's active criteria version asks (the version its
    counting review is graded under, which a label is compared with), and that version's number."""
    version = CriteriaVersion.objects.filter(org=org, kind=kind, is_active=True).first()
    return (version.check_set(), version.number) if version is not None else (default_checks(kind), None)


def _refusal(label: LabelIn, found: list[Subject], checks: tuple[CheckSet, int | None]) -> InvalidLabel | None:
    if not found:
        return InvalidLabel("item", f"no conversation or draft {label.item!r} in this org")
    if len(found) > 1:
        return InvalidLabel("kind", f"{label.item!r} is both a conversation and a draft: give kind")
    kind = _kind_of(found[0])
    if label.check == Label.PASS_FAIL:
        answers = PASS_FAIL_ANSWERS[kind]
        if label.verdict not in answers:
            return InvalidLabel("verdict", f"{label.verdict!r} is not a pass_fail label: one of {', '.join(answers)}")
        return None
    if kind == ItemKind.DRAFT:
        return InvalidLabel("check", "a draft is labelled pass_fail only")
    check_set, number = checks
    if label.check not in check_set.keys:
        version = f"v{number}" if number is not None else "v1"
        return InvalidLabel(
            "check",
            f"{label.check!r} is not a check of the active {kind} criteria ({version}): one of "
            f"{', '.join((*check_set.keys, Label.PASS_FAIL))}",
        )
    if refusal := answer_refusal(check_set[label.check], label.verdict):
        return InvalidLabel("verdict", refusal)
    return None


def _identity(subject: Subject, check: str, labeller: str) -> tuple:
    """What a label is unique by (the model's constraints): its item, the item's evidence, the check, the labeller."""
    return _kind_of(subject), subject.pk, subject.fingerprint, check, labeller


def _kind_of(subject: Subject) -> ItemKind:
    return ItemKind.DRAFT if isinstance(subject, Draft) else ItemKind.CONVERSATION


def _stored_labels(labels: Sequence[LabelIn], chosen: dict[int, Subject]) -> dict[tuple, Label]:
    subjects = list(chosen.values())
    candidates = Label.objects.filter(
        Q(conversation__in=[s.pk for s in subjects if isinstance(s, Conversation)])
        | Q(draft__in=[s.pk for s in subjects if isinstance(s, Draft)]),
        fingerprint__in={s.fingerprint for s in subjects},
        labeller__in={labels[index].labeller for index in chosen},
    )
    stored = {}
    for label in candidates:
        item_id = label.conversation_id or label.draft_id
        stored[label.kind, item_id, label.fingerprint, label.check_name, label.labeller] = label
    return stored


def _new_label(org: Org, subject: Subject, label: LabelIn, source: str, now: datetime) -> Label:
    kind = _kind_of(subject)
    return Label(
        org=org,
        kind=kind,
        **{"draft" if kind == ItemKind.DRAFT else "conversation": subject},
        fingerprint=subject.fingerprint,
        check_name=label.check,
        verdict=label.verdict,
        labeller=label.labeller,
        source=source,
        labelled_at=label.time or now,
    )


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


def labels_import(
    *, org: Org, text: str, file_format: str, source: str, on_batch: Callable[[int, int], None] | None = None
) -> ImportReport:
    """Record every good row of a CSV (with a header line) or JSONL file, LABELS_PER_TRANSACTION rows to a
    transaction; report each bad row by its line number and go on with the rest. `on_batch(done, total)` hears
    of each transaction committed, in valid rows."""
    counts = {"created": 0, "updated": 0, "unchanged": 0}
    problems: list[ImportProblem] = []
    valid: list[tuple[int, LabelIn]] = []
    for line, row in _rows(text, file_format, problems):
        try:
            valid.append((line, LabelIn.model_validate(row)))
        except ValidationError as exc:
            for error in exc.errors():
                field = ".".join(str(part) for part in error["loc"]) or "row"
                problems.append(ImportProblem(line, field, error["msg"]))
    done = 0
    for _, batch in _batches(valid):
        results = labels_record(org=org, labels=[label for _, label in batch], source=source)
        for (line, _), result in zip(batch, results, strict=True):
            if isinstance(result, InvalidLabel):
                problems.append(ImportProblem(line, result.field, result.message))
            else:
                counts[result.status] += 1
        done += len(batch)
        if on_batch is not None:
            on_batch(done, len(valid))
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

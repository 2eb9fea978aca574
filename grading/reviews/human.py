"""The human verdict of an item: what people said about the evidence the item holds NOW.

From a decision (grading/models/reviews.py `Decision`: one per review; where several people decide an item it is the
agreed or adjudicated one) on a review of the item's present fingerprint, or from its labels on the present
fingerprint, per check the verdict they all give (`labels_verdict`, which the dashboard reads too; a check the
labellers split on has none). A verdict about evidence the item has since moved on from speaks about nothing the item
holds, so it is no verdict of the item.

Sources: "audit", decisions on reviews in the audit sample (picked by a rule that ignores the machine); "decisions",
every decision; "labels", labels. How an outcome reads as verdicts is `answer_verdicts`
(grading/figures/definitions.py): a draft approved passes, rejected or sent back fails; a conversation's are its
checks.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db.models import F

from grading.core.sql_expressions import id_in
from grading.figures.definitions import answer_verdicts, labels_verdict
from grading.models import Conversation, Decision, Draft, ItemKind, Label

DECISION, LABEL = "decision", "label"
AUDIT, DECISIONS, LABELS = "audit", "decisions", "labels"  # the sources (TrialSource's people values)
SOURCES = (AUDIT, DECISIONS, LABELS)


@dataclass(frozen=True)
class HumanVerdict:
    item_id: int
    fingerprint: str
    checks: dict[str, str]  # check key -> the answer, as a review stores it; drafts: {"pass_fail": ...}
    note: str
    source: str  # DECISION | LABEL
    review_id: int | None  # the decided review, for decisions
    at: datetime  # when it was given: the decision's time, the latest of the labels behind it


def human_verdicts(
    *, org_id: int, kind: str, source: str, item_ids: Iterable[int] | None = None
) -> dict[int, HumanVerdict]:
    """The human verdict from `source` of each item of `kind` in the org (or of `item_ids`) that has one on its
    present evidence, by item id."""
    if source not in SOURCES:
        raise ValueError(f"unknown source of human verdicts: {source!r}")
    ids = None if item_ids is None else list(item_ids)
    if source == LABELS:
        return _label_verdicts(org_id, kind, ids)
    return _decision_verdicts(org_id, kind, ids, audit_only=source == AUDIT)


def human_verdict_of(subject: Draft | Conversation) -> HumanVerdict | None:
    """The item's human verdict on its present evidence: its decision if it has one, else its labels'."""
    kind = ItemKind.DRAFT if isinstance(subject, Draft) else ItemKind.CONVERSATION
    for source in (DECISIONS, LABELS):
        found = human_verdicts(org_id=subject.org_id, kind=kind, source=source, item_ids=[subject.pk])
        if subject.pk in found:
            return found[subject.pk]
    return None


def _decision_verdicts(org_id: int, kind: str, ids: list[int] | None, *, audit_only: bool) -> dict[int, HumanVerdict]:
    field = kind  # the review's foreign key to its subject is named after the kind
    decisions = Decision.objects.filter(
        org_id=org_id, review__kind=kind, review__fingerprint=F(f"review__{field}__fingerprint")
    )
    if audit_only:
        decisions = decisions.filter(review__audit=True)
    if ids is not None:
        decisions = decisions.filter(id_in(f"review__{field}_id", ids))
    rows = decisions.order_by(f"review__{field}_id", "-decided_at", "-pk").values_list(
        f"review__{field}_id", "review__fingerprint", "outcome", "checks", "note", "review_id", "decided_at"
    )
    verdicts: dict[int, HumanVerdict] = {}
    for item_id, fingerprint, outcome, checks, note, review_id, decided_at in rows:
        # Several reviews of the same evidence can be decided (a publication re-grades it): the latest decision
        # is the item's verdict.
        said = dict(answer_verdicts(kind, outcome, checks))
        if item_id not in verdicts and said:
            verdicts[item_id] = HumanVerdict(
                item_id=item_id,
                fingerprint=fingerprint,
                checks=said,
                note=note,
                source=DECISION,
                review_id=review_id,
                at=decided_at,
            )
    return verdicts


def _label_verdicts(org_id: int, kind: str, ids: list[int] | None) -> dict[int, HumanVerdict]:
    field = kind
    labels = Label.objects.filter(org_id=org_id, kind=kind, fingerprint=F(f"{field}__fingerprint"))
    if ids is not None:
        labels = labels.filter(id_in(f"{field}_id", ids))
    given: dict[int, tuple[str, dict[str, set[str]]]] = {}
    latest: dict[int, datetime] = {}
    for item_id, fingerprint, check, verdict, labelled_at in labels.values_list(
        f"{field}_id", "fingerprint", "check_name", "verdict", "labelled_at"
    ):
        given.setdefault(item_id, (fingerprint, {}))[1].setdefault(check, set()).add(verdict)
        latest[item_id] = max(labelled_at, latest.get(item_id, labelled_at))
    verdicts = {}
    for item_id, (fingerprint, by_check) in given.items():
        agreed = {
            check: verdict for check, said in sorted(by_check.items()) if (verdict := labels_verdict(said)) is not None
        }
        if agreed:
            verdicts[item_id] = HumanVerdict(
                item_id=item_id,
                fingerprint=fingerprint,
                checks=agreed,
                note="",
                source=LABEL,
                review_id=None,
                at=latest[item_id],
            )
    return verdicts

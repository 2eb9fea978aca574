"""The review cycle's audit sample (DESIGN 4.7, 8): the fixed-rule sample goes to people as audit items whatever
the machine decided, so the judge is measured on items it did not choose."""

from dataclasses import dataclass
from datetime import datetime

from django.db import transaction

from grading.audit import audit_record
from grading.models import Org
from grading.reviews import review_audit_mark
from grading.selectors import SampleCell, sample_conversations, sample_drafts


@dataclass(frozen=True)
class AuditSample:
    conversations: list[SampleCell]
    drafts: list[SampleCell]
    marked: list[int]  # review ids newly sent to people (the rest were sent before)


def audit_sample_send(
    *, org: Org, per_week: int, weeks: int, salt: str, now: datetime | None = None, send: bool = True
) -> AuditSample:
    """Pick the sample (conversations per application and week, drafts per week) and, unless `send` is off, mark
    each picked review as an audit item. The rule is deterministic, so running it again picks the same items and
    marks nothing new."""
    conversations = sample_conversations(org=org, per_week=per_week, weeks=weeks, salt=salt, now=now)
    drafts = sample_drafts(org=org, per_week=per_week, weeks=weeks, salt=salt, now=now)
    marked: list[int] = []
    if send:
        review_ids = [pk for cell in (*conversations, *drafts) for pk in cell.review_ids]
        with transaction.atomic():
            marked = review_audit_mark(review_ids=review_ids)
            if marked:
                detail = {"reviews": marked, "per_week": per_week, "weeks": weeks}
                audit_record(action="sample.audit", org=org, detail=detail)
    return AuditSample(conversations, drafts, marked)

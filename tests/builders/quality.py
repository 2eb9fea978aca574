"""Conversation quality by application and ISO week, for tests only (DESIGN 4.5): passes over resolved reviews,
the reviews with an unknown check beside the number, thumbs apart, read from the counting reviews with the ORM.

An oracle a test takes before and after something that must not change what counts. It files a review under the
ISO week its conversation started, which need not be the dashboard's rule: compare it only with itself.
"""

from dataclasses import dataclass

from django.db.models import Count, Q
from django.db.models.functions import ExtractIsoYear, ExtractWeek

from grading.models import Feedback, ItemKind, Org, Review, Route
from grading.outcomes import UNKNOWN_CHECK


@dataclass(frozen=True)
class QualityRow:
    application: str
    iso_year: int
    iso_week: int
    passed: int
    resolved: int  # reviews with no unknown check: the denominator
    with_unknown: int  # beside the number, never inside it
    thumbs_up: int
    thumbs_down: int

    @property
    def quality(self) -> float | None:
        return self.passed / self.resolved if self.resolved else None


def conversation_quality(org: Org) -> list[QualityRow]:
    """The quality number by application and ISO week of the conversation's start (DESIGN 4.5).

    passes over reviews with no unknown check; the count with an unknown stands beside it; thumbs apart.
    """
    week = {"iso_year": ExtractIsoYear("conversation__started_at"), "iso_week": ExtractWeek("conversation__started_at")}
    scored = (
        Review.objects.counting()
        .filter(org=org, kind=ItemKind.CONVERSATION)
        .annotate(**week)
        .values("conversation__application", "iso_year", "iso_week")
        .annotate(
            passed=Count("pk", filter=Q(route=Route.PASS)),
            resolved=Count("pk", filter=Q(route__in=[Route.PASS, Route.FAIL])),
            with_unknown=Count("pk", filter=Q(route=Route.HUMAN, reason=UNKNOWN_CHECK)),
        )
    )
    thumbs = (
        Feedback.objects.filter(conversation__org=org)
        .annotate(**week)
        .values("conversation__application", "iso_year", "iso_week")
        .annotate(up=Count("pk", filter=Q(value="up")), down=Count("pk", filter=Q(value="down")))
    )
    thumbs_by_key = {
        (t["conversation__application"], t["iso_year"], t["iso_week"]): (t["up"], t["down"]) for t in thumbs
    }
    rows = []
    for row in scored:
        key = (row["conversation__application"], row["iso_year"], row["iso_week"])
        up, down = thumbs_by_key.get(key, (0, 0))
        rows.append(QualityRow(*key, row["passed"], row["resolved"], row["with_unknown"], up, down))
    return sorted(rows, key=lambda r: (r.application, r.iso_year, r.iso_week))

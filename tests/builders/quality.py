"""Conversation quality by application and ISO week, for tests only: passes over resolved reviews,
the reviews with an unknown check beside the number, thumbs apart, read from the counting reviews with the ORM.

An oracle a test takes before and after something that must not change what counts. It files reviews and thumbs
by the dashboards' rule: a review under the application and week it was filed under when graded, a thumb under its
conversation's application and the ISO week it started (`grading.core.weeks.monday`).
"""

from collections import Counter
from dataclasses import dataclass
from datetime import date

from django.db.models import Count, Q

from grading.core.outcomes import UNKNOWN_CHECK
from grading.core.weeks import monday
from grading.models import Feedback, ItemKind, Org, Review, Route


@dataclass(frozen=True)
class QualityRow:
    application: str
    week: date  # its Monday
    passed: int
    resolved: int  # reviews with no unknown check: the denominator
    with_unknown: int  # beside the number, never inside it
    thumbs_up: int
    thumbs_down: int

    @property
    def quality(self) -> float | None:
        return self.passed / self.resolved if self.resolved else None


def conversation_quality(org: Org) -> list[QualityRow]:
    """The quality number by application and ISO week: passes over reviews with no unknown check; the
    count with an unknown stands beside it; thumbs apart."""
    scored = (
        Review.objects.counting()
        .filter(org=org, kind=ItemKind.CONVERSATION)
        .values("application", "week")
        .annotate(
            passed=Count("pk", filter=Q(route=Route.PASS)),
            resolved=Count("pk", filter=Q(route__in=[Route.PASS, Route.FAIL])),
            with_unknown=Count("pk", filter=Q(route=Route.HUMAN, reason=UNKNOWN_CHECK)),
        )
    )
    thumbs: Counter = Counter()
    feedback = Feedback.objects.filter(conversation__org=org)
    for application, started_at, value in feedback.values_list(
        "conversation__application", "conversation__started_at", "value"
    ):
        thumbs[(application, monday(started_at), value)] += 1
    rows = [
        QualityRow(
            row["application"],
            row["week"],
            row["passed"],
            row["resolved"],
            row["with_unknown"],
            thumbs[(row["application"], row["week"], "up")],
            thumbs[(row["application"], row["week"], "down")],
        )  # fmt: skip
        for row in scored
    ]
    return sorted(rows, key=lambda r: (r.application, r.week))

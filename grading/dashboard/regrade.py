"""How far the re-grade a publish started has come. Read from the rollup's state counters (kept per criteria
version), so it costs a page one statement and the grading path nothing.

A publish makes every live review of the kind an earlier version's; the version records how many there were
(`regrade_total`). Each one leaves the live states when its item is graded under the new version, so the
earlier versions' live reviews are what is left. The rate is the average since the publish.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from grading.models import LIVE_STATES, CriteriaVersion, Org
from grading.models.reach import Reach
from grading.reviews.rollups import scope_counters

StateCounts = Mapping[tuple[str, int, str], int]  # (kind, criteria version id, stored state) -> reviews


@dataclass(frozen=True)
class RegradeProgress:
    kind: str
    criteria_version: int  # its number
    published_at: datetime
    total: int
    left: int
    per_second: float | None

    @property
    def done(self) -> int:
        return self.total - self.left

    @property
    def seconds_left(self) -> float | None:
        if not self.left:
            return 0.0
        return self.left / self.per_second if self.per_second else None

    def as_json(self) -> dict:
        return {
            "kind": self.kind,
            "criteria_version": self.criteria_version,
            "published_at": self.published_at,
            "regraded": self.done,
            "total": self.total,
            "left": self.left,
            "per_minute": round(self.per_second * 60, 1) if self.per_second is not None else None,
            "seconds_left": round(self.seconds_left) if self.seconds_left is not None else None,
            "done": self.left == 0,
        }


def regrade_progress(version: CriteriaVersion, states: StateCounts, now: datetime) -> RegradeProgress | None:
    """The re-grade publishing `version` started, if it is the active version and there was anything to re-grade."""
    if not version.is_active or not version.regrade_total or version.published_at is None:
        return None
    earlier_live = sum(
        n
        for (kind, criteria_id, state), n in states.items()
        if kind == version.kind and criteria_id != version.pk and state in LIVE_STATES
    )
    left = min(earlier_live, version.regrade_total)
    done = version.regrade_total - left
    elapsed = (now - version.published_at).total_seconds()
    return RegradeProgress(
        kind=version.kind,
        criteria_version=version.number,
        published_at=version.published_at,
        total=version.regrade_total,
        left=left,
        per_second=done / elapsed if done and elapsed > 0 else None,
    )


def org_regrade_progress(org: Org, reach: Reach | None = None) -> list[RegradeProgress]:
    """Each kind's re-grade under its active version, read now, of the items within `reach` (None: all)."""
    today = timezone.localdate()
    states = scope_counters(org_id=org.pk, since=today, until=today, keep=reach and reach.covers).states
    now = timezone.now()
    progress = (
        regrade_progress(version, states, now)
        for version in CriteriaVersion.objects.filter(org=org, is_active=True).order_by("kind")
    )
    return [p for p in progress if p is not None]

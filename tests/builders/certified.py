"""Drafts graded by a judge that said how sure it was, and people's labels on some of them: the calibration set of a
certificate, written straight to the tables in bulk (the grading path that writes confidences has its own tests)."""

from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone

from grading.core.evidence import draft_fingerprint
from grading.models import CriteriaVersion, Draft, ItemKind, Label, Review, ReviewState, Route
from grading.reviews.versions import criteria_active
from tests.builders.queue_items import JUDGE

JUDGE_KEY = "judge-test"


@dataclass(frozen=True)
class Graded:
    """One draft as the judge saw it and as people labelled it (None: no label)."""

    confidence: float | None
    judge_passed: bool
    people_passed: bool | None


def graded_drafts(
    org, graded: list[Graded], *, version: CriteriaVersion | None = None, judge_key: str = JUDGE_KEY, label: bool = True
):
    """A draft per entry, its current review under `version` (the active draft version) by `judge_key`, and (with
    `label`) its label on the evidence the review read."""
    version = version or criteria_active(org=org, kind=ItemKind.DRAFT)
    now = timezone.now()
    start = Draft.objects.filter(org=org).count()
    drafts = Draft.objects.bulk_create(
        [
            Draft(
                org=org,
                external_id=f"calibrated-{start + n}",
                title=f"Draft {start + n}",
                slug=f"calibrated-{start + n}",
                body=f"body {start + n}",
                fingerprint=draft_fingerprint(title=f"Draft {start + n}", body=f"body {start + n}", source_urls=[]),
            )
            for n in range(len(graded))
        ]
    )
    Review.objects.bulk_create(
        [
            Review(
                org=org,
                kind=ItemKind.DRAFT,
                draft=draft,
                fingerprint=draft.fingerprint,
                criteria_version=version,
                judge=JUDGE,
                judge_key=judge_key,
                started_at=now - timedelta(minutes=n + 1),
                finished_at=now - timedelta(minutes=n),
                stages=1,
                route=Route.PASS if item.judge_passed else Route.FAIL,
                judge_passed=item.judge_passed,
                score=8.0 if item.judge_passed else 4.0,
                confidences={} if item.confidence is None else {Label.PASS_FAIL: item.confidence},
                confidence_source="" if item.confidence is None else "logprobs",
                state=ReviewState.CURRENT,
            )
            for n, (draft, item) in enumerate(zip(drafts, graded, strict=True))
        ]
    )
    Label.objects.bulk_create(
        [
            Label(
                org=org,
                kind=ItemKind.DRAFT,
                draft=draft,
                fingerprint=draft.fingerprint,
                check_name=Label.PASS_FAIL,
                verdict="pass" if item.people_passed else "fail",
                labeller="ana",
                source="labels.csv",
                labelled_at=now - timedelta(hours=n),
            )
            for n, (draft, item) in enumerate(zip(drafts, graded, strict=True))
            if label and item.people_passed is not None
        ]
    )
    return drafts


def agreeing(n: int, *, confidence: float = 0.95) -> list[Graded]:
    """`n` drafts the judge passed, sure of it, and people passed too."""
    return [Graded(confidence=confidence, judge_passed=True, people_passed=True) for _ in range(n)]

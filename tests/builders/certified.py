"""Drafts graded by a judge that said how sure it was, and people's labels on some of them: the calibration set of a
certificate, written straight to the tables in bulk (the grading path that writes confidences has its own tests)."""

from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone

from grading.core.evidence import draft_fingerprint
from grading.core.weeks import monday
from grading.judge.pass_probability import review_pass_probability
from grading.models import (
    CriteriaTrial,
    CriteriaVersion,
    Decision,
    Draft,
    ItemKind,
    Label,
    Review,
    ReviewState,
    Route,
    TrialSource,
)
from grading.reviews.rollups import rollups_rebuild
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
            judged(version, draft, item, judge_key=judge_key, at=now - timedelta(minutes=n), state=ReviewState.CURRENT)
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


def judged(version: CriteriaVersion, draft: Draft, item: Graded, *, judge_key: str, at, state: str) -> Review:
    """The review of `draft` under `version` as `item` says the judge saw it, finished `at`, filed in its week as
    review_record files a draft's (its verdict's)."""
    return Review(
        org_id=version.org_id,
        kind=ItemKind.DRAFT,
        draft=draft,
        fingerprint=draft.fingerprint,
        criteria_version=version,
        judge=JUDGE,
        judge_key=judge_key,
        started_at=at - timedelta(minutes=1),
        finished_at=at,
        stages=1,
        route=Route.PASS if item.judge_passed else Route.FAIL,
        judge_passed=item.judge_passed,
        score=8.0 if item.judge_passed else 4.0,
        confidences={} if item.confidence is None else {Label.PASS_FAIL: item.confidence},
        confidence_source="" if item.confidence is None else "logprobs",
        state=state,
        week=monday(at),
    )


def agreeing(n: int, *, confidence: float = 0.95) -> list[Graded]:
    """`n` drafts the judge passed, sure of it, and people passed too."""
    return [Graded(confidence=confidence, judge_passed=True, people_passed=True) for _ in range(n)]


def reviews_of(drafts) -> list[Review]:
    """The review `graded_drafts` wrote for each draft, in the drafts' order."""
    by_draft = {review.draft_id: review for review in Review.objects.filter(draft__in=drafts)}
    return [by_draft[draft.pk] for draft in drafts]


def filed_in(reviews, week) -> None:
    """File the reviews in the ISO week starting `week` (a Monday), as the dashboards read them."""
    Review.objects.filter(pk__in=[review.pk for review in reviews]).update(week=week)


def audit_decided(reviews, passed, person) -> None:
    """People's decisions on these reviews as audit items (the blind sample): each draft approved where `passed`
    says so, rejected otherwise."""
    now = timezone.now()
    Decision.objects.bulk_create(
        [
            Decision(
                org_id=review.org_id,
                review=review,
                outcome=Decision.Outcome.APPROVE if ok else Decision.Outcome.REJECT,
                decided_by=person,
                decided_at=now,
            )
            for review, ok in zip(reviews, passed, strict=True)
        ]
    )
    Review.objects.filter(pk__in=[review.pk for review in reviews]).update(state=ReviewState.DECIDED, audit=True)


def draft_trial(version: CriteriaVersion, drafts, graded: list[Graded], *, source: str = TrialSource.LABELS):
    """A finished trial of `version` on `drafts`, its review of each as `graded` says the judge saw it (on the
    evidence the draft holds), its people's verdicts from `source`."""
    now = timezone.now()
    reviews = Review.objects.bulk_create(
        [
            judged(version, draft, item, judge_key=JUDGE_KEY, at=now, state=ReviewState.TRIAL)
            for draft, item in zip(drafts, graded, strict=True)
        ]
    )
    return CriteriaTrial.objects.create(
        org_id=version.org_id,
        criteria_version=version,
        source=source,
        sample=[draft.pk for draft in drafts],
        review_ids=[review.pk for review in reviews],
        judge_calls=len(drafts),
        judge_calls_made=len(drafts),
        finished_at=now,
    )


def counted(org) -> None:
    """What the grading write does beside the rows these builders write straight to the tables: each review's pass
    probability computed from the review as it now stands (`review_pass_probability`), and the org's counters
    recounted (the certified panel reads them)."""
    for review in Review.objects.filter(org=org).select_related("criteria_version"):
        review.pass_probability = review_pass_probability(review)
        review.save(update_fields=["pass_probability"])
    rollups_rebuild(org_id=org.pk)

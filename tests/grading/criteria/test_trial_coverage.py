"""A trial reports the coverage its version would reach: the trial's reviews (with the judge's confidences) paired
with the trial's people's verdicts are certified as a certificate is, at the version's target or at 90%/90%."""

import json

import pytest
from django.urls import reverse
from django.utils import timezone

from grading.api.keys import api_key_create
from grading.certify.services import certify_target_set
from grading.certify.thresholds import CalibrationPoint, certify, split_delta
from grading.criteria.scoring import trial_score
from grading.models import CriteriaTrial, ItemKind, Label, Review, TrialSource
from grading.reviews.versions import criteria_new_version
from tests.builders.certified import Graded, draft_trial, graded_drafts
from tests.builders.own_checks import answered, asking, labelled, trial_review

pytestmark = pytest.mark.django_db


def mixed() -> list[Graded]:
    """Sure answers people agree with, unsure ones half of which they overturn, and items nobody labelled."""
    sure = [Graded(0.97, True, True) for _ in range(40)] + [Graded(0.96, False, False) for _ in range(20)]
    unsure = [Graded(0.6, True, n % 2 == 0) for n in range(20)]
    return sure + unsure + [Graded(0.99, True, None) for _ in range(10)]


def pairs(graded: list[Graded]) -> list[CalibrationPoint]:
    return [
        CalibrationPoint(confidence=item.confidence, agrees=item.judge_passed == item.people_passed)
        for item in graded
        if item.people_passed is not None and item.confidence is not None
    ]


@pytest.fixture
def draft_version(org):
    return criteria_new_version(org=org, kind=ItemKind.DRAFT)


def test_a_trial_reports_the_coverage_its_version_would_reach_at_its_target(org, draft_version):
    certify_target_set(version=draft_version, actor=None, agreement=0.9, confidence=0.95)
    draft_version.refresh_from_db()
    graded = mixed()
    trial = draft_trial(draft_version, graded_drafts(org, graded), graded)

    coverage = trial_score(trial).coverage

    assert coverage.own_target and coverage.labels == 80
    assert coverage.checks[Label.PASS_FAIL] == certify(pairs(graded), alpha=1 - 0.9, delta=1 - 0.95)
    assert coverage.checks[Label.PASS_FAIL].coverage == pytest.approx(0.75)


def test_without_a_target_the_trial_reads_its_coverage_at_ninety_ninety_and_says_so(
    org, draft_version, client, client_for, criteria_admin
):
    graded = mixed()
    trial = draft_trial(draft_version, graded_drafts(org, graded), graded)

    coverage = trial_score(trial).coverage
    assert not coverage.own_target
    assert coverage.checks[Label.PASS_FAIL] == certify(pairs(graded), alpha=0.1, delta=0.1)

    html = client_for(criteria_admin).get(reverse("criteria_trial_detail", args=[trial.pk])).content.decode()
    assert 'id="trial-coverage"' in html and "no target of its own: read at 90% agreement, 90% confidence" in html
    assert "75.0%" in html  # the share of the trial's items the machine would decide alone
    key = api_key_create(org=org, name="tools").plaintext
    body = client.get(f"/api/v1/criteria/trials/{trial.pk}", HTTP_AUTHORIZATION=f"Bearer {key}").json()
    assert body["coverage"] == json.loads(json.dumps(coverage.as_json()))


def test_a_trial_on_every_decision_reports_no_coverage(org, draft_version, client_for, criteria_admin):
    graded = mixed()
    trial = draft_trial(draft_version, graded_drafts(org, graded), graded, source=TrialSource.DECISIONS)
    assert trial_score(trial).coverage is None
    html = client_for(criteria_admin).get(reverse("criteria_trial_detail", args=[trial.pk])).content.decode()
    assert "the items the machine sent to people" in html


def test_a_conversation_trial_splits_the_confidence_among_its_required_checks(org):
    version = asking(criteria_new_version(org=org, kind=ItemKind.CONVERSATION))  # grounded, cites_policy required
    items, reviews = [], []
    for n in range(36):
        item = answered(org, f"cv-{n}", {"grounded": "pass", "cites_policy": "pass"})
        mine = trial_review(version, item, {"grounded": "pass", "cites_policy": "fail" if n % 9 == 0 else "pass"})
        Review.objects.filter(pk=mine.pk).update(confidences={"grounded": 0.99, "cites_policy": 0.7 + n / 200})
        labelled(item, "ann", grounded="pass", cites_policy="pass")
        items.append(item)
        reviews.append(mine)
    trial = CriteriaTrial.objects.create(
        org=org, criteria_version=version, source=TrialSource.LABELS, sample=[i.conversation_id for i in items],
        review_ids=[r.pk for r in reviews], judge_calls=36, judge_calls_made=36, finished_at=timezone.now(),
    )  # fmt: skip

    coverage = trial_score(trial).coverage

    delta = split_delta(0.1, 2)
    grounded = [CalibrationPoint(0.99, True)] * 36
    cites = [CalibrationPoint(0.7 + n / 200, n % 9 != 0) for n in range(36)]
    assert coverage.checks == {
        "grounded": certify(grounded, alpha=0.1, delta=delta),
        "cites_policy": certify(cites, alpha=0.1, delta=delta),
    }
    assert coverage.labels == 36 and coverage.checks["grounded"].coverage == 1.0

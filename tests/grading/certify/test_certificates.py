"""Certificates from the rows: a version's calibration set under its judge, the certificate stored for its target,
and what drops it."""

from datetime import timedelta

import pytest
from django.utils import timezone

from grading.certify.calibration import calibration
from grading.certify.routing import certificate_for
from grading.certify.services import TargetInvalid, certificate_compute, certify_target_set, version_judge_key
from grading.certify.thresholds import CalibrationPoint, certify
from grading.dashboard.labels import LabelIn, labels_record
from grading.models import AuditEvent, Certificate, ItemKind, Label
from grading.reviews.services import PersonVerdict
from grading.reviews.versions import criteria_active, criteria_new_version, criteria_publish, criteria_update
from reviewer.queue.services import claim_take, decision_create
from tests.builders.certified import JUDGE_KEY, Graded, agreeing, graded_drafts
from tests.builders.processes import wait_until
from tests.builders.queue_items import draft_item
from tests.conftest import SECOND_JUDGE

pytestmark = pytest.mark.django_db


@pytest.fixture
def draft_version(org):
    version = criteria_active(org=org, kind=ItemKind.DRAFT)
    return certify_target_set(version=version, actor=None, agreement=0.9, confidence=0.9)


def mixed() -> list[Graded]:
    """Sure answers people agree with, unsure ones half of which they overturn, and items nobody labelled."""
    sure = [Graded(0.97, True, True) for _ in range(40)] + [Graded(0.96, False, False) for _ in range(20)]
    unsure = [Graded(0.6, True, n % 2 == 0) for n in range(20)]
    unlabelled = [Graded(0.99, True, None) for _ in range(10)]
    return sure + unsure + unlabelled


def test_the_certificate_equals_a_recomputation_from_the_rows(org, draft_version):
    graded_drafts(org, mixed())

    certificate = certificate_compute(draft_version, judge_key=JUDGE_KEY)

    points = [
        CalibrationPoint(g.confidence, g.judge_passed == g.people_passed)
        for g in mixed()
        if g.people_passed is not None
    ]
    expected = certify(points, alpha=0.1, delta=0.1)  # one certified key: the whole delta
    stored = certificate.checks[Label.PASS_FAIL]
    assert {key: stored[key] for key in expected.as_json()} == expected.as_json()
    assert stored["threshold"] == 0.96 and stored["coverage"] == 60 / 80
    assert certificate.labels == 80 and (certificate.agreement, certificate.confidence) == (0.9, 0.9)
    now = timezone.now()
    assert now - timedelta(hours=80) < certificate.labelled_from < certificate.labelled_to <= now


def test_too_few_labels_certify_nothing(org, draft_version):
    graded_drafts(org, agreeing(10))

    certificate = certificate_compute(draft_version, judge_key=JUDGE_KEY)

    assert certificate.checks[Label.PASS_FAIL]["threshold"] is None
    assert certificate.checks[Label.PASS_FAIL]["more_labels"] > 0


def test_when_the_most_confident_answers_fail_people_nothing_is_certified(org, draft_version):
    overturned = [Graded(0.99, True, False) for _ in range(10)]
    graded_drafts(org, overturned + agreeing(60, confidence=0.8))

    certificate = certificate_compute(draft_version, judge_key=JUDGE_KEY)

    assert certificate.checks[Label.PASS_FAIL]["threshold"] is None  # abstain, never accept everything


def test_items_the_machine_sent_to_people_are_not_calibration(org, draft_version, operator):
    """A decision on an item routed to people for doubt is a biased sample: only the audit sample and labels count."""
    routed = draft_item(org, confidences={Label.PASS_FAIL: 0.9}, judge_passed=False)
    claim_take(user=operator, review_id=routed.pk)
    decision_create(
        user=operator, review_id=routed.pk, fingerprint=routed.fingerprint, verdict=PersonVerdict(outcome="approve")
    )

    assert calibration(draft_version, judge_key=JUDGE_KEY).labels == 0


def test_an_unchanged_computation_writes_no_new_certificate(org, draft_version):
    graded_drafts(org, agreeing(30))
    first = certificate_compute(draft_version, judge_key=JUDGE_KEY)

    assert certificate_compute(draft_version, judge_key=JUDGE_KEY) == first
    graded_drafts(org, agreeing(5))
    assert certificate_compute(draft_version, judge_key=JUDGE_KEY) != first


def test_another_version_another_judge_or_another_target_has_no_certificate(org, draft_version, criteria_admin):
    graded_drafts(org, agreeing(30))
    certificate_compute(draft_version, judge_key=JUDGE_KEY)
    assert certificate_for(draft_version, judge_key=JUDGE_KEY) is not None

    assert certificate_for(draft_version, judge_key="another-judge") is None
    clone = criteria_new_version(org=org, kind=ItemKind.DRAFT, author=criteria_admin, source=draft_version)
    assert certificate_for(clone, judge_key=JUDGE_KEY) is None
    changed = certify_target_set(version=draft_version, actor=criteria_admin, agreement=0.95, confidence=0.9)
    assert certificate_for(changed, judge_key=JUDGE_KEY) is None
    assert Certificate.objects.count() == 1


def test_setting_a_target_is_audited_and_half_a_target_is_refused(org, draft_version, criteria_admin):
    with pytest.raises(TargetInvalid):
        certify_target_set(version=draft_version, actor=criteria_admin, agreement=0.9, confidence=None)
    with pytest.raises(TargetInvalid):
        certify_target_set(version=draft_version, actor=criteria_admin, agreement=1.0, confidence=0.9)
    draft_version.refresh_from_db()
    assert (draft_version.certify_agreement, draft_version.certify_confidence) == (0.9, 0.9)

    certify_target_set(version=draft_version, actor=criteria_admin, agreement=None, confidence=None)
    event = AuditEvent.objects.filter(action="criteria.certify_target").latest("pk")
    assert event.detail == {
        "from": {"agreement": 0.9, "confidence": 0.9},
        "to": {"agreement": None, "confidence": None},
    }


@pytest.mark.django_db(transaction=True)
def test_labels_arriving_recompute_the_certificate_in_the_background(celery_worker, second_llm, org):
    """The workers' judge `second` grades under the version; labels come in and the workers certify it."""
    version = criteria_new_version(org=org, kind=ItemKind.DRAFT)
    criteria_update(version=version, judge=SECOND_JUDGE)
    version = certify_target_set(version=criteria_publish(version=version), actor=None, agreement=0.9, confidence=0.9)
    judge_key = version_judge_key(version)
    drafts = graded_drafts(org, agreeing(30), version=version, judge_key=judge_key, label=False)

    labels = [LabelIn(item=draft.external_id, check="pass_fail", verdict="pass", labeller="ana") for draft in drafts]
    labels_record(org=org, labels=labels, source="labels.csv")

    def certified() -> bool:
        version.refresh_from_db()  # a new certificate moves its revision on
        certificate = certificate_for(version, judge_key=judge_key)
        return certificate is not None and certificate.labels == 30

    wait_until(certified, message="a certificate from the 30 labels")
    assert certificate_for(version, judge_key=judge_key).checks[Label.PASS_FAIL]["threshold"] == 0.95

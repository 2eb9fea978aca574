"""Routing under a certificate: the machine decides alone only where the judge's confidence stands at or above the
certified threshold; facts still decide, and the machine's own stated doubts still go to people."""

import pytest

from grading.certify.routing import certified_route
from grading.certify.services import certificate_compute, certify_target_set, version_judge_key
from grading.certify.thresholds import CalibrationPoint, certify
from grading.core.outcomes import BAND, BELOW_CERTIFIED, JUDGE_CONTRADICTION, UNKNOWN_CHECK
from grading.dashboard.figures import dashboard_figures, scope_for
from grading.dashboard.labels import LabelIn, labels_record
from grading.dashboard.sampling import audit_sample_send
from grading.drafts.gate import draft_grade
from grading.models import Certificate, ItemKind, Label, Review, Route
from grading.reviews.rollups import live_counters, rollups_rebuild, stored_counters
from grading.reviews.services import PersonVerdict, ReviewOutcome
from grading.reviews.versions import criteria_active
from reviewer.queue.services import claim_take, decision_create
from tests.builders.certified import JUDGE_KEY, agreeing, graded_drafts
from tests.builders.conversations import PATH_IDS, verdicts
from tests.builders.drafts import draft_verdict, save_draft, setup_org_memory
from tests.builders.judges import configure_judges, judge_config
from tests.fakes.openai_server import json_reply

pytestmark = pytest.mark.django_db


@pytest.fixture
def draft_version(org):
    version = criteria_active(org=org, kind=ItemKind.DRAFT)
    return certify_target_set(version=version, actor=None, agreement=0.9, confidence=0.9)


@pytest.fixture
def certificate(org, draft_version) -> Certificate:
    graded_drafts(org, agreeing(40, confidence=0.95))
    certificate = certificate_compute(draft_version, judge_key=JUDGE_KEY)
    assert certificate.checks[Label.PASS_FAIL]["threshold"] == 0.95
    return certificate


def draft_outcome(route: str, *, confidence: float | None, reason: str = "", passed: bool = False, findings=()):
    return ReviewOutcome(
        route=route,
        reason=reason,
        judge_passed=passed,
        findings=list(findings),
        confidences={} if confidence is None else {Label.PASS_FAIL: confidence},
    )


def test_a_certified_confident_judge_decides_a_draft_in_the_band(draft_version, certificate):
    routed = certified_route(
        draft_outcome(Route.HUMAN, confidence=0.97, reason=BAND), version=draft_version, judge_key=JUDGE_KEY
    )
    assert (routed.route, routed.reason, routed.certificate_id) == (Route.FAIL, "", certificate.pk)


def test_an_unsure_judge_sends_a_passing_draft_to_people(draft_version, certificate):
    routed = certified_route(
        draft_outcome(Route.PASS, confidence=0.9, passed=True), version=draft_version, judge_key=JUDGE_KEY
    )
    assert (routed.route, routed.reason, routed.certificate_id) == (Route.HUMAN, BELOW_CERTIFIED, certificate.pk)


def test_a_review_without_a_confidence_is_never_decided_under_a_certificate(draft_version, certificate):
    routed = certified_route(
        draft_outcome(Route.PASS, confidence=None, passed=True), version=draft_version, judge_key=JUDGE_KEY
    )
    assert (routed.route, routed.reason) == (Route.HUMAN, BELOW_CERTIFIED)


def test_a_finding_fails_the_draft_whatever_the_certificate(draft_version, certificate):
    outcome = draft_outcome(Route.FAIL, confidence=0.1, findings=[{"code": "banned_word"}])
    assert certified_route(outcome, version=draft_version, judge_key=JUDGE_KEY) == outcome


def test_a_judge_contradicting_itself_still_goes_to_people(draft_version, certificate):
    outcome = draft_outcome(Route.HUMAN, confidence=0.99, reason=JUDGE_CONTRADICTION)
    assert certified_route(outcome, version=draft_version, judge_key=JUDGE_KEY) == outcome


def test_with_a_target_and_no_certificate_yet_everything_goes_to_people(draft_version):
    routed = certified_route(
        draft_outcome(Route.PASS, confidence=0.999, passed=True), version=draft_version, judge_key=JUDGE_KEY
    )
    assert (routed.route, routed.reason, routed.certificate_id) == (Route.HUMAN, BELOW_CERTIFIED, None)


def test_without_a_target_the_fixed_bands_route(org):
    version = criteria_active(org=org, kind=ItemKind.DRAFT)
    outcome = draft_outcome(Route.PASS, confidence=0.1, passed=True)
    assert certified_route(outcome, version=version, judge_key=JUDGE_KEY) == outcome


@pytest.fixture
def conversation_version(org):
    version = criteria_active(org=org, kind=ItemKind.CONVERSATION)
    version = certify_target_set(version=version, actor=None, agreement=0.9, confidence=0.9)
    sure = {"threshold": 0.9, "labels": 100, "disagreements": 0, "bound": 0.05, "coverage": 0.8, "more_labels": 10}
    Certificate.objects.create(
        org=org, criteria_version=version, judge_key=JUDGE_KEY, agreement=0.9, confidence=0.9, labels=100,
        checks={"grounded": sure, "complete": sure, "usable": sure}, computed_at=version.created_at,
    )  # fmt: skip
    return version


def conversation_outcome(route: str, checks: dict, confidences: dict, reason: str = "") -> ReviewOutcome:
    return ReviewOutcome(route=route, reason=reason, checks=checks, confidences=confidences)


def test_a_conversation_is_decided_alone_only_when_every_required_check_is_certified(conversation_version):
    confident = {"grounded": 0.95, "complete": 0.97, "usable": 0.99}
    routed = certified_route(
        conversation_outcome(Route.PASS, verdicts(PATH_IDS), confident),
        version=conversation_version,
        judge_key=JUDGE_KEY,
    )
    assert (routed.route, routed.reason) == (Route.PASS, "") and routed.certificate_id is not None

    unsure = confident | {"usable": 0.7}
    routed = certified_route(
        conversation_outcome(Route.FAIL, verdicts(PATH_IDS, grounded="fail"), unsure),
        version=conversation_version,
        judge_key=JUDGE_KEY,
    )
    assert (routed.route, routed.reason) == (Route.HUMAN, BELOW_CERTIFIED)


def test_a_rule_failing_a_required_check_decides_as_a_fact(conversation_version):
    checks = verdicts(PATH_IDS) | {"grounded": {"verdict": "fail", "source": "rule", "message_ids": ["m4"]}}
    outcome = conversation_outcome(Route.FAIL, checks, {"complete": 0.2})
    assert certified_route(outcome, version=conversation_version, judge_key=JUDGE_KEY) == outcome


def test_an_unknown_check_still_goes_to_people_for_its_own_reason(conversation_version):
    outcome = conversation_outcome(
        Route.HUMAN, verdicts(PATH_IDS, complete="unknown"), {"grounded": 0.99}, reason=UNKNOWN_CHECK
    )
    assert certified_route(outcome, version=conversation_version, judge_key=JUDGE_KEY) == outcome


@pytest.fixture
def gate_under_a_certificate(settings, fake_llm, org):
    """The default judge at the loopback server, as production builds it; the active draft version certified at
    0.95 from 40 labelled drafts it was sure of and people agreed with."""
    configure_judges(settings, default=judge_config(fake_llm))
    setup_org_memory(org)
    version = certify_target_set(
        version=criteria_active(org=org, kind=ItemKind.DRAFT), actor=None, agreement=0.9, confidence=0.9
    )
    judge_key = version_judge_key(version)
    graded_drafts(org, agreeing(40, confidence=0.95), judge_key=judge_key)
    return certificate_compute(version, judge_key=judge_key)


def gate(org, fake_llm, external_id: str, overall: int, alternatives: dict[str, float]):
    fake_llm.script(json_reply(draft_verdict(overall), top_logprobs=alternatives, logprob_field="overall"))
    return draft_grade(draft_id=save_draft(org, external_id=external_id).pk)


def test_the_gate_decides_alone_only_above_the_certified_confidence(org, fake_llm, gate_under_a_certificate):
    sure = gate(org, fake_llm, "sure", 8, {"8": 0.97, "6": 0.03})
    assert (sure.route, sure.certificate_id) == (Route.PASS, gate_under_a_certificate.pk)
    assert sure.confidences[Label.PASS_FAIL] == pytest.approx(0.97)

    unsure = gate(org, fake_llm, "unsure", 8, {"8": 0.9, "6": 0.1})
    assert (unsure.route, unsure.reason, unsure.certificate_id) == (
        Route.HUMAN, BELOW_CERTIFIED, gate_under_a_certificate.pk
    )  # fmt: skip


def test_the_audit_sample_draws_items_the_machine_decided_under_a_certificate(org, fake_llm, gate_under_a_certificate):
    decided = gate(org, fake_llm, "sure", 8, {"8": 0.97, "6": 0.03})
    assert decided.route == Route.PASS and decided.certificate_id is not None

    sample = audit_sample_send(org=org, per_week=1_000, weeks=1, salt="audit")

    assert decided.pk in sample.marked  # drawn by its fixed rule, whatever decided it


def test_a_target_set_on_the_active_version_reaches_a_grader_that_read_it_before(settings, fake_llm, org):
    """A grading process keeps a published version by its revision: the target moves the revision on."""
    configure_judges(settings, default=judge_config(fake_llm))
    setup_org_memory(org)
    assert gate(org, fake_llm, "first", 8, {"8": 0.97, "6": 0.03}).route == Route.PASS  # read without a target

    certify_target_set(version=criteria_active(org=org, kind=ItemKind.DRAFT), actor=None, agreement=0.9, confidence=0.9)

    routed = gate(org, fake_llm, "second", 8, {"8": 0.97, "6": 0.03})
    assert (routed.route, routed.reason) == (Route.HUMAN, BELOW_CERTIFIED)  # no certificate yet: people decide


def people_say(review: Review, overturned: bool) -> str:
    return "pass" if review.judge_passed != overturned else "fail"


def test_a_certificate_from_scripted_judges_and_imported_labels_equals_a_recomputation_from_the_rows(
    settings, fake_llm, org
):
    configure_judges(settings, default=judge_config(fake_llm))
    setup_org_memory(org)
    version = certify_target_set(
        version=criteria_active(org=org, kind=ItemKind.DRAFT), actor=None, agreement=0.8, confidence=0.8
    )
    shapes = [{"8": 0.97, "6": 0.03}, {"8": 0.9, "6": 0.1}, {"6": 0.95, "8": 0.05}, {"8": 0.7, "6": 0.3}]
    graded = [gate(org, fake_llm, f"d-{n}", 8 if n % 4 != 2 else 6, shapes[n % 4]) for n in range(40)]
    # People agree with the judge but on two of the items it was least sure of.
    labels = [
        LabelIn(item=r.draft.external_id, check="pass_fail", labeller="qa", verdict=people_say(r, n in (15, 35)))
        for n, r in enumerate(graded)
    ]
    labels_record(org=org, labels=labels, source="qa.csv")

    certificate = certificate_compute(version, judge_key=version_judge_key(version))

    by_item = {label.item: label.verdict for label in labels}
    points = [
        CalibrationPoint(review.confidences["pass_fail"], review.judge_passed == (by_item[external_id] == "pass"))
        for external_id, review in ((r.draft.external_id, Review.objects.get(pk=r.pk)) for r in graded)
    ]
    expected = certify(points, alpha=0.2, delta=0.2).as_json()
    assert {key: certificate.checks["pass_fail"][key] for key in expected} == expected
    assert certificate.labels == 40 and expected["threshold"] is not None


def test_a_decision_on_an_item_decided_under_a_certificate_counts_as_any_decision(
    org, fake_llm, operator, gate_under_a_certificate
):
    decided = gate(org, fake_llm, "sure", 8, {"8": 0.97, "6": 0.03})
    assert decided.route == Route.PASS and decided.certificate_id is not None
    audit_sample_send(org=org, per_week=1_000, weeks=1, salt="audit")
    rollups_rebuild(org_id=org.pk)  # the calibration builder writes its rows straight, past the counters
    before = dashboard_figures(scope_for(org))["gate"]["decisions"]

    claim_take(user=operator, review_id=decided.pk)
    decision_create(
        user=operator,
        review_id=decided.pk,
        fingerprint=decided.fingerprint,
        verdict=PersonVerdict(outcome="reject", note="Too thin."),
    )

    after = dashboard_figures(scope_for(org))["gate"]["decisions"]
    assert after["reject"] == before["reject"] + 1
    assert stored_counters(org_ids=[org.pk]) == live_counters(org_ids=[org.pk])

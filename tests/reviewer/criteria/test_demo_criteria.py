"""The demo seeds history for the criteria pages: an older conversation version and an unpublished draft version. One
seeding for the module (`demo_org`)."""

import pytest

from grading.core.outcomes import BELOW_CERTIFIED
from grading.models import CriteriaExample, CriteriaVersion, Decision, Draft, ItemKind, Review, Route, SpendCap
from reviewer.demo import DEMO_DAY_CAP_TOKENS, DRAFT_V2_BANNED, DRAFT_V2_THRESHOLD, demo_seed

pytestmark = pytest.mark.django_db


def versions(org, kind):
    return list(CriteriaVersion.objects.filter(org=org, kind=kind).order_by("number"))


@pytest.mark.slow
def test_the_demo_seeds_an_older_conversation_version_a_certified_active_one_and_an_unpublished_draft_version(demo_org):
    org = demo_org
    old, active, _ = versions(org, ItemKind.CONVERSATION)
    assert (old.is_active, old.published_at is not None, active.is_active, active.author.username) == (
        False, True, True, "casey"
    )  # fmt: skip
    assert active.rubric.startswith(old.rubric.rstrip()) and active.rubric != old.rubric
    v1, draft = versions(org, ItemKind.DRAFT)
    assert (v1.is_active, draft.published_at, draft.author.username) == (True, None, "casey")
    rules = draft.draft_rules()
    assert set(DRAFT_V2_BANNED) <= set(rules.banned_words.terms) and rules.threshold == DRAFT_V2_THRESHOLD
    # The active conversation version routes by a certificate from the QA round: today's conversations under it.
    assert (active.certify_agreement, active.certify_confidence) == (0.85, 0.9)
    certificate = active.certificates.latest("computed_at")
    assert certificate.labels >= 60 and all(part["threshold"] is not None for part in certificate.checks.values())
    today = Review.objects.counting().filter(org=org, conversation__external_id__contains="-today-")
    routes = {(review.route, review.reason) for review in today}
    assert {(Route.PASS, ""), (Route.HUMAN, BELOW_CERTIFIED)} <= routes, routes
    decided_alone = today.filter(route__in=[Route.PASS, Route.FAIL])
    assert decided_alone and all(review.certificate_id == certificate.pk for review in decided_alone)
    assert {review.confidence_source for review in today if review.confidences} == {"heuristic"}


def test_the_demo_s_unpublished_conversation_version_asks_a_check_of_its_own_with_a_rule_and_a_category(demo_org):
    org = demo_org
    active, unpublished = versions(org, ItemKind.CONVERSATION)[1:]
    assert (unpublished.published_at, unpublished.based_on, unpublished.author.username) == (None, active, "casey")
    check_set = unpublished.check_set()
    assert check_set.keys == ("grounded", "complete", "usable", "cites_policy", "intent")
    policy, intent = check_set["cites_policy"], check_set["intent"]
    assert (policy.kind, policy.required, policy.rules[0].kind) == ("verdict", True, "phrases")
    assert (intent.kind, intent.required, len(intent.categories)) == ("category", False, 4)
    assert active.check_set().keys == ("grounded", "complete", "usable")  # what the demo's figures were graded on


def test_the_demo_s_draft_version_holds_a_decided_draft_as_an_example_and_the_org_a_day_cap(demo_org):
    org = demo_org
    draft = versions(org, ItemKind.DRAFT)[-1]
    (example,) = draft.examples.all()
    decision = Decision.objects.get(review__draft_id=example.draft_id, review__fingerprint=example.fingerprint)
    assert (example.check_name, example.human_verdict, example.source) == (
        "pass_fail", "pass" if decision.outcome == "approve" else "fail", "decision"
    )  # fmt: skip
    assert example.evidence["body"] == Draft.objects.get(pk=example.draft_id).body  # quoted as decided
    cap = SpendCap.objects.get(org=org)
    assert (cap.criteria_version, cap.period, cap.tokens) == (None, "day", DEMO_DAY_CAP_TOKENS)


@pytest.mark.slow
def test_seeding_twice_adds_no_version_example_or_cap(demo_org):
    org = demo_org
    fields = ("kind", "number", "rules", "checks", "rubric", "revision")
    before = list(CriteriaVersion.objects.filter(org=org).order_by("pk").values_list(*fields))
    demo_seed()
    after = list(CriteriaVersion.objects.filter(org=org).order_by("pk").values_list(*fields))
    assert after == before
    assert (CriteriaExample.objects.count(), SpendCap.objects.count()) == (1, 1)

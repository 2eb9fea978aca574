"""The demo org lands on every route with the offline heuristic judge, seeds history for the criteria pages (an older
conversation version and an unpublished draft version) and fills every panel of the dashboard (the README promises a
demo that shows the product), and seeding twice changes nothing: one seeding for the module (`demo_org`), so its
tests live in this one module rather than one by subject, each module seeding again."""

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from grading.conversations.grader import conversation_grade
from grading.core.outcomes import BELOW_CERTIFIED
from grading.dashboard.compare import comparison, slices_checked
from grading.dashboard.figures import dashboard_figures, scope_for
from grading.demo import TIMED_OUT_DRAFT
from grading.drafts.gate import draft_grade
from grading.judge.backends import HeuristicDraftJudge, HeuristicJudge
from grading.models import (
    Conversation,
    CriteriaExample,
    CriteriaVersion,
    Decision,
    Draft,
    ItemKind,
    Message,
    Review,
    Route,
    SpendCap,
)
from grading.passes.planner import grading_pass
from grading.reviews.reads import current_review, staleness_audit
from grading.reviews.rollups import live_counters, stored_counters
from reviewer.demo import DEMO_DAY_CAP_TOKENS, DRAFT_V2_BANNED, DRAFT_V2_THRESHOLD, demo_seed
from reviewer.models import Role
from reviewer.queue.display import queue_page
from tests.builders.people import make_person

pytestmark = pytest.mark.django_db


# --- the routes -----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_demo_conversations_land_on_every_route_and_leave_nothing_stale(demo_org):
    org = demo_org
    for conversation_id in grading_pass().enqueued_ids:
        conversation_grade(conversation_id=conversation_id, judge=HeuristicJudge())
    routes = set(Review.objects.filter(org=org, kind="conversation").values_list("route", flat=True))
    assert routes == {"pass", "fail", "human", "not_scorable"}
    reasons = dict(Review.objects.filter(route="not_scorable").values_list("conversation__external_id", "reason"))
    assert reasons == {"live-chat-1": "in_progress", "broken-export-1": "unresolved_parent"}
    assert Review.objects.get(conversation__external_id="long-guide-1").stages > 1
    assert Review.objects.filter(judge__backend="heuristic").exists()
    assert staleness_audit(org).total == 0
    assert Conversation.objects.filter(org=org, branch_count__gt=1).exists()
    # lin works the billing assistant's items alone
    rows = queue_page(user=get_user_model().objects.get(username="lin")).rows
    assert rows and {row.context for row in rows} == {"billing-assistant"}
    # the billing team's pool holds the billing assistant's unsure items first, by rule
    unsure = [row for row in rows if row.reason == "unknown_check"]
    assert unsure and all(row.assigned.startswith("pool billing team (you among them)") for row in unsure)
    # drafts are due within an hour of routing, conversations within a day
    assert all(row.due.startswith(("due in", "overdue")) for row in rows)


@pytest.mark.slow
def test_seeding_twice_changes_nothing(demo_org):
    before = list(Conversation.objects.order_by("pk").values_list("fingerprint", "updated_at")), Message.objects.count()
    demo_seed()
    after = list(Conversation.objects.order_by("pk").values_list("fingerprint", "updated_at")), Message.objects.count()
    assert after == before


@pytest.mark.slow
def test_the_demo_drafts_land_on_every_route_of_the_gate(demo_org):
    org = demo_org
    # The seed graded every draft; the one whose judge timed out is graded again by the next pass.
    result = grading_pass()
    assert [Draft.objects.get(pk=pk).external_id for pk in result.enqueued_draft_ids] == [TIMED_OUT_DRAFT]
    retried = draft_grade(draft_id=result.enqueued_draft_ids[0], judge=HeuristicDraftJudge())
    assert retried.route == "pass" and Review.objects.filter(draft=retried.draft, route="error").exists()
    reviews = {d.external_id.removeprefix("demo/"): current_review(d) for d in Draft.objects.filter(org=org)}
    routes = {name: review.route for name, review in reviews.items()}
    assert routes["clean-pass"] == routes["second-clean-pass"] == "pass"
    for fatal in ("banned-word", "filler-phrase", "headings-not-questions", "no-headings", "citation-missing",
                  "proof-point-missing", "repaired-but-still-failing"):  # fmt: skip
        assert routes[fatal] == "fail", fatal
    assert (routes["band-intensifiers"], reviews["band-intensifiers"].reason) == ("human", "band")
    for repaired in ("repaired-dash", "repaired-links-and-cta"):
        assert routes[repaired] == "pass" and reviews[repaired].repairs, repaired
    assert reviews["repaired-but-still-failing"].repairs


# --- the criteria pages' history ------------------------------------------------------------------------


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


# --- the dashboard's panels -----------------------------------------------------------------------------


def test_the_demo_fills_every_panel_of_the_dashboard(demo_org, client_for):
    org = demo_org
    figures = dashboard_figures(scope_for(org))
    quality, gate, staleness, agreement, queue = (
        figures[s] for s in ("quality", "gate", "staleness", "agreement", "queue")
    )
    assert quality["total"]["passed"] and quality["total"]["resolved"] > quality["total"]["passed"]
    assert quality["total"]["unknown"] and quality["total"]["not_scorable"]
    assert quality["total"]["thumbs_up"] and quality["total"]["thumbs_down"]
    assert len([w for w in quality["by_week"] if w["resolved"]]) >= 6  # a trend, not a point
    assert all(gate["total"][part] for part in ("pass", "fail", "human", "error", "repaired_pass"))
    assert gate["findings"] and all(s["n"] for s in gate["sub_scores"].values())
    assert gate["decisions"]["approve"] + gate["decisions"]["reject"]
    assert gate["time_to_verdict"]["machine"]["n"] and gate["time_to_verdict"]["human"]["n"]
    assert staleness["judge_errors"]["draft"] and staleness["tokens"]["prompt"] and staleness["stale"]
    assert staleness["rollup"]["last_rebuild"] is not None and staleness["mismatched"] == {
        "conversation": 0,
        "draft": 0,
    }
    for kind in ("conversation", "draft"):
        samples = agreement[kind]["samples"]
        for sample in ("audit", "label", "unsure"):
            assert any(check["n"] for check in samples[sample]["checks"].values()), (kind, sample)
        people = agreement[kind]["people"]["label"]["checks"].values()
        assert any(p["items"] for p in people) and any(p["unanimous"] < p["items"] for p in people), kind
    # Audited conversations are answered by two people: agreement between them, with its pair's Cohen's kappa.
    answered = agreement["conversation"]["people"]["audit"]["checks"]["grounded"]
    assert answered["items"] and answered["unanimous"] < answered["items"] and answered["pairs"]
    audit = agreement["conversation"]["samples"]["audit"]["checks"]["all_checks"]
    assert 0 < audit["agreed"] < audit["n"]  # the demo operator sometimes disagrees
    assert queue["waiting"] and queue["decisions_by_operator"]
    assert stored_counters(org_ids=[org.pk]) == live_counters(org_ids=[org.pk])
    page = client_for(make_person("a-stakeholder", org, Role.STAKEHOLDER)).get(reverse("dashboard"))
    assert page.status_code == 200 and "No pairs yet" not in page.content.decode()
    # Its conversations carry two releases, and grounding is worse in the newer: the comparison shows it.
    scope = scope_for(org)
    compared = comparison(scope, slices_checked(scope, dimension="release", a="2.3", b="2.4"))
    grounded = next(row for row in compared["rows"] if row["check"] == "grounded")
    assert compared["a"]["reviews"] and compared["b"]["reviews"]
    assert grounded["difference"] < 0 and grounded["significant"]


@pytest.mark.slow
def test_seeding_the_history_twice_changes_no_figure(demo_org):
    org = demo_org
    before = stored_counters(org_ids=[org.pk])
    demo_seed()
    assert stored_counters(org_ids=[org.pk]) == before

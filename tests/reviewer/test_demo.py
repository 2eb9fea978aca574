"""The demo org lands on every route with the offline heuristic judge, and seeding twice changes nothing: one seeding
for the module (`demo_org`)."""

import pytest
from django.contrib.auth import get_user_model

from grading.conversations.grader import conversation_grade
from grading.demo import TIMED_OUT_DRAFT
from grading.drafts.gate import draft_grade
from grading.judge.backends import HeuristicDraftJudge, HeuristicJudge
from grading.models import Conversation, Draft, Message, Review
from grading.passes.planner import grading_pass
from grading.reviews.reads import current_review, staleness_audit
from reviewer.demo import demo_seed
from reviewer.queue.display import queue_page

pytestmark = pytest.mark.django_db


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

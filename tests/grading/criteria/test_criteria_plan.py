"""Publishing with a plan: what goes stale by application, the judge calls and tokens the re-grade takes, when it
runs; and the plan's numbers are what the grading pass and the judge then do."""

import pytest
from django.utils import timezone

from grading.api.keys import api_key_create
from grading.conversations.grader import conversation_grade
from grading.criteria.impact import StaleGroup, criteria_publish_planned, publish_plan
from grading.drafts.gate import draft_grade
from grading.models import Conversation, CriteriaVersion, Draft, ItemKind, Review
from grading.passes.planner import grading_pass
from grading.reviews.reads import staleness_audit
from grading.reviews.versions import criteria_active, criteria_new_version, criteria_update
from tests.builders.conversations import llm_judge, message, support_conversation, upsert, verdicts_reply
from tests.builders.drafts import CLEAN_BODY, draft_verdict, llm_draft_judge, save_draft, setup_org_memory
from tests.fakes.openai_server import json_reply

pytestmark = pytest.mark.django_db

USAGE = {"prompt_tokens": 1000, "completion_tokens": 200, "total_tokens": 1200}


def draft_reply_with_usage(overall: int = 8):
    return json_reply(draft_verdict(overall), usage=USAGE)


def graded_drafts(org, fake_llm, count: int) -> list[Draft]:
    setup_org_memory(org)
    drafts = [
        save_draft(org, CLEAN_BODY.replace("every month", f"every {n + 2} weeks"), external_id=f"d-{n}")
        for n in range(count)
    ]
    fake_llm.set_default(draft_reply_with_usage())
    for draft in drafts:
        draft_grade(draft_id=draft.pk, judge=llm_draft_judge(fake_llm))
    fake_llm.reset()
    return drafts


def banned_word_version(org) -> CriteriaVersion:
    version = criteria_new_version(org=org, kind=ItemKind.DRAFT)
    rules = version.draft_rules().model_dump(mode="json")
    rules["banned_words"]["terms"].append("gizmo")
    return criteria_update(version=version, rules=rules)


def test_the_plan_counts_what_goes_stale_and_the_pass_then_re_grades_exactly_that(org, fake_llm, criteria_admin):
    drafts = graded_drafts(org, fake_llm, 3)
    version = banned_word_version(org)
    plan = publish_plan(version=version)
    assert plan.groups == [StaleGroup("drafts", reviews=3, judge_calls=3)]
    assert (plan.stale, plan.items, plan.waiting, plan.judge_calls, plan.judged_items) == (3, 3, 0, 3, 3)
    assert (plan.basis.reviews, plan.basis.mean_total, plan.tokens) == (3, 1200, 3600)
    assert (plan.next_pass_takes_all, plan.next_pass_takes_at_least, plan.passes) == (True, 3, 1)
    stale_drafts = set(Review.objects.counting().filter(kind=ItemKind.DRAFT).values_list("draft_id", flat=True))

    published, regrade = criteria_publish_planned(
        version=version, actor=criteria_admin, plan_active_id=plan.active.pk, regrade_now=True
    )
    assert published.is_active
    assert staleness_audit(org).stale == {"conversation": 0, "draft": plan.stale}
    assert set(regrade.enqueued_draft_ids) == stale_drafts == {d.pk for d in drafts}
    assert len(regrade.enqueued_draft_ids) == plan.next_pass_takes_at_least
    assert regrade.run.backlog == plan.left_after_next_pass == 0

    fake_llm.set_default(draft_reply_with_usage())
    regraded = [
        draft_grade(draft_id=draft_id, judge=llm_draft_judge(fake_llm)) for draft_id in regrade.enqueued_draft_ids
    ]
    assert len(fake_llm.chat_requests()) == plan.judge_calls
    assert sum(review.usage["total_tokens"] for review in regraded) == plan.tokens
    assert {review.criteria_version_id for review in regraded} == {version.pk}
    assert staleness_audit(org).total == 0


def test_under_a_small_cap_the_plan_says_how_much_the_next_pass_takes_and_what_waits(org, fake_llm, settings):
    graded_drafts(org, fake_llm, 3)
    settings.GRADING_PASS_CAP = 2
    version = banned_word_version(org)
    plan = publish_plan(version=version)
    assert (plan.next_pass_takes_all, plan.next_pass_takes_at_least, plan.next_pass_takes_at_most) == (False, 2, 2)
    assert (plan.left_after_next_pass, plan.backlog_after, plan.passes) == (1, 3, 2)
    _, regrade = criteria_publish_planned(version=version, actor=None, plan_active_id=plan.active.pk, regrade_now=True)
    assert len(regrade.enqueued_draft_ids) == plan.next_pass_takes_at_least
    assert regrade.run.backlog == plan.left_after_next_pass


def test_without_re_grading_now_the_next_pass_re_grades_what_the_plan_said(org, fake_llm):
    graded_drafts(org, fake_llm, 2)
    version = banned_word_version(org)
    plan = publish_plan(version=version)
    _, regrade = criteria_publish_planned(version=version, actor=None, plan_active_id=plan.active.pk, regrade_now=False)
    assert regrade is None
    assert len(grading_pass().enqueued_draft_ids) == plan.items == 2


def test_conversations_are_planned_per_application_and_not_scorable_ones_take_no_judge_call(org, fake_llm):
    for external_id, application in (("cv-1", "billing"), ("cv-2", "billing"), ("cv-3", "support")):
        upsert(org, support_conversation(external_id, application=application))
    live = support_conversation("cv-live", closed=False, application="billing")
    live["messages"] = [message("m1", "user", "One moment, finding the order.", None, 0)]
    live["messages"][0]["created_at"] = timezone.now().isoformat()  # still in progress: not scorable
    upsert(org, live)
    for conversation in Conversation.objects.filter(org=org):
        fake_llm.script(verdicts_reply(conversation.active_path_ids))
        conversation_grade(conversation_id=conversation.pk, judge=llm_judge(fake_llm))
    assert len(fake_llm.chat_requests()) == 3
    fake_llm.reset()

    version = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    plan = publish_plan(version=version)
    assert plan.groups == [StaleGroup("billing", reviews=3, judge_calls=2), StaleGroup("support", 1, 1)]
    assert (plan.stale, plan.items, plan.judge_calls, plan.judged_items) == (4, 4, 3, 3)
    assert (plan.basis.mean_total, plan.tokens) == (120, 360)

    _, regrade = criteria_publish_planned(version=version, actor=None, plan_active_id=plan.active.pk, regrade_now=True)
    assert len(regrade.enqueued_ids) == plan.items
    for conversation_id in regrade.enqueued_ids:
        fake_llm.script(verdicts_reply(Conversation.objects.get(pk=conversation_id).active_path_ids))
        conversation_grade(conversation_id=conversation_id, judge=llm_judge(fake_llm))
    assert len(fake_llm.chat_requests()) == plan.judge_calls
    assert staleness_audit(org).total == 0


def test_the_plan_of_an_org_with_no_usage_recorded_says_it_has_no_basis(org):
    version = criteria_new_version(org=org, kind=ItemKind.DRAFT)
    save_draft(org)  # never graded: already waiting
    plan = publish_plan(version=version)
    assert (plan.groups, plan.items, plan.waiting, plan.judge_calls, plan.basis, plan.tokens) == (
        [],
        1,
        1,
        1,
        None,
        None,
    )


def test_the_writer_rules_endpoint_serves_the_newly_active_version_at_once(client, org, criteria_admin):
    key = api_key_create(org=org, name="writer").plaintext
    headers = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
    before = client.get("/api/v1/criteria/draft/writer-rules", **headers).json()
    assert before["criteria_version"] == criteria_active(org=org, kind=ItemKind.DRAFT).number == 1
    assert "gizmo" not in before["rules"]["banned_words"]["terms"]

    version = banned_word_version(org)
    plan = publish_plan(version=version)
    criteria_publish_planned(version=version, actor=criteria_admin, plan_active_id=plan.active.pk, regrade_now=False)
    after = client.get("/api/v1/criteria/draft/writer-rules", **headers).json()
    assert after["criteria_version"] == 2
    assert "gizmo" in after["rules"]["banned_words"]["terms"]
    text = client.get("/api/v1/criteria/draft/writer-rules?format=text", **headers).content.decode()
    assert "gizmo" in text

"""A check of the team's own, end to end in Chromium (issue 39): a criteria admin adds "cites the policy" with a phrase
rule to a new conversation version, previews what the rule finds, and publishes, all with JavaScript off; the
conversation is graded again, the rule sends it to people; an operator answers the new check beside its question;
the stakeholder reads the check's figure on the dashboard.

What each step needs besides the editor (checks/editor): grading with the rule and the judge asked the version's
checks (checks/judge: grading/checks/conversation_rules.py, the grader), the queue form asking the version's checks
(checks/people), the dashboard's figures per check (checks/figures)."""

import re

import pytest
from django.utils import timezone

from grading.conversations.grader import conversation_grade
from grading.core.weeks import iso_week, monday
from grading.models import CriteriaVersion, Decision, ItemKind, Review
from tests.builders.browser import signed_in_tab
from tests.builders.conversations import T0, llm_judge, support_conversation, upsert, verdicts, verdicts_reply
from tests.fakes.openai_server import json_reply

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

QUESTION = "When the assistant promises a refund, does it cite the policy that allows it?"


def test_an_admin_adds_a_check_with_a_phrase_rule_an_operator_answers_it_and_the_stakeholder_reads_its_figure(
    browser, live_server, fake_llm, org, criteria_admin, operator, stakeholder
):
    conversation = upsert(org, support_conversation("cv-1")).conversation  # "49.90 is on its way"
    fake_llm.set_default(verdicts_reply(conversation.active_path_ids))
    assert conversation_grade(conversation_id=conversation.pk, judge=llm_judge(fake_llm)).route == "pass"

    # The criteria admin, with JavaScript off: a new conversation version, one more check with a phrase rule, saved.
    page = signed_in_tab(browser, live_server, criteria_admin, "/dashboard/", javascript=False)
    page.get_by_role("link", name="Criteria").click()
    page.get_by_role("button", name="New conversation version").click()
    page.wait_for_url("**/criteria/*/")
    new = page.locator("fieldset.check-row").last  # the empty row
    new.locator("input[name$=-key]").fill("cites_policy")
    new.locator("input[name$=-name]").fill("Cites the policy")
    new.locator("textarea[name$=-question]").fill(QUESTION)
    new.locator("textarea[name$=-guidance]").fill("pass: The policy is named.\nfail: A refund is promised unnamed.")
    rule = new.locator("tr.rule-row").first
    rule.locator("select[name$=-kind]").select_option("phrases")
    rule.locator("textarea[name$=-phrases]").fill("on its way")
    rule.locator("select[name$=-sets]").select_option("unknown")  # people decide what the rule flags
    page.get_by_role("button", name="Save v2").click()
    page.wait_for_selector(".flash >> text=Saved conversation v2")
    version = CriteriaVersion.objects.get(org=org, kind=ItemKind.CONVERSATION, number=2)
    assert version.check_set().keys == ("grounded", "complete", "usable", "cites_policy")

    page.get_by_role("button", name="Diff").click()
    page.wait_for_url("**/criteria/diff/**")
    assert "cites_policy (Cites the policy): pass / fail" in page.locator('[data-list="Checks"] .added').inner_text()
    page.go_back()

    # The preview: what the rule finds on the org's conversations, no judge called (needs checks/judge's rules).
    page.get_by_role("link", name="Preview the rules over recent conversations").click()
    page.get_by_role("button", name="Preview").click()
    row = page.locator(f'#preview-rows tr[data-conversation="{conversation.pk}"]').inner_text()
    assert "Cites the policy → unknown" in row and "on its way" in row and "pass → people at best" in row
    page.go_back()
    page.go_back()

    page.get_by_role("link", name="Publish… (read the plan)").click()
    page.get_by_role("button", name="Publish v2").click()
    assert "Published conversation v2" in page.locator(".flash").inner_text()

    # The next grading pass: the judge is asked the four checks and passes them; the rule makes cites_policy unknown,
    # so the conversation waits for people (needs checks/judge's grader).
    answers = verdicts(conversation.active_path_ids) | {
        "cites_policy": {"verdict": "pass", "message_ids": ["m4"], "rationale": "The refund is confirmed."}
    }
    fake_llm.set_default(
        json_reply(answers, usage={"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120})
    )
    review = conversation_grade(conversation_id=conversation.pk, judge=llm_judge(fake_llm))
    assert (review.criteria_version_id, review.route, review.reason) == (version.pk, "human", "unknown_check")
    assert review.checks["cites_policy"]["verdict"] == "unknown" and review.checks["cites_policy"]["source"] == "rule"

    # The operator answers the new check beside its question (needs checks/people's queue form).
    desk = signed_in_tab(browser, live_server, operator, "/queue/")
    desk.get_by_role("button", name=re.compile("^Claim next")).click()
    desk.wait_for_url(f"**/queue/items/{review.pk}/")
    assert desk.locator("#check-cites_policy").get_by_text(QUESTION).is_visible()
    desk.keyboard.type("pppf")  # the key per answer, check after check: grounded, complete, usable, cites_policy
    desk.fill("textarea[name=note]", "A refund on its way, and no policy named.")
    desk.get_by_role("button", name=re.compile("^Decide")).click()
    desk.wait_for_url("**/queue/")
    assert Decision.objects.get(review=review).checks == {
        "grounded": "pass", "complete": "pass", "usable": "pass", "cites_policy": "fail"
    }  # fmt: skip

    # The stakeholder reads the check's figure: its column on the dashboard (needs checks/figures' dashboard).
    board = signed_in_tab(browser, live_server, stakeholder, "/dashboard/")
    board.goto(f"/dashboard/?org={org.slug}&from={iso_week(monday(T0))}&to={iso_week(monday(timezone.now()))}")
    table = board.locator("#quality-by-application")
    headers = [th.inner_text() for th in table.locator("thead th").all()]
    column = next(index for index, header in enumerate(headers) if header.startswith("Cites the policy"))
    assert table.locator("thead th").nth(column).get_attribute("title") == QUESTION
    cell = table.locator("tfoot th").nth(column).inner_text()
    assert sum(int(n) for n in re.findall(r"\d+", cell)) == 1  # the one conversation graded under v2, answered
    table.locator("tfoot th").nth(column).get_by_role("link").filter(has_text="1").first.click()
    board.wait_for_url("**/dashboard/reviews/**")
    listed = [int(r.get_attribute("data-review")) for r in board.locator("#review-list tr[data-review]").all()]
    assert listed == [review.pk] and Review.objects.get(pk=review.pk).criteria_version == version
    assert page.console_errors == desk.console_errors == board.console_errors == []

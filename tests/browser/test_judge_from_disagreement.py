"""The loop from disagreement to a better judge, in Chromium: a stakeholder opens an item on which the judge and
people disagree; a criteria admin adds it as a worked example to a new version, names a second judge for it, runs a
trial on labelled items, reads both versions' agreement with people side by side, and publishes; the workers then
grade every item again under the new version, with the second judge."""

import re

import pytest

from grading.models import CriteriaVersion, Review
from tests.builders.browser import sign_in
from tests.builders.people import PASSWORD
from tests.builders.processes import wait_until
from tests.builders.scored_trials import decide, graded_conversations, judge_per_item, label
from tests.conftest import SECOND_JUDGE

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHECKS = ("grounded", "complete", "usable")
# The active version's judge fails grounded on 1 to 4; people say every one is grounded.
ACTIVE = {n: {"grounded": "fail" if n <= 4 else "pass"} for n in range(1, 7)}
# The second judge agrees with people. Conversation 1 (the example, whose text every prompt under v2 quotes) is
# last, so a prompt that quotes it is matched by its own order number first.
SECOND = {n: {"grounded": "pass"} for n in (2, 3, 4, 5, 6, 1)}


def test_a_disagreement_becomes_an_example_a_trial_under_a_second_judge_is_scored_against_people_and_published(
    page, org, fake_llm, second_llm, operator, stakeholder, criteria_admin, celery_worker
):
    conversations = graded_conversations(org, fake_llm, ACTIVE)
    decide(conversations[1], operator, dict.fromkeys(CHECKS, "pass"), note="The refund policy is in the tool result.")
    for n in range(2, 7):
        label(org, conversations[n], "ann", **dict.fromkeys(CHECKS, "pass"))
    second_llm.set_default(judge_per_item(SECOND))

    # The stakeholder opens the audit sample's disagreement on grounded: the judge failed what the operator passed.
    sign_in(page, stakeholder.username, PASSWORD)
    page.wait_for_url("**/dashboard/")
    page.goto(f"/dashboard/?org={org.slug}")
    page.locator("#judge-against-people > summary").click()  # the statistics, folded under their section
    grounded = page.locator("#agreement-conversation-audit > table > tbody > tr").filter(has_text="grounded")
    grounded.locator("td.disagree a").click()
    page.wait_for_url("**/dashboard/reviews/**")
    disagreement = page.url
    rows = page.locator("#review-list tr[data-review]")
    assert rows.count() == 1 and "cv-1" in rows.first.inner_text()
    assert page.locator("form.add-example").count() == 0  # adding examples is the criteria admin's

    # The criteria admin starts v2 and adds the disagreement to it as a worked example.
    page.context.clear_cookies()  # signed out
    sign_in(page, criteria_admin.username, PASSWORD)
    page.goto("/criteria/")
    page.get_by_role("button", name="New conversation version").click()
    page.wait_for_url(re.compile(r".*/criteria/\d+/$"))
    v2 = CriteriaVersion.objects.get(org=org, kind="conversation", number=2)
    page.goto(disagreement)
    page.locator("#review-list form.add-example").get_by_role("button", name="Add as example").click()
    page.wait_for_url(f"**/criteria/{v2.pk}/**")
    examples = page.locator("#examples")
    assert "cv-1" in examples.inner_text() and "grounded" in examples.inner_text()

    # It names the second judge for v2.
    page.select_option("select[name=judge]", SECOND_JUDGE)
    page.get_by_role("button", name="Save v2").click()
    page.wait_for_load_state()
    assert CriteriaVersion.objects.get(pk=v2.pk).judge == SECOND_JUDGE

    # A trial on the labelled items: counted first, then run by the workers under the second judge only.
    page.goto(f"/criteria/{v2.pk}/trial/")
    page.select_option("select[name=source]", "labels")
    page.fill("input[name=k]", "5")
    page.get_by_role("button", name="Count the judge calls").click()
    assert "5 items, 5 judge calls" in page.locator("#trial-count h2").inner_text()
    page.get_by_role("button", name=re.compile("Run the trial")).click()
    page.wait_for_selector("#trial-results .status b:text('Done')", timeout=60_000)
    assert len(second_llm.chat_requests()) == 5 and fake_llm.chat_requests() == []
    assert all("<<<EXAMPLES>>>" in r.body["messages"][1]["content"] for r in second_llm.chat_requests())

    # Both versions' agreement with people, side by side, on the same five items.
    def figure(check: str, side: str, name: str) -> str:
        return page.locator(f"tr[data-check={check}][data-side={side}] td[data-figure={name}]").inner_text()

    assert figure("grounded", "trial", "n") == figure("grounded", "active", "n") == "5"
    assert figure("grounded", "trial", "percent").startswith("100")
    assert figure("grounded", "active", "percent").startswith("40")

    # Published with a re-grade now: the plan names the new judge, and every item is graded again by it.
    page.goto(f"/criteria/{v2.pk}/publish/")
    assert "not the judge of v1" in page.locator("#plan-judge").inner_text()
    page.check("input[name=regrade_now]")
    page.get_by_role("button", name="Publish v2").click()
    page.wait_for_load_state()
    assert CriteriaVersion.objects.get(pk=v2.pk).is_active

    def regraded() -> bool:
        current = Review.objects.counting().filter(org=org, kind="conversation", criteria_version=v2)
        return current.count() == 6 and all(r.judge.get("name") == SECOND_JUDGE for r in current)

    wait_until(regraded, timeout=60, message="every conversation graded again under v2 by the second judge")
    assert page.console_errors == []

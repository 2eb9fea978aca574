"""A criteria admin's change in Chromium: a new version, one more banned word, the diff, the preview, the plan,
publishing with a re-grade now, and the draft graded again under the new version by a real worker."""

import dataclasses

import pytest
from playwright.sync_api import expect

from grading.drafts.gate import draft_grade
from grading.models import CriteriaVersion, ItemKind, Review
from tests.builders.browser import sign_in
from tests.builders.drafts import CLEAN_BODY, draft_reply, llm_draft_judge, save_draft, setup_org_memory
from tests.builders.people import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

GIZMO_BODY = CLEAN_BODY.replace("Start with the questions", "Start with the gizmo questions")


def test_a_criteria_admin_bans_a_word_previews_it_publishes_and_sees_the_draft_re_graded(
    page, celery_worker, fake_llm, org, criteria_admin
):
    setup_org_memory(org)
    draft = save_draft(org, GIZMO_BODY, external_id="gizmo-draft")
    fake_llm.set_default(draft_reply(8))
    assert draft_grade(draft_id=draft.pk, judge=llm_draft_judge(fake_llm)).route == "pass"

    sign_in(page, criteria_admin.username, PASSWORD)
    page.wait_for_url("**/dashboard/")
    page.get_by_role("link", name="Criteria").click()
    page.get_by_role("button", name="New draft version").click()
    page.wait_for_url("**/criteria/*/")
    assert "Created draft v2 from v1" in page.locator(".flash").inner_text()

    words = page.locator("textarea[name=banned_words]")
    words.fill(words.input_value() + "\ngizmo")
    page.get_by_role("button", name="Save v2").click()
    page.wait_for_selector(".flash >> text=Saved draft v2")

    page.get_by_role("button", name="Diff").click()
    page.wait_for_url("**/criteria/diff/**")
    assert page.locator('[data-list="Banned words"] .added').inner_text() == "added: gizmo"
    page.go_back()

    page.get_by_role("link", name="Preview over recent drafts").click()
    page.get_by_role("button", name="Preview").click()
    row = page.locator(f'#preview-rows tr[data-draft="{draft.pk}"]')
    assert '"gizmo" is a banned word (1 time)' in row.inner_text()
    assert "pass → fail" in row.inner_text()
    page.go_back()
    page.go_back()

    page.get_by_role("link", name="Publish… (read the plan)").click()
    assert page.locator("#plan-stale").inner_text() == "1"
    assert page.locator("#plan-calls").inner_text() == "1"
    assert page.locator("#plan-next-pass").inner_text() == "all 1"
    page.get_by_label("Re-grade now", exact=False).check()
    fake_llm.set_default(dataclasses.replace(draft_reply(8), latency=2))  # the re-grade takes a moment
    page.get_by_role("button", name="Publish v2").click()
    assert "A grading pass enqueued 1 item; 0 wait" in page.locator(".flash").inner_text()
    version = CriteriaVersion.objects.get(org=org, kind=ItemKind.DRAFT, number=2)
    assert version.is_active

    # The version page shows the re-grade, refreshed by htmx until it is done.
    assert page.locator("#regrade .regrade-count").inner_text() == "0 of 1"
    expect(page.locator("#regrade .regrade-left")).to_have_text("done", timeout=30_000)
    assert page.locator("#regrade .regrade-count").inner_text() == "1 of 1"

    # Done means the re-grade's review is written: the earlier version's review stopped counting in its transaction.
    page.goto(f"/criteria/items/draft/{draft.pk}/")
    text = page.locator("#current-review").inner_text()
    assert "draft v2" in text and "fail" in text and '"gizmo" is a banned word (1 time)' in text
    review = Review.objects.counting().get(draft=draft)
    assert (review.criteria_version, review.route) == (version, "fail")
    assert page.console_errors == []

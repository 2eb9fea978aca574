"""The pages on a phone (390 px wide) and on a desktop at 200% zoom (1280 px shown as 640): nothing pushes the page
sideways, text keeps a readable measure, an item page (the queue's and a reader's) shows its verdicts before the
evidence, and the decision bar is one tap away."""

import pytest
from django.utils import timezone

from grading.core.weeks import monday
from tests.builders.browser import sideways_scroll, sign_in, widths
from tests.builders.people import PASSWORD
from tests.builders.queue_items import conversation_item, draft_item
from tests.builders.world import build_world, iso

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE, ZOOMED = {"width": 390, "height": 844}, {"width": 640, "height": 400}
READABLE = 250  # px: about 35 characters of body text, the least a line should hold


def test_it_fits_the_queue_both_item_pages_and_the_dashboard_to_a_phone_and_to_200_percent_zoom(
    browser, live_server, org, fake_llm, operator, stakeholder
):
    draft = draft_item(org, "a-draft-with-a-long-slug-that-would-push-a-table-wide")
    conversation = conversation_item(org, "cv-on-a-phone")
    build_world(org, fake_llm, operator)
    dashboard = f"/dashboard/?org={org.slug}&from=2026-W46&to={iso(monday(timezone.now()))}"
    operator_tab = browser.new_context(base_url=live_server.url, viewport=PHONE).new_page()
    stakeholder_tab = browser.new_context(base_url=live_server.url, viewport=PHONE).new_page()
    try:
        sign_in(operator_tab, operator.username, PASSWORD)
        operator_tab.wait_for_url("**/queue/")
        operator_tab.goto(f"/queue/items/{conversation.pk}/")
        operator_tab.get_by_role("button", name="Claim this").click()
        operator_tab.locator("#decide-form").wait_for()
        sign_in(stakeholder_tab, stakeholder.username, PASSWORD)
        stakeholder_tab.wait_for_url("**/dashboard/")
        for viewport in (PHONE, ZOOMED):
            for tab in (operator_tab, stakeholder_tab):
                tab.set_viewport_size(viewport)
            operator_tab.goto("/queue/")
            assert sideways_scroll(operator_tab) == 0, f"queue at {viewport['width']} px"
            assert min(widths(operator_tab, "#queue-list tr[data-row] td:not(:empty)")) > READABLE

            operator_tab.goto(f"/queue/items/{conversation.pk}/")
            assert sideways_scroll(operator_tab) == 0, f"conversation at {viewport['width']} px"
            assert min(widths(operator_tab, ".msg .text")) > READABLE
            assert min(widths(operator_tab, ".check-answer")) > READABLE
            verdicts, path = operator_tab.locator(".verdicts"), operator_tab.locator(".path")
            assert verdicts.bounding_box()["y"] < path.bounding_box()["y"]  # the verdicts, then what they cite
            operator_tab.get_by_role("link", name="To the decision").click()
            assert operator_tab.locator("#decide-form button[data-key=a]").is_visible()
            assert operator_tab.locator("#decide-form button[data-key=a]").evaluate(
                "b => { const r = b.getBoundingClientRect(); return r.top >= 0 && r.bottom <= innerHeight; }"
            )

            operator_tab.goto(f"/queue/items/{draft.pk}/")
            assert sideways_scroll(operator_tab) == 0, f"draft at {viewport['width']} px"
            assert min(widths(operator_tab, ".article p")) > READABLE
            assert (
                operator_tab.locator(".verdicts").bounding_box()["y"]
                < operator_tab.locator(".article").bounding_box()["y"]
            )

            for review, text in ((draft, ".article p"), (conversation, ".msg .text")):  # a reader's item pages
                stakeholder_tab.goto(f"/dashboard/items/{review.pk}/")
                assert sideways_scroll(stakeholder_tab) == 0, f"reader's {review.kind} at {viewport['width']} px"
                assert min(widths(stakeholder_tab, text)) > READABLE
                assert (
                    stakeholder_tab.locator(".verdicts").bounding_box()["y"]
                    < stakeholder_tab.locator(".article, .path").bounding_box()["y"]
                )

            stakeholder_tab.goto(dashboard)
            assert sideways_scroll(stakeholder_tab) == 0, f"dashboard at {viewport['width']} px"
            assert min(widths(stakeholder_tab, ".kpi .card")) > READABLE
            assert min(widths(stakeholder_tab, "svg.chart")) > READABLE
        operator_tab.set_viewport_size({"width": 1280, "height": 720})
        operator_tab.goto(f"/queue/items/{conversation.pk}/")
        assert not operator_tab.get_by_role("link", name="To the decision").is_visible()  # the bar is in view there
    finally:
        operator_tab.context.close()
        stakeholder_tab.context.close()

"""Fix and approve in Chromium: an operator fixes a draft's missing internal link with the keyboard, checks the edit,
approves it as corrected; the gate grades the revision in a real worker, and the pipeline's receiver gets the
corrected body."""

import json

import pytest

from grading.models import Correction
from tests.builders.browser import signed_in_tab
from tests.builders.corrected_drafts import FIXED_BODY, waiting_with_finding
from tests.builders.drafts import draft_reply
from tests.builders.processes import wait_until
from tests.fakes.webhook_receivers import Receiver

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_operator_fixes_a_missing_link_and_the_pipeline_gets_the_corrected_body(
    browser, live_server, operator, org, fake_llm, celery_worker, settings
):
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.1/32"]  # the receiver listens on loopback
    fake_llm.set_default(draft_reply(6))  # the judge doubts it: the operator's approval stands over that
    hook = Receiver([])
    try:
        review = waiting_with_finding(org, callback_url=hook.url)
        tab = signed_in_tab(browser, live_server, operator, "/queue/")
        tab.keyboard.press("n")
        tab.wait_for_url(f"**/queue/items/{review.pk}/")
        assert "internal_links_missing" in tab.locator("#correction-findings").inner_text()

        tab.keyboard.press("e")
        assert tab.evaluate("document.activeElement.id") == "correction-body"
        tab.fill("#correction-body", FIXED_BODY)
        tab.keyboard.press("Control+Enter")  # in the editor: checks the edit, never decides
        tab.locator("#correction-findings", has_text="The checks pass on your edit").wait_for()
        assert not Correction.objects.exists()

        tab.get_by_role("button", name="Correct and approve").click()
        tab.wait_for_url(f"**/queue/items/{review.pk}/")
        tab.locator("#corrections .correction[data-state=approved]").wait_for(timeout=60_000)
        assert "approved as corrected" in tab.locator("#corrections").inner_text()

        def told() -> dict | None:
            for headers, body in hook.received:
                if headers.get("x-tollgate-event") == "human_decision":
                    return json.loads(body)
            return None

        payload = wait_until(told, timeout=60, message="the human_decision webhook")
        assert payload["draft"]["decision"]["outcome"] == "approve"
        assert payload["draft"]["correction"]["body"] == FIXED_BODY
        assert "measuring-deflection" in payload["draft"]["correction"]["diff"]
        assert tab.console_errors == []
    finally:
        hook.close()

"""The operator's day in Chromium: claim with the keyboard, read the evidence, decide, see refusals."""

import re

import pytest

from grading.models import AuditEvent, Decision
from reviewer.models import Claim
from tests.builders.browser import sign_in
from tests.builders.people import PASSWORD
from tests.builders.queue_items import conversation_item, draft_item, resubmit

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def open_queue(page, operator) -> None:
    sign_in(page, operator.username, PASSWORD)
    page.wait_for_url("**/queue/")


def test_an_operator_claims_with_the_keyboard_reads_the_evidence_and_decides(page, operator, org):
    draft = draft_item(org, "how-to-cut-support-costs")
    conversation = conversation_item(org, "cv-7f3a91")
    open_queue(page, operator)
    assert page.locator("#queue-list tr[data-row]").count() == 2

    page.keyboard.press("n")  # drafts first: a pipeline waits on them
    page.wait_for_url(f"**/queue/items/{draft.pk}/")
    assert "Score 6.7 against threshold 7.0" in page.locator("main").inner_text()
    assert page.locator("mark.proof", has_text="Acme Logistics").is_visible()
    assert page.get_by_text("The opening warms up for a paragraph").is_visible()
    assert "lease: 15 min left" in page.locator("#lease").inner_text()
    page.keyboard.press("a")
    page.wait_for_url(f"**/queue/items/{conversation.pk}/")  # the next item opens, claimed
    assert "Decided: approve on how-to-cut-support-costs" in page.locator(".flash").inner_text()
    assert "lease: 15 min left" in page.locator("#lease").inner_text()

    page.get_by_role("link", name="m4").first.click()  # a quoted evidence message scrolls to it in the path
    assert page.url.endswith("#msg-5")
    assert page.locator("#msg-5").is_visible()
    assert page.get_by_text("1 abandoned branch after m3").is_visible()
    assert page.locator("#decide-form input:checked").count() == 0  # nothing of the machine's to anchor on
    for key in "ppp":  # a key per answer: each answers the next check, the last leads to the note
        page.keyboard.press(key)
    assert page.evaluate("document.activeElement.name") == "note"
    page.keyboard.type("The tool result confirms the refund.")
    page.keyboard.press("Control+Enter")
    page.wait_for_url("**/queue/")
    assert "Nothing is waiting for a human." in page.locator("#queue-list").inner_text()
    assert Decision.objects.get(review=conversation).checks == {
        "grounded": "pass",
        "complete": "pass",
        "usable": "pass",
    }
    assert page.console_errors == []


def test_a_stale_item_is_refused_in_place_and_says_why(page, operator, org):
    review = draft_item(org)
    open_queue(page, operator)
    page.keyboard.press("n")
    page.wait_for_url(f"**/queue/items/{review.pk}/")
    resubmit(review)  # the pipeline sends new content while the operator reads
    page.keyboard.press("a")
    refusal = page.locator("#actions .refusal")
    refusal.wait_for()
    assert "The item changed since you opened it" in refusal.inner_text()
    assert "resubmitted the draft" in refusal.inner_text()
    assert not Decision.objects.exists()
    assert page.url.endswith(f"/queue/items/{review.pk}/")
    # The refusal is an HTTP 409, which Chromium logs as a failed resource; nothing else may be logged.
    assert [e for e in page.console_errors if "status of 409 (Conflict)" not in e] == []


def test_rejecting_asks_for_the_note_first(page, operator, org):
    review = draft_item(org)
    open_queue(page, operator)
    page.keyboard.press("n")
    page.wait_for_url(f"**/queue/items/{review.pk}/")
    page.keyboard.press("r")
    assert page.evaluate("document.activeElement.name") == "note"
    assert not Decision.objects.exists()
    page.fill("textarea[name=note]", "Cite the source for the 41% figure.")
    page.get_by_role("button", name=re.compile("^Reject")).click()
    page.wait_for_url("**/queue/")
    assert Decision.objects.get().outcome == "reject"


def test_the_refresh_keeps_the_selection_when_new_items_arrive(page, operator, org):
    first, second = draft_item(org, "first", minutes_ago=50), draft_item(org, "second", minutes_ago=40)
    open_queue(page, operator)
    page.keyboard.press("j")
    assert page.locator("tr.sel").get_attribute("data-row") == str(second.pk)
    older = draft_item(org, "older-still", minutes_ago=90)  # lands above the selection
    with page.expect_response(
        lambda response: "/queue/" in response.url and response.request.headers.get("hx-request")
    ):
        page.evaluate("htmx.trigger('#queue-list', 'queue-refresh')")
    page.wait_for_selector(f'tr[data-row="{older.pk}"]')
    assert page.locator("tr.sel").get_attribute("data-row") == str(second.pk)
    page.keyboard.press("k")
    assert page.locator("tr.sel").get_attribute("data-row") == str(first.pk)
    page.keyboard.press("?")
    assert page.locator("dialog#keys").is_visible()
    assert page.console_errors == []


def test_the_pages_work_without_javascript(browser, live_server, operator, org):
    review = draft_item(org)
    context = browser.new_context(base_url=live_server.url, java_script_enabled=False)
    page = context.new_page()
    try:
        sign_in(page, operator.username, PASSWORD)
        page.wait_for_url("**/queue/")
        page.get_by_role("button", name=re.compile("^Claim next")).click()
        page.wait_for_url(f"**/queue/items/{review.pk}/")
        page.get_by_role("button", name=re.compile("^Approve")).click()
        page.wait_for_url("**/queue/")
        assert "Decided: approve" in page.content()
    finally:
        context.close()
    assert Claim.objects.get().end == Claim.End.DECIDED
    assert AuditEvent.objects.filter(action="decision.create").count() == 1
    assert Decision.objects.filter(review=review).count() == 1

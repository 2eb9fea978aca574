"""The operator in Chromium: refusals, the note a rejection asks for, the refresh, and the pages without JavaScript.
Claiming with the keyboard, reading the evidence and deciding are the operator's walk in test_persona_walks."""

import re

import pytest

from grading.models import AuditEvent, Decision
from reviewer.models import Claim
from tests.builders.browser import sign_in
from tests.builders.people import PASSWORD
from tests.builders.queue_items import draft_item, resubmit

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def open_queue(page, operator) -> None:
    sign_in(page, operator.username, PASSWORD)
    page.wait_for_url("**/queue/")


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

"""An operator writes an expected reply with the keyboard alone in Chromium: to the agent's message, open the control,
type the reply, keep it; the page lists it, bound to the path up to that message."""

import pytest

from grading.models import Correction
from tests.builders.browser import sign_in
from tests.builders.people import PASSWORD
from tests.builders.queue_items import conversation_item

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

REPLY = "Order 1182 is refunded: 49.90 reaches your card in 3 to 5 working days."


def test_an_operator_writes_an_expected_reply_with_the_keyboard(page, operator, org):
    review = conversation_item(org, "cv-7f3a91")
    sign_in(page, operator.username, PASSWORD)
    page.wait_for_url("**/queue/")
    page.keyboard.press("n")
    page.wait_for_url(f"**/queue/items/{review.pk}/")

    page.locator("#msg-5").focus()  # m4, the agent's last reply, as j/k reach it
    page.keyboard.press("Tab")  # its "write the expected reply" control
    assert page.evaluate("document.activeElement.textContent") == "Write the expected reply"
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")
    page.keyboard.type(REPLY)  # typing in the box presses none of the page's keys
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")

    page.wait_for_url(f"**/queue/items/{review.pk}/#expected-replies")
    assert "Kept your expected reply at message m4." in page.locator(".flash").inner_text()
    assert REPLY in page.locator("#expected-replies").inner_text()
    kept = Correction.objects.get()
    assert (kept.message_external_id, kept.corrected, kept.evidence_fingerprint) == (
        "m4",
        REPLY,
        review.conversation.fingerprint,
    )
    assert "lease: 15 min left" in page.locator("#lease").inner_text()  # still theirs to decide

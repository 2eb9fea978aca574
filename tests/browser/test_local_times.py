"""Times on the item page in the reader's own time zone: written in UTC by the server (right without JavaScript) and
shown where the browser is, with the UTC text kept as a tooltip."""

from zoneinfo import ZoneInfo

import pytest

from tests.builders.browser import sign_in
from tests.builders.people import PASSWORD
from tests.builders.queue_items import conversation_item

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_operator_in_tokyo_reads_the_trail_in_tokyo_time(browser, live_server, org, operator):
    review = conversation_item(org)
    tab = browser.new_context(base_url=live_server.url, timezone_id="Asia/Tokyo", locale="en-GB").new_page()
    try:
        sign_in(tab, operator.username, PASSWORD)
        tab.wait_for_url("**/queue/")
        tab.goto(f"/queue/items/{review.pk}/")
        graded = tab.locator("#trail tr", has_text="graded").locator("time")
        local = review.finished_at.astimezone(ZoneInfo("Asia/Tokyo"))
        assert local.strftime("%H:%M") in graded.inner_text() and "GMT+9" in graded.inner_text()
        assert graded.get_attribute("title") == f"{review.finished_at:%d %b %Y %H:%M} UTC"
        assert "Times in your time zone (Asia/Tokyo)" in tab.locator("#trail").inner_text()
    finally:
        tab.context.close()

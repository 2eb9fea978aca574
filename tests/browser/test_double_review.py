"""Two people decide one draft in Chromium, blind to each other; they disagree, a third adjudicates, and the
dashboard's people-against-people figure opens the item they split on."""

import pytest
from django.utils import timezone

from grading.core.weeks import monday
from grading.models import Decision, ItemKind, SlotsFor
from grading.reviews.versions import criteria_active
from reviewer.models import Role
from tests.builders.browser import sign_in
from tests.builders.people import PASSWORD, make_person
from tests.builders.queue_items import draft_item

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def tab_for(browser, live_server, person):
    tab = browser.new_context(base_url=live_server.url).new_page()
    tab.console_errors = []
    tab.on("console", lambda message: message.type == "error" and tab.console_errors.append(message.text))
    sign_in(tab, person.username, PASSWORD)
    tab.wait_for_url("**/queue/")
    return tab


def test_two_answer_blind_disagree_and_an_adjudicator_decides(browser, live_server, org):
    version = criteria_active(org=org, kind=ItemKind.DRAFT)
    version.slots, version.slots_for = 2, SlotsFor.AUDIT
    version.save(update_fields=["slots", "slots_for"])
    # Filed under this week, as `review_record` files a review (the dashboard's lists read the filing).
    review = draft_item(org, "refund-policy", audit=True, week=monday(timezone.now()))
    ann, bob = (make_person(name, org, Role.OPERATOR) for name in ("ann", "bob"))
    cy = make_person("cy", org, Role.OPERATOR, Role.STAKEHOLDER)

    dee = make_person("dee", org, Role.OPERATOR)
    declining = tab_for(browser, live_server, dee)  # takes a place, then gives it back with the keyboard
    declining.keyboard.press("n")
    declining.wait_for_url(f"**/queue/items/{review.pk}/")
    declining.locator("main").click(position={"x": 5, "y": 5})
    declining.keyboard.press("d")  # no reason yet: the reason field asks for one, nothing is sent
    assert declining.evaluate("document.activeElement.name") == "reason"
    declining.fill("input[name=reason]", "I wrote the refund policy.")
    declining.locator("main").click(position={"x": 5, "y": 5})
    declining.keyboard.press("d")
    declining.wait_for_url("**/queue/")
    assert "Declined" in declining.locator(".flash").inner_text()

    first = tab_for(browser, live_server, ann)
    first.keyboard.press("n")
    first.wait_for_url(f"**/queue/items/{review.pk}/")
    assert "0 of 2 answered" in first.locator("#answers").inner_text()
    first.fill("textarea[name=note]", "ANN: the refund window is stated wrongly.")
    first.locator("main").click(position={"x": 5, "y": 5})
    first.keyboard.press("r")
    first.wait_for_url("**/queue/")
    assert "Answered: reject on refund-policy" in first.locator(".flash").inner_text()

    second = tab_for(browser, live_server, bob)
    assert "1 of 2 answered · 1 open" in second.locator(f'tr[data-row="{review.pk}"]').inner_text()
    second.keyboard.press("n")
    second.wait_for_url(f"**/queue/items/{review.pk}/")
    assert "1 of 2 answered" in second.locator("#answers").inner_text()
    assert "ANN:" not in second.content()  # blind: the first answer is nowhere on the page
    second.keyboard.press("a")
    second.wait_for_url("**/queue/")
    assert not Decision.objects.exists()

    third = tab_for(browser, live_server, cy)
    row = third.locator(f'tr[data-row="{review.pk}"]')
    assert "awaiting adjudication" in row.inner_text()
    third.keyboard.press("n")
    third.wait_for_url(f"**/queue/items/{review.pk}/")
    answers = third.locator("#answers")
    assert "ANN: the refund window is stated wrongly." in answers.inner_text()
    assert answers.locator("tr.differs", has_text="outcome").count() == 1
    third.fill("textarea[name=note]", "The policy page says 30 days; the draft says 14.")
    third.locator("main").click(position={"x": 5, "y": 5})
    third.keyboard.press("r")
    third.wait_for_url("**/queue/")
    decision = Decision.objects.get(review=review)
    assert (decision.basis, decision.decided_by, decision.outcome) == ("adjudicated", cy, "reject")

    third.goto("/dashboard/")
    third.locator("#people-against-people > summary").click()  # the statistics, folded under their section
    card = third.locator("#people-draft-audit")
    assert "pass fail" in card.inner_text()
    card.locator("a", has_text="1").last.click()  # the items split on
    third.wait_for_url("**/dashboard/reviews/**")
    assert "refund-policy" in third.locator("main").inner_text()
    assert [tab.console_errors for tab in (declining, first, second, third)] == [[], [], [], []]

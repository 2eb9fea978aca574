"""An operator answers a version's own checks in Chromium: a verdict, a category and a score, each beside its question
and guidance (issue 39)."""

import pytest

from grading.models import Decision
from tests.builders.browser import sign_in
from tests.builders.custom_checks import POLICY_GUIDANCE, custom_checks_item
from tests.builders.people import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_operator_answers_a_category_and_a_score_beside_their_questions(page, operator, org):
    review = custom_checks_item(org)
    sign_in(page, operator.username, PASSWORD)
    page.wait_for_url("**/queue/")
    page.keyboard.press("n")
    page.wait_for_url(f"**/queue/items/{review.pk}/")
    intent = page.locator("#check-intent")
    assert (
        "What did the user come for?" in intent.inner_text() and intent.get_by_text("Asks for money back.").is_visible()
    )
    assert page.locator("#check-cites_policy").get_by_text(POLICY_GUIDANCE).is_visible()  # the admin's words, as text
    page.check("#check-cites_policy input[value=fail]")
    page.check("#check-intent input[value=shipping]")
    page.check("#check-helpful input[value='2']")
    page.fill("textarea[name=note]", "No policy named; the user wanted a delivery date.")
    page.locator("main").click(position={"x": 5, "y": 5})
    page.keyboard.press("a")
    page.wait_for_url("**/queue/")
    decision = Decision.objects.get(review=review)
    assert decision.checks == {"cites_policy": "fail", "intent": "shipping", "helpful": "2"}
    assert decision.outcome == "fail"
    assert page.console_errors == []

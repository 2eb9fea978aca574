"""Two releases compared, end to end in Chromium (issue 43): a stakeholder narrows the dashboard to release 2.4,
goes on to compare it with 2.3, sees grounding marked as differing, and opens the conversations behind 2.4's
grounding failures."""

import pytest

from grading.models import Review
from tests.builders.browser import signed_in_tab
from tests.builders.releases import build_releases

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_stakeholder_compares_two_releases_and_opens_the_items_behind_a_difference(
    browser, live_server, fake_llm, org, stakeholder
):
    build_releases(org, fake_llm)
    page = signed_in_tab(browser, live_server, stakeholder, "/dashboard/")
    page.goto("/dashboard/?from=2026-W48&to=2026-W48")
    page.select_option('select[data-dimension="release"]', "release=2.4")
    page.click("#dashboard-filters button[type=submit]")
    assert "release=2.4" in page.locator("#sliced").inner_text()

    page.click("#compare-link")
    form = page.locator("#compare-form")
    form.locator('select[name="dimension"]').select_option("release")
    form.locator('input[name="a"]').fill("2.3")
    form.locator('input[name="b"]').fill("2.4")
    form.locator("button[type=submit]").click()
    grounded = page.locator('tr[data-check="grounded"]')
    assert "differs" in grounded.get_attribute("class")
    assert (
        "90.0%" in grounded.inner_text() and "40.0%" in grounded.inner_text() and "-50.0 pts" in grounded.inner_text()
    )
    assert "two-proportion z-test" in page.locator("#methods").inner_text()

    grounded.locator("a.failed").nth(1).click()  # b's failures
    listed = {int(pk) for pk in page.locator("#review-list tr[data-review]").evaluate_all(
        "rows => rows.map(row => row.dataset.review)"
    )}  # fmt: skip
    behind = Review.objects.counting().filter(
        org=org, slice__contains={"release": "2.4"}, checks__grounded__verdict="fail"
    )
    assert listed == set(behind.values_list("pk", flat=True)) and len(listed) == 6
    assert "release 2.4" in page.locator("h1").inner_text()
    assert page.console_errors == []

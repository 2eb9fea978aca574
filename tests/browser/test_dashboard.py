"""A stakeholder in Chromium: opens the dashboard, the server-rendered SVG trend renders, and a number clicked (a
point of the chart, then a number of the table) leads to the reviews behind it."""

import re

import pytest

from grading.core.weeks import monday
from tests.builders.browser import sign_in
from tests.builders.certified import Graded, audit_decided, counted, filed_in, graded_drafts, reviews_of
from tests.builders.people import PASSWORD
from tests.builders.world import build_world, iso

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_stakeholder_opens_the_dashboard_sees_the_trend_and_clicks_through_to_the_reviews(
    page, org, fake_llm, operator, stakeholder
):
    from django.utils import timezone

    world = build_world(org, fake_llm, operator)
    sign_in(page, stakeholder.username, PASSWORD)
    page.wait_for_url("**/dashboard/")
    page.goto(f"/dashboard/?org={org.slug}&from=2026-W46&to={iso(monday(timezone.now()))}")
    kpi = page.locator("#kpi-quality").inner_text()
    assert re.search(r"3\s*/\s*5\s*resolved pass every check", kpi)
    assert "2 of 7 unknown, not counted" in kpi

    chart = page.locator("#quality-trend svg")
    box = chart.bounding_box()
    assert box is not None and box["width"] > 300 and box["height"] > 50  # drawn, not an empty element
    points = chart.locator("circle")
    assert points.count() == 2  # W47 and W48 have something resolved
    assert chart.locator("polyline").get_attribute("points").count(",") == 2
    assert chart.locator("rect.bar-unknown").count() == 1  # W48's two unknowns

    points.nth(0).click()  # W47: passes of that week
    page.wait_for_url("**/dashboard/reviews/**")
    listed = {int(row.get_attribute("data-review")) for row in page.locator("#review-list tr[data-review]").all()}
    assert listed == {world.reviews["c1"].pk, world.reviews["c5"].pk}
    assert "2026-W47 to 2026-W47" in page.locator("h1").inner_text()

    page.go_back()
    page.locator("#quality-by-application tr", has_text="billing").get_by_role("link").nth(2).click()  # unknowns
    page.wait_for_url("**/dashboard/reviews/**")
    rows = page.locator("#review-list tr[data-review]")
    assert rows.count() == 1 and rows.first.get_attribute("data-review") == str(world.reviews["c3"].pk)
    assert page.console_errors == []


def test_the_quality_rate_against_people_loads_into_the_dashboard_and_folds_its_numbers(
    page, org, operator, stakeholder
):
    from django.utils import timezone

    reviews = reviews_of(graded_drafts(org, [Graded(0.9, True, None), Graded(0.8, False, None)] * 10))
    filed_in(reviews, monday(timezone.now()))
    audit_decided(reviews[:6], [True, False, True, True, False, False], operator)
    counted(org)  # the reviews were written straight to the tables: what the grading write stores and books
    sign_in(page, stakeholder.username, PASSWORD)
    page.wait_for_url("**/dashboard/")

    drafts = page.locator('#certified-quality [data-kind="draft"]')  # swapped in by htmx once the page has loaded
    assert re.fullmatch(
        r"People audited 6 drafts: the quality rate is \d+% to \d+% \(PPI\+\+, 95%\); the judge counts 55%\.",
        drafts.locator(".certified-words").inner_text(),
    )
    assert not drafts.locator('[data-figure="interval"]').is_visible()  # the numbers wait under details
    drafts.locator("summary").click()
    assert drafts.locator('[data-figure="audited"]').inner_text() == "6"
    assert page.console_errors == []

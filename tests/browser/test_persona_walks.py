"""Each persona's real work in Chromium, once in a phone's window (390 px) and once in a desktop's (1280 px), through
the pages issue 41 changed for them: the operator claims, decides with the keys and lands on the next item; the lead
goes from the overdue list to assigning and adds a target; the criteria admin sees a mistake at its field, reads the
publish plan and sets a cap in money; the stakeholder reads the first screen in words, opens the statistics, picks an
application and follows a number to its rows and the export; the org admin narrows a member's scope, previews an
erasure and filters the audit trail. At every page: the page itself never scrolls sideways, no text is squeezed to a
few characters a line, the page's main action can be tapped, and what the person came for is shown.

The operator's walk holds what the operator's day in test_queue_flow held (folded in here, now at both widths). What
other walks hold is not asserted again: the measures of the item pages and the dashboard at 390 px and 200% zoom
(test_narrow_windows), the keys each decision takes (test_keystrokes), the set-up pages in full (test_queue_setup).
Set TOLLGATE_WALK_SHOTS to a directory to keep a screenshot of every page walked."""

import json
import os
import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from grading.core.weeks import monday
from grading.models import Decision, ItemKind, Review, SpendCap
from grading.reviews.versions import criteria_new_version
from reviewer.models import Assignment, Membership, Role
from tests.builders.browser import cramped_texts, settled, sideways_scroll, signed_in_tab
from tests.builders.people import make_person
from tests.builders.queue_items import conversation_item, draft_item
from tests.builders.world import build_world

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WINDOWS = {"phone": {"width": 390, "height": 844}, "desktop": {"width": 1280, "height": 800}}
SHOTS = os.environ.get("TOLLGATE_WALK_SHOTS", "")


@pytest.fixture(params=WINDOWS, ids=WINDOWS)
def window(request) -> str:
    return request.param


def looks_right(tab, name: str, window: str) -> None:
    """What a person relies on at every page, in any window: nothing pushes the page sideways and every text that
    wraps has room to be read."""
    if SHOTS:
        tab.screenshot(path=str(Path(SHOTS) / f"{name}-{window}.png"), full_page=True)
    assert sideways_scroll(tab) == 0, f"{name} scrolls sideways in the {window}'s window"
    assert cramped_texts(tab) == [], f"{name} in the {window}'s window"


def in_reach(action) -> None:
    """The action can be tapped: Playwright scrolls to it and checks that it shows, holds still and is not covered,
    without pressing it."""
    action.click(trial=True)


def filed(*reviews: Review) -> None:
    """Each review in the ISO week it was graded, as the record files it (the queue builders leave it out)."""
    for review in reviews:
        Review.objects.filter(pk=review.pk).update(week=monday(review.finished_at))


# --- the operator ---------------------------------------------------------------------------------


def test_an_operator_claims_next_reads_the_evidence_decides_with_the_keys_and_lands_on_the_next_item(
    browser, live_server, org, operator, window
):
    draft = draft_item(org, "how-to-cut-support-costs")
    conversation = conversation_item(org, "cv-7f3a91")
    filed(draft, conversation)
    tab = signed_in_tab(browser, live_server, operator, "/queue/", viewport=WINDOWS[window])

    assert tab.locator("#queue-list tr[data-row]").count() == 2
    assert tab.locator("#queue-order").is_visible()  # the order claim next follows, said on the page
    looks_right(tab, "operator-queue", window)
    in_reach(tab.locator("#claim-next-form button"))

    tab.keyboard.press("n")  # drafts first: a pipeline waits on them
    tab.wait_for_url(f"**/queue/items/{draft.pk}/")
    assert "Score 6.7 against threshold 7.0" in tab.locator("main").inner_text()
    assert tab.locator("mark.proof", has_text="Acme Logistics").is_visible()
    assert tab.get_by_text("The opening warms up for a paragraph").is_visible()
    assert tab.locator(".verdicts").is_visible() and tab.locator(".article").is_visible()
    assert "lease: 15 min left" in tab.locator("#lease").inner_text()
    looks_right(tab, "operator-draft", window)
    in_reach(tab.locator("#decide-form button[data-key=a]"))

    tab.keyboard.press("a")
    tab.wait_for_url(f"**/queue/items/{conversation.pk}/")  # the next item opens, claimed
    assert "Decided: approve on how-to-cut-support-costs" in tab.locator(".flash").inner_text()
    assert "lease: 15 min left" in tab.locator("#lease").inner_text()
    assert tab.locator("#check-grounded .question").is_visible()  # each check's question beside its answer
    looks_right(tab, "operator-conversation", window)
    in_reach(tab.get_by_role("button", name=re.compile("^Decide")))

    tab.get_by_role("link", name="m4").first.click()  # a quoted evidence message scrolls to it in the path
    assert tab.url.endswith("#msg-5")
    assert tab.locator("#msg-5").is_visible()
    assert tab.get_by_text("1 abandoned branch after m3").is_visible()
    assert tab.locator("#decide-form input:checked").count() == 0  # nothing of the machine's to anchor on
    for key in "pfp":  # a key per answer: each answers the next check, the last leads to the note
        tab.keyboard.press(key)
    assert tab.evaluate("document.activeElement.name") == "note"
    tab.keyboard.type("Complete misses the refund's date.")
    tab.keyboard.press("Control+Enter")
    tab.wait_for_url("**/queue/")
    assert "Nothing is waiting for a human." in tab.locator("#queue-list").inner_text()
    assert Decision.objects.get(review=conversation).checks == {
        "grounded": "pass",
        "complete": "fail",
        "usable": "pass",
    }
    assert tab.console_errors == []


# --- the lead ---------------------------------------------------------------------------------------


@pytest.fixture
def overdue(org) -> list[Review]:
    items = [conversation_item(org, f"cv-late-{n}", minutes_ago=90 - n) for n in range(3)]
    filed(*items)
    Review.objects.filter(pk__in=[r.pk for r in items]).update(due_at=timezone.now() - timedelta(minutes=15))
    return items


def test_a_lead_assigns_from_the_overdue_list_opens_an_item_and_adds_a_target(
    browser, live_server, org, overdue, window
):
    lee = make_person("lee", org, Role.LEAD)
    make_person("ann", org, Role.OPERATOR)
    tab = signed_in_tab(browser, live_server, lee, "/queue/", viewport=WINDOWS[window])

    tab.goto(f"/dashboard/?org={org.slug}")
    service = tab.locator("#queue-service")
    service.locator("table").first.wait_for()  # the section loads on its own, after the page
    assert "3 overdue now" in service.inner_text()
    service.get_by_role("link", name="3").click()
    tab.wait_for_url("**/dashboard/reviews/**")
    rows = tab.locator("#review-list tr[data-review]")
    assert rows.count() == 3
    looks_right(tab, "lead-overdue-list", window)
    for review in overdue[:2]:
        tab.get_by_label(f"assign review {review.pk}").check()
    tab.locator("#assign-many select[name=to]").select_option(label="ann")
    in_reach(tab.locator("#assign-many button"))
    tab.locator("#assign-many button").click()
    assert "Assigned 2 items to ann." in tab.locator(".flash").inner_text()
    assert set(Assignment.objects.values_list("review_id", flat=True)) == {r.pk for r in overdue[:2]}
    looks_right(tab, "lead-overdue-list-assigned", window)

    tab.locator(f'#review-list tr[data-review="{overdue[2].pk}"] a.item-link').click()  # the row to its item
    tab.wait_for_url(f"**/queue/items/{overdue[2].pk}/")
    assert tab.locator("#assignment").is_visible()
    looks_right(tab, "lead-item", window)
    in_reach(tab.locator("#assignment button[type=submit]"))

    tab.goto("/queue/")
    tab.click("#queue-setup-link")
    tab.wait_for_url("**/setup/targets/")
    add = tab.locator(f"#org-{org.pk} form.add-target")
    add.locator("input[name=within]").fill("8")
    add.locator("select[name=unit]").select_option("hours")
    in_reach(add.locator("button.primary"))
    with tab.expect_navigation():
        add.locator("button.primary").click()
    assert "within 8 h" in tab.locator(".flash").inner_text()
    assert tab.locator(f"#org-{org.pk} tr.target").count() == 1
    looks_right(tab, "lead-targets", window)
    assert tab.console_errors == []


# --- the criteria admin -----------------------------------------------------------------------------


def test_a_criteria_admin_sees_a_mistake_at_its_field_reads_the_publish_plan_and_sets_a_cap_in_money(
    browser, live_server, org, fake_llm, operator, criteria_admin, window
):
    build_world(org, fake_llm, operator)  # graded drafts with their token usage: the plan's estimate has a basis
    version = criteria_new_version(org=org, kind=ItemKind.DRAFT)
    tab = signed_in_tab(browser, live_server, criteria_admin, "/dashboard/", viewport=WINDOWS[window])

    tab.goto("/criteria/")
    looks_right(tab, "criteria-index", window)
    tab.locator(f'a[href="/criteria/{version.pk}/"]').first.click()
    tab.wait_for_url(f"**/criteria/{version.pk}/")
    field = tab.locator("input[name=h2_min_percent]")
    field.fill("150")
    tab.get_by_role("button", name=f"Save v{version.number}").click()
    summary = tab.locator("#editor-errors")
    assert "Not saved: 1 thing to fix" in summary.inner_text()
    assert summary.bounding_box()["y"] < WINDOWS[window]["height"]  # on the first screen, above every field
    at_field = field.locator("xpath=following-sibling::ul[contains(@class, 'errorlist')][1]")
    assert "less than or equal to 100" in at_field.inner_text()
    at_field.scroll_into_view_if_needed()
    assert at_field.is_visible() and field.input_value() == "150"  # what was typed is kept
    looks_right(tab, "criteria-editor-refused", window)
    in_reach(tab.get_by_role("button", name=f"Save v{version.number}"))

    tab.get_by_role("link", name="Publish… (read the plan)").click()
    tab.wait_for_url(f"**/criteria/{version.pk}/publish/")
    assert tab.locator("#plan-tokens").inner_text().isdigit()  # one estimate, with a basis
    assert tab.locator("#plan-decided").is_visible()  # the people's decisions that stop counting
    looks_right(tab, "criteria-publish-plan", window)
    in_reach(tab.get_by_role("button", name=f"Publish v{version.number}"))

    tab.goto("/criteria/")
    tab.get_by_role("link", name="Judge spend and its caps").click()
    tab.wait_for_url("**/criteria/spend/")
    cap = tab.locator(f"#spend-org-{org.pk} form.spend-cap-form")
    cap.get_by_label("cost (USD)").fill("2.50")
    in_reach(cap.get_by_role("button", name="Set the cap"))
    cap.get_by_role("button", name="Set the cap").click()
    row = tab.locator(f"#spend-org-{org.pk} tr.spend-cap")
    assert "2.50 USD" in row.inner_text()
    assert SpendCap.objects.get(org=org).cost_micros == 2_500_000
    looks_right(tab, "criteria-spend", window)
    # The refused save is an HTTP 400, which Chromium logs as a failed resource; nothing else may be logged.
    assert [e for e in tab.console_errors if "status of 400 (Bad Request)" not in e] == []


# --- the stakeholder --------------------------------------------------------------------------------


def test_a_stakeholder_reads_the_first_screen_in_words_opens_the_statistics_and_follows_a_number(
    browser, live_server, org, fake_llm, operator, stakeholder, window
):
    build_world(org, fake_llm, operator)
    tab = signed_in_tab(browser, live_server, stakeholder, "/dashboard/", viewport=WINDOWS[window])
    tab.goto(f"/dashboard/?org={org.slug}&from=2026-W46")
    settled(tab)  # the panels htmx swaps in once the page has loaded are on it too

    words = tab.locator("#in-words")
    assert words.bounding_box()["y"] < WINDOWS[window]["height"] / 2  # the words open the first screen
    assert "3 of the 5 whose checks all resolved passed every check" in words.inner_text()
    assert "the gate passed" in tab.locator("#words-gate").inner_text()
    assert tab.locator('main a[href*="/api/"]').count() == 0  # no link a signed-in reader would be refused
    looks_right(tab, "stakeholder-first-screen", window)

    statistics = tab.locator("#judge-against-people")
    assert not statistics.locator("table").first.is_visible()  # the statistics wait under their section
    statistics.locator("> summary").click()  # loads them (htmx) as it opens
    statistics.locator("table").first.wait_for()  # visible
    looks_right(tab, "stakeholder-statistics-open", window)

    tab.locator("#dashboard-filters select[name=application]").select_option("billing")
    in_reach(tab.locator("#dashboard-filters button[type=submit]"))
    tab.locator("#dashboard-filters button[type=submit]").click()
    tab.wait_for_url("**application=billing**")
    settled(tab)
    assert "billing" in tab.locator("h1").inner_text()
    looks_right(tab, "stakeholder-billing", window)

    tab.locator("#words-quality a").first.click()  # the passes behind the words
    tab.wait_for_url("**/dashboard/reviews/**")
    rows = tab.locator("#review-list tr[data-review]")
    assert rows.count() >= 1 and "billing" in rows.first.inner_text()
    looks_right(tab, "stakeholder-list", window)

    jsonl = tab.get_by_role("link", name="JSONL")
    response = tab.request.get(jsonl.get_attribute("href"))  # with the reader's session, as the link is followed
    assert response.status == 200
    exported = [json.loads(line) for line in response.text().splitlines()]
    assert {row["review_id"] for row in exported} == {int(r.get_attribute("data-review")) for r in rows.all()}

    rows.first.locator("a.item-link").click()  # a row to the item, read only
    tab.wait_for_url("**/dashboard/items/**")
    assert "Read only" in tab.locator("#read-only").inner_text()
    assert tab.locator(".verdicts").is_visible() and tab.locator(".path .msg").count() >= 1
    looks_right(tab, "stakeholder-item", window)
    assert tab.console_errors == []


# --- the org admin ----------------------------------------------------------------------------------


def test_an_org_admin_narrows_a_scope_previews_an_erasure_and_filters_the_audit_trail(
    browser, live_server, org, operator, window
):
    conversation_item(org, "cv-billing", application="billing")
    conversation_item(org, "cv-docs", application="docs")
    olga = make_person("olga", org, Role.ORG_ADMIN)
    membership = Membership.objects.get(user=operator, org=org)
    tab = signed_in_tab(browser, live_server, olga, "/dashboard/", viewport=WINDOWS[window])

    tab.goto("/org/")
    row = tab.locator(f"#membership-{membership.pk}")
    assert "whole org" in row.inner_text()
    looks_right(tab, "org-members", window)
    row.locator("select[name=reach]").select_option("part")
    row.locator("select[name=applications]").select_option(["billing"])
    in_reach(row.get_by_role("button", name="Change"))
    with tab.expect_navigation():  # the old row names billing too, among its options: read the page the POST led to
        row.get_by_role("button", name="Change").click()
    assert "billing" in tab.locator(f"#membership-{membership.pk}").inner_text()
    membership.refresh_from_db()
    assert membership.applications == ["billing"]
    looks_right(tab, "org-members-changed", window)

    tab.get_by_role("link", name="Erasure").first.click()
    tab.wait_for_url("**/erasure/")
    form = tab.locator(f"#erasure-org-{org.pk} form")
    form.locator("select[name=scope]").select_option("conversation")
    form.locator("input[name=target]").fill("cv-docs")
    form.get_by_role("button", name="Continue").click()
    preview = tab.locator("#erasure-preview").inner_text()  # what goes, counted before anything does
    assert "1 conversation" in preview and "5 messages" in preview and "1 review" in preview
    looks_right(tab, "org-erasure-preview", window)
    in_reach(tab.locator("#erasure-confirm button.primary"))

    tab.goto("/audit/")
    filters = tab.locator("#audit-filters")
    filters.locator("select[name=action]").select_option(label="any membership event")
    filters.get_by_role("button", name="Filter").click()
    tab.wait_for_url("**/audit/?*action=membership*")  # a plain GET form: the rows are read once the page has loaded
    events = tab.locator("#audit-events tr[data-event]")
    assert events.count() == 1 and "role changed" in events.first.inner_text()
    looks_right(tab, "org-audit", window)
    assert tab.console_errors == []

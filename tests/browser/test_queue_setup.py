"""A lead sets up the queue in Chromium: from the queue to the set-up page, a target for every item, then one for
drafts ahead of it in one step (the waiting draft's due time follows at once), then the first one's duration; then
a pool for the billing team and a rule that reserves the items no check could answer for it."""

from datetime import timedelta

import pytest

from grading.models import AuditEvent, ServiceTarget
from reviewer.models import Pool, Role
from tests.builders.browser import sideways_scroll, signed_in_tab
from tests.builders.people import make_person
from tests.builders.queue_items import draft_item

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_lead_adds_a_target_and_one_ahead_of_it_from_the_queue_and_then_a_pool_with_a_rule(browser, live_server, org):
    waiting = draft_item(org, "waiting")
    lee = make_person("lee", org, Role.LEAD)
    make_person("ann", org, Role.OPERATOR)
    tab = signed_in_tab(browser, live_server, lee, "/queue/")

    tab.click("#queue-setup-link")
    tab.wait_for_url("**/setup/targets/")
    card = tab.locator(f"#org-{org.pk} form.add-target")
    card.locator("input[name=within]").fill("8")
    card.locator("select[name=unit]").select_option("hours")
    with tab.expect_navigation():
        card.locator("button.primary").click()
    assert "within 8 h" in tab.locator(".flash").inner_text()

    card = tab.locator(f"#org-{org.pk} form.add-target")
    card.locator("select[name=kind]").select_option("draft")
    card.locator("input[name=within]").fill("45")
    card.locator("select[name=ahead_of]").select_option(
        label="ahead of #1: any kind · any application · any reason  within 8 h"
    )
    with tab.expect_navigation():
        card.locator("button.primary").click()

    rows = tab.locator(f"#org-{org.pk} tr.target")
    assert [rows.nth(i).get_attribute("data-position") for i in range(rows.count())] == ["1", "2"]
    assert "draft · any application · any reason" in rows.nth(0).inner_text()
    assert "45 min" in rows.nth(0).inner_text()
    assert "8 h" in rows.nth(1).inner_text()

    second = tab.locator(f"#target-{org.pk}-2 form.change-target")
    second.locator("input[name=within]").fill("6")
    second.locator("select[name=unit]").select_option("hours")
    with tab.expect_navigation():
        second.locator("button").click()
    assert "6 h" in tab.locator(f"#target-{org.pk}-2").inner_text()

    tab.click("text=Pools")
    tab.wait_for_url("**/setup/pools/")
    new_pool = tab.locator(f"#org-{org.pk} form.add-pool")
    new_pool.locator("input[name=name]").fill("billing")
    new_pool.locator("label", has_text="ann").locator("input").check()
    with tab.expect_navigation():
        new_pool.locator("button.primary").click()
    assert "created: northwind billing ann" in tab.locator(".flash").inner_text()
    assert list(Pool.objects.get(org=org, name="billing").members.values_list("username", flat=True)) == ["ann"]

    tab.click("text=Assignment rules")
    tab.wait_for_url("**/setup/rules/")
    new_rule = tab.locator(f"#org-{org.pk} form.add-rule")
    new_rule.locator("select[name=reason]").select_option("unknown_check")
    new_rule.locator("select[name=assignee]").select_option(label="pool billing")
    new_rule.locator("input[name=hours]").fill("4")
    with tab.expect_navigation():
        new_rule.locator("button.primary").click()
    assert "unknown_check → pool billing for 4 h" in tab.locator(f"#rule-{org.pk}-1").inner_text()

    tab.set_viewport_size({"width": 390, "height": 800})  # a phone: each set-up page fits, tables scroll in their box
    for page in ("targets", "pools", "rules", "escalation"):
        tab.goto(f"/setup/{page}/")
        assert sideways_scroll(tab) == 0, page
    assert tab.console_errors == []
    assert list(ServiceTarget.objects.order_by("position").values_list("kind", "minutes")) == [("draft", 45), ("", 360)]
    waiting.refresh_from_db()
    assert waiting.due_at == waiting.routed_at + timedelta(minutes=45)
    assert set(AuditEvent.objects.filter(action__startswith="service_target.").values_list("actor_id", flat=True)) == {
        lee.pk
    }

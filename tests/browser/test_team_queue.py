"""A team's queue in Chromium: a lead assigns an item, the assignee claims it (claim next keeps the page's order), it
goes overdue, the mail reaches the loopback SMTP server, and the dashboard shows it overdue and then decided late."""

from datetime import timedelta

import pytest
from django.db.models import F
from django.utils import timezone

from grading.models import Review, ServiceTarget
from grading.reviews.targets import due_times_refresh
from reviewer import tasks
from reviewer.models import Escalation, Role
from reviewer.queue.escalation import escalations_sweep
from tests.builders.browser import sign_in
from tests.builders.people import PASSWORD, make_person
from tests.builders.queue_items import draft_item

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def tab_for(browser, live_server, person, landing: str = "**/queue/"):
    tab = browser.new_context(base_url=live_server.url).new_page()
    sign_in(tab, person.username, PASSWORD)
    tab.wait_for_url(landing)
    return tab


def test_a_lead_assigns_the_assignee_claims_it_it_goes_overdue_the_mail_arrives_and_it_is_decided_late(
    browser, live_server, org, smtp, monkeypatch
):
    older = draft_item(org, "older-draft", minutes_ago=20)
    hard = draft_item(org, "hard-customer", minutes_ago=5)
    ServiceTarget.objects.create(org=org, position=1, kind="draft", minutes=30)
    due_times_refresh(org.pk)
    Escalation.objects.create(org=org, swept_until=timezone.now())
    lee = make_person("lee", org, Role.LEAD, Role.STAKEHOLDER)
    ann = make_person("ann", org, Role.OPERATOR)
    for person in (lee, ann):
        person.email = f"{person.username}@example.com"
        person.save()

    lead = tab_for(browser, live_server, lee)
    lead.goto(f"/queue/items/{hard.pk}/")
    lead.select_option("#assignment select[name=to]", label="ann")
    lead.click("#assignment button[type=submit]")
    assert "Assigned to ann" in lead.locator(".flash").inner_text()
    assert "Assigned to ann" in lead.locator("#assignment").inner_text()

    assignee = tab_for(browser, live_server, ann)
    assert "for you" in assignee.locator(f'tr[data-row="{hard.pk}"]').inner_text()
    assignee.keyboard.press("n")  # the older draft is due sooner: claim next follows the page's order
    assignee.wait_for_url(f"**/queue/items/{older.pk}/")
    assignee.goto(f"/queue/items/{hard.pk}/")
    assignee.keyboard.press("c")  # and this one is hers to claim
    assignee.locator("#decide-form").wait_for()

    # Half an hour on: the item was routed 35 minutes ago and its target was 30.
    Review.objects.filter(pk__in=[older.pk, hard.pk]).update(
        routed_at=F("routed_at") - timedelta(minutes=30), due_at=F("due_at") - timedelta(minutes=30)
    )
    Escalation.objects.update(swept_until=F("swept_until") - timedelta(minutes=30))
    # The beat's sweep; its mails are sent here rather than by a webhooks worker.
    monkeypatch.setattr(tasks.escalation_mail, "delay", lambda *args: tasks.escalation_mail.apply(args=args).get())
    escalations_sweep(tasks.deliver)
    assert sorted(m["To"] for m in smtp.messages) == ["ann@example.com", "lee@example.com"]
    assert "hard-customer" in next(m for m in smtp.messages if m["To"] == "ann@example.com").get_payload()

    lead.goto("/dashboard/")
    lead.locator("#queue-service table").first.wait_for()  # the section loads on its own, after the page
    assert "2 overdue now" in lead.locator("#queue-service").inner_text()
    assignee.reload()
    assert "overdue" in assignee.locator("#due").inner_text()
    assignee.locator("main").click(position={"x": 5, "y": 5})
    assignee.keyboard.press("a")
    assignee.wait_for_url("**/queue/")
    lead.goto("/dashboard/")
    lead.locator("#queue-service table").first.wait_for()
    service = lead.locator("#queue-service").inner_text()
    assert "1 overdue now" in service
    late_cell = lead.locator("#queue-service table").first.locator("tbody tr").last.locator("td").nth(2)
    assert late_cell.inner_text() == "1"
    with lead.expect_navigation():  # counting rows does not wait: count them on the page the link leads to
        late_cell.locator("a").click()
    assert lead.locator(f'[data-review="{hard.pk}"]').count() == 1

"""An org admin sets a monitor in Chromium and it fires: from the dashboard's navigation to the monitors, a new
monitor of release 2.4's grounding (rates typed in percent, a chat webhook on loopback), then an evaluation (called
as the beat would call it) finds the release failing, the receiver is told once, and the page shows the alert with
the items behind the figure."""

import json

import pytest
from django.utils import timezone

from grading import tasks
from grading.models import Monitor
from grading.monitors.evaluate import monitors_evaluate
from reviewer.models import Role
from tests.builders.browser import signed_in_tab
from tests.builders.monitored import graded
from tests.builders.people import make_person
from tests.fakes.webhook_receivers import Receiver

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_admin_sets_a_monitor_and_it_fires(browser, live_server, org, settings):
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    chat = Receiver([])
    try:
        now = timezone.now()
        for verdict in ["pass"] * 3 + ["fail"] * 7:
            graded(org, at=now, checks={"grounded": verdict}, metadata={"release": "2.4"})
        graded(org, at=now, checks={"grounded": "pass"}, metadata={"release": "2.3"})
        admin = make_person("olive", org, Role.ORG_ADMIN)
        tab = signed_in_tab(browser, live_server, admin, "/dashboard/")

        tab.click("nav >> text=Monitors")
        tab.wait_for_url("**/monitors/")
        tab.click("#monitor-new")
        form = tab.locator("#monitor-form")
        form.locator("input[name=name]").fill("Release 2.4 grounding")
        form.locator("select[name=figure]").select_option("check_pass")
        form.locator("input[name=check_key]").fill("grounded")
        form.locator("input[name=metadata_name]").fill("release")
        form.locator("input[name=metadata_value]").fill("2.4")
        form.locator("input[name=min_n]").fill("5")
        form.locator("input[name=warning_level]").fill("90")
        form.locator("input[name=alert_level]").fill("75")
        form.locator("input[name=chat_url]").fill(chat.url)
        with tab.expect_navigation():
            tab.click("#monitor-save")
        assert tab.locator("#monitor-state").inner_text() == "not evaluated yet"

        def told_at_once(evaluation_id: int, channels: list[str]) -> None:
            for channel in channels:
                tasks.monitor_notice.apply(args=(evaluation_id, channel)).get()

        monitors_evaluate(deliver=told_at_once)  # what the beat runs; the transaction commits, so it tells at once
        [(_, body)] = chat.received
        assert json.loads(body)["text"].startswith("*Release 2.4 grounding: alert (was not evaluated)*")

        tab.reload()
        assert tab.locator("#monitor-state").inner_text() == "alert"
        figure = tab.locator("#monitor-history a.figure-link")
        assert figure.inner_text() == "30.0%"
        figure.click()
        tab.wait_for_url("**/items/?evaluation=*")
        assert tab.locator("#monitor-items tbody tr").count() == 10
        assert tab.console_errors == []
        assert Monitor.objects.get().state == "alert"
    finally:
        chat.close()

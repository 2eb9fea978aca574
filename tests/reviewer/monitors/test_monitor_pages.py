"""The monitors' pages: anyone with a role sees the monitors their reach covers, with state, history and the items
behind each figure (blind review holding, untrusted ids escaped); org admins and leads of the whole org create,
change and remove them (audited, with the person); a bad form is a 400 naming the field that writes nothing; another
org's monitor is a 404."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from grading.models import AuditEvent, Monitor, MonitorEvaluation, Route
from grading.monitors.evaluate import monitors_evaluate
from reviewer.models import Membership, Role
from reviewer.monitors import views as monitor_views
from tests.builders.monitored import graded, monitor
from tests.builders.people import make_person

pytestmark = pytest.mark.django_db

NEW = reverse("monitor_new")
FORM = {
    "name": "Grounding of release 2.4", "figure": "check_pass", "kind": "conversation", "check_key": "grounded",
    "window_hours": "24", "application": "", "metadata_name": "release", "metadata_value": "2.4", "min_n": "20",
    "direction": "", "warning_level": "90", "alert_level": "80", "margin": "2",
    "mail_to": "oncall@example.com, lead@example.com", "webhook_url": "", "chat_url": "",
}  # fmt: skip


@pytest.fixture
def org_admin(org):
    return make_person("olive", org, Role.ORG_ADMIN)


def test_it_lets_an_org_admin_create_a_monitor_with_rates_in_percent_and_audits_it(client_for, org, org_admin):
    response = client_for(org_admin).post(NEW, FORM | {"org": org.pk})
    assert response.status_code == 302
    created = Monitor.objects.get()
    assert (created.warning_level, created.alert_level, created.margin) == (0.9, 0.8, 0.02)
    assert (created.metadata_name, created.metadata_value, created.direction) == ("release", "2.4", "below")
    assert created.mail_to == ["oncall@example.com", "lead@example.com"]
    event = AuditEvent.objects.get()
    assert (event.action, event.actor, event.object_id) == ("monitor.create", org_admin, str(created.pk))
    page = client_for(org_admin).get(response.url).content.decode()
    assert "Not evaluated yet" in page and "Warning below 90.0%, alert below 80.0%, margin 2.0%" in page


def test_it_lets_a_lead_change_a_monitor_then_remove_it(client_for, org):
    lead = make_person("lee", org, Role.LEAD)
    watched = monitor(org)
    client = client_for(lead)
    shown = client.get(reverse("monitor_edit", args=[watched.pk])).content.decode()
    assert 'name="warning_level" value="90.0"' in shown  # a rate is typed and shown in percent
    changed = client.post(reverse("monitor_edit", args=[watched.pk]), FORM | {"org": org.pk, "name": "grounding"})
    assert changed.status_code == 302
    watched.refresh_from_db()
    assert watched.metadata_value == "2.4" and watched.margin == 0.02
    removal = reverse("monitor_remove", args=[watched.pk])
    assert client.post(removal, {}).status_code == 400  # a bare POST names no monitor and removes nothing
    assert client.post(removal, {"monitor": watched.pk}).status_code == 302
    assert not Monitor.objects.exists()
    assert list(AuditEvent.objects.order_by("pk").values_list("action", "actor")) == [
        ("monitor.create", None), ("monitor.update", lead.pk), ("monitor.delete", lead.pk)
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("changed", "field"),
    [
        ({"name": ""}, "name"),
        ({"window_hours": "a day"}, "window_hours"),
        ({"window_hours": "0"}, "window_hours"),
        ({"check_key": "nonesuch"}, "check_key"),
        ({"warning_level": "120"}, "warning_level"),
        ({"alert_level": "95"}, "alert_level"),
        ({"metadata_value": ""}, "metadata_value"),
        ({"mail_to": "oncall"}, "mail_to"),
        ({"webhook_url": "http://169.254.169.254/latest"}, "webhook_url"),
        ({"figure": "<script>"}, "figure"),
    ],
)
def test_it_refuses_a_bad_form_at_its_field_with_a_400_writing_nothing(client_for, org, org_admin, changed, field):
    response = client_for(org_admin).post(NEW, FORM | {"org": org.pk} | changed)
    assert response.status_code == 400
    assert f'id="{field}-errors"' in response.content.decode()
    assert "<script>" not in response.content.decode()
    assert not Monitor.objects.exists() and not AuditEvent.objects.exists()


def test_it_refuses_a_stakeholder_and_a_lead_of_part_of_the_org_and_hides_another_orgs_monitor(
    client_for, org, other_org, stakeholder
):
    assert client_for(stakeholder).post(NEW, FORM | {"org": org.pk}).status_code == 403
    part_lead = make_person("pat")
    Membership.objects.create(user=part_lead, org=org, role=Role.LEAD, applications=["billing"])
    assert client_for(part_lead).get(NEW).status_code == 403
    theirs = monitor(other_org)
    admin = make_person("olive", org, Role.ORG_ADMIN)
    client = client_for(admin)
    for name in ("monitor_detail", "monitor_items", "monitor_edit"):
        assert client.get(reverse(name, args=[theirs.pk])).status_code == 404
    assert client.post(reverse("monitor_remove", args=[theirs.pk]), {"monitor": theirs.pk}).status_code == 404
    assert client.post(NEW, FORM | {"org": other_org.pk}).status_code == 404
    assert Monitor.objects.count() == 1


def test_it_shows_each_person_the_monitors_their_reach_covers(client_for, org, stakeholder):
    monitor(org, "every conversation")
    monitor(org, "billing only", application="billing")
    monitor(org, "returns only", application="returns")
    limited = make_person("lim")
    Membership.objects.create(user=limited, org=org, role=Role.STAKEHOLDER, applications=["billing"])
    whole = client_for(stakeholder).get(reverse("monitors")).content.decode()
    assert all(name in whole for name in ("every conversation", "billing only", "returns only"))
    part = client_for(limited).get(reverse("monitors")).content.decode()
    assert "billing only" in part and "every conversation" not in part and "returns only" not in part
    hidden = Monitor.objects.get(name="every conversation")
    assert client_for(limited).get(reverse("monitor_detail", args=[hidden.pk])).status_code == 404


def test_its_history_links_each_figure_to_the_items_behind_it_with_blind_ones_withheld(client_for, org, operator):
    now = timezone.now()
    watched = monitor(org, min_n=1)
    counted = [graded(org, at=now, checks={"grounded": "pass"}) for _ in range(2)]
    counted[0].conversation.external_id = '<img src=x onerror="alert(1)">'
    counted[0].conversation.save()
    blind = graded(org, at=now, route=Route.PASS, checks={"grounded": "fail"}, state="waiting", audit=True)
    graded(org, at=now, minutes_ago=60 * 30, checks={"grounded": "fail"})  # outside the day's window
    monitors_evaluate(deliver=lambda *_: None, now=now)
    evaluation = MonitorEvaluation.objects.get()
    assert (evaluation.value, evaluation.n) == (2 / 3, 3)
    client = client_for(operator)
    detail = client.get(reverse("monitor_detail", args=[watched.pk])).content.decode()
    items_url = f"{reverse('monitor_items', args=[watched.pk])}?evaluation={evaluation.pk}"
    assert items_url in detail and "66.7%" in detail
    page = client.get(items_url).content.decode()
    listed = {review.pk for review in counted if f'data-review="{review.pk}"' in page}
    assert listed == {review.pk for review in counted} and f'data-review="{blind.pk}"' not in page
    assert "1 review is not listed" in page
    assert "<img src=x" not in page and "&lt;img src=x" in page
    assert client.get(reverse("monitor_items", args=[watched.pk]) + "?evaluation=x").status_code == 400


def test_the_list_shows_each_monitors_state_and_latest_figure(client_for, org, stakeholder):
    now = timezone.now()
    watched = monitor(org, min_n=2)
    for verdict in ("pass", "fail", "fail"):
        graded(org, at=now - timedelta(minutes=1), checks={"grounded": verdict})
    monitors_evaluate(deliver=lambda *_: None, now=now - timedelta(minutes=30))  # before the items: no data
    monitors_evaluate(deliver=lambda *_: None, now=now)
    page = client_for(stakeholder).get(reverse("monitors")).content.decode()
    assert f'data-monitor="{watched.pk}"' in page and "alert" in page and "33.3%" in page
    latest = watched.evaluations.order_by("-at").first()
    assert f"?evaluation={latest.pk}" in page


def test_the_list_shows_a_page_of_monitors_under_the_count_of_every_state(client_for, org, stakeholder, monkeypatch):
    monkeypatch.setattr(monitor_views, "MONITORS_SHOWN", 2)
    now = timezone.now()
    watched = monitor(org, "a grounding", min_n=2)
    monitor(org, "b billing", application="billing")
    monitor(org, "c returns", application="returns")
    for verdict in ("pass", "fail", "fail"):
        graded(org, at=now - timedelta(minutes=1), checks={"grounded": verdict})
    monitors_evaluate(deliver=lambda *_: None, now=now)
    Monitor.objects.exclude(pk=watched.pk).update(state="", evaluated_at=None)
    client = client_for(stakeholder)
    first = client.get(reverse("monitors")).content.decode()
    assert "3 monitors: 1 alert, 2 not evaluated yet." in first
    assert "a grounding" in first and "b billing" in first and "c returns" not in first
    assert "1–2 of 3" in first and '<a href="?page=2">next</a>' in first
    second = client.get(reverse("monitors"), {"page": 2}).content.decode()
    assert "c returns" in second and "a grounding" not in second and '<a href="?page=1">previous</a>' in second


@pytest.mark.parametrize("page", ["0", "x", "99999999999999999999"])
def test_the_list_refuses_a_page_that_is_not_a_page_number(client_for, stakeholder, page):
    response = client_for(stakeholder).get(reverse("monitors"), {"page": page})
    assert response.status_code == 400 and "page" in response.content.decode()


def test_the_items_behind_a_figure_come_a_page_at_a_time_newest_first(client_for, org, stakeholder, monkeypatch):
    monkeypatch.setattr(monitor_views, "ITEMS_SHOWN", 2)
    now = timezone.now()
    watched = monitor(org, min_n=1)
    oldest, middle, newest = (
        graded(org, at=now - timedelta(minutes=m), checks={"grounded": "pass"}) for m in (3, 2, 1)
    )
    monitors_evaluate(deliver=lambda *_: None, now=now)
    evaluation = MonitorEvaluation.objects.get()
    client = client_for(stakeholder)
    url = reverse("monitor_items", args=[watched.pk])
    with CaptureQueriesContext(connection) as first_queries:
        first = client.get(url, {"evaluation": evaluation.pk}).content.decode()
    assert [f'data-review="{r.pk}"' in first for r in (newest, middle, oldest)] == [True, True, False]
    assert f'href="?evaluation={evaluation.pk}&amp;page=2">older</a>' in first and ">newer</a>" not in first
    with CaptureQueriesContext(connection) as second_queries:
        second = client.get(url, {"evaluation": evaluation.pk, "page": 2}).content.decode()
    assert [f'data-review="{r.pk}"' in second for r in (newest, middle, oldest)] == [False, False, True]
    assert f'href="?evaluation={evaluation.pk}&amp;page=1">newer</a>' in second and ">older</a>" not in second
    assert len(first_queries) == len(second_queries)  # a row's fields come with it: no query per row
    assert client.get(url, {"page": "0"}).status_code == 400


def test_a_monitors_name_and_org_are_shown_as_text_in_the_list(client_for, org, stakeholder):
    org.name = "<i>Acme</i>"
    org.save()
    monitor(org, '<img src=x onerror="alert(1)">')
    page = client_for(stakeholder).get(reverse("monitors")).content.decode()
    assert "&lt;img src=x" in page and "<img src=x" not in page
    assert "&lt;i&gt;Acme&lt;/i&gt;" in page

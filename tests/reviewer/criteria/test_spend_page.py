"""The spend page: a criteria admin sees the caps with what they count and sets, raises or removes one (audited,
with the old and new figures); bad figures are refused and change nothing; another org's caps are a 404; the
trial count warns when the trial would pass a cap."""

import pytest
from django.urls import reverse
from django.utils import timezone

from grading.api.keys import api_key_create
from grading.models import AuditEvent, ItemKind, JudgeSpend, SpendCap
from grading.reviews.spend import spend_cap_set
from grading.reviews.versions import criteria_active, criteria_new_version
from reviewer.models import Membership, Role
from tests.builders.conversations import support_conversation, upsert
from tests.builders.dashboard_page import card_loaded
from tests.builders.people import make_person

pytestmark = pytest.mark.django_db

URL = "/criteria/spend/"


@pytest.fixture
def admin_client(client_for, criteria_admin):
    return client_for(criteria_admin)


def spent(org, version, tokens: int) -> None:
    """A day's judge spend booked in the ledger, as the reviews book it."""
    JudgeSpend.objects.create(
        org=org, criteria_version=version, judge=version.judge, day=timezone.now().date(), calls=2,
        prompt_tokens=tokens - 40, completion_tokens=40,
    )  # fmt: skip


def test_an_admin_sets_raises_and_removes_a_cap_and_each_change_is_audited(admin_client, org, criteria_admin):
    version = criteria_active(org=org, kind=ItemKind.CONVERSATION)
    spent(org, version, 300)
    answer = admin_client.post(URL, {"org": org.pk, "version": "", "period": "day", "tokens": "250"}, follow=True)
    assert answer.status_code == 200
    page = answer.content.decode()
    assert "reached" in page and "300" in page  # the cap and the spend against it
    answer = admin_client.post(URL, {"org": org.pk, "version": "", "period": "day", "tokens": "1000"})
    assert answer.status_code == 302
    assert SpendCap.objects.get(org=org).tokens == 1000
    raised = AuditEvent.objects.filter(action="spend.cap_set").order_by("pk").last()
    assert (raised.detail["old"]["tokens"], raised.detail["new"]["tokens"], raised.actor) == (250, 1000, criteria_admin)
    answer = admin_client.post(URL, {"org": org.pk, "version": "", "period": "day", "remove": "on"})
    assert answer.status_code == 302 and not SpendCap.objects.exists()
    assert AuditEvent.objects.get(action="spend.cap_removed").detail["old"]["tokens"] == 1000


@pytest.mark.parametrize("tokens", ["-5", "lots", "1e3", str(10**16), ""])
def test_bad_figures_are_refused_and_change_nothing(admin_client, org, tokens):
    answer = admin_client.post(URL, {"org": org.pk, "version": "", "period": "day", "tokens": tokens})
    assert answer.status_code == 400
    assert "Nothing was changed" in answer.content.decode()
    assert not SpendCap.objects.exists() and not AuditEvent.objects.filter(action__startswith="spend.").exists()


def test_another_org_s_caps_are_invisible_and_cannot_be_set(admin_client, org, other_org):
    theirs = criteria_active(org=other_org, kind=ItemKind.CONVERSATION)
    spend_cap_set(org=other_org, version=theirs, period="week", tokens=777_777, cost_micros=None, actor=None)
    assert "777777" not in admin_client.get(URL).content.decode()
    assert admin_client.post(URL, {"org": other_org.pk, "period": "day", "tokens": "1"}).status_code == 404
    answer = admin_client.post(URL, {"org": org.pk, "version": theirs.pk, "period": "day", "tokens": "1"})
    assert answer.status_code == 404
    assert SpendCap.objects.count() == 1


def test_people_without_the_criteria_admin_role_cannot_open_it(client_for, client, operator, stakeholder):
    assert client.get(URL).status_code == 302  # to the login page
    for person in (operator, stakeholder):
        assert client_for(person).get(URL).status_code == 403


def test_the_publish_plan_warns_when_its_re_grade_would_pass_a_cap(admin_client, org, criteria_admin):
    version = criteria_active(org=org, kind=ItemKind.CONVERSATION)
    spent(org, version, 300)
    spend_cap_set(org=org, version=None, period="week", tokens=300, cost_micros=None, actor=criteria_admin)
    new = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    page = admin_client.get(reverse("criteria_publish", args=[new.pk])).content.decode()
    assert 'id="spend-warnings"' in page and "per week spend cap of org is reached" in page
    assert "Estimated spend" not in page  # the plan states its one estimate itself (none here: no review's usage)


def test_the_dashboard_shows_spend_against_the_caps_to_whole_org_readers(client_for, org, stakeholder):
    version = criteria_active(org=org, kind=ItemKind.CONVERSATION)
    spent(org, version, 300)
    spend_cap_set(org=org, version=None, period="day", tokens=250, cost_micros=None, actor=None)
    client = client_for(stakeholder)
    panel = card_loaded(client, client.get("/dashboard/").content.decode(), "spend-panel")  # loaded apart
    panel = panel.split('id="spend-panel"')[1].split("</div>")[0]
    assert "300 of 250 tokens" in panel and "reached" in panel
    # Spend is the org's as a whole: a reader of one application is offered none, and asking gives nothing.
    limited = make_person("billing-reader", org, Role.STAKEHOLDER)
    Membership.objects.filter(user=limited).update(applications=["billing"], drafts=False)
    reader = client_for(limited)
    assert 'id="spend-panel"' not in reader.get("/dashboard/").content.decode()
    answer = reader.get(reverse("dashboard_spend"), HTTP_HX_REQUEST="true")
    assert answer.status_code == 200 and "tokens" not in answer.content.decode()


def test_the_spend_api_gives_the_page_s_figures_for_the_key_s_org_only(client, org, other_org):
    version = criteria_active(org=org, kind=ItemKind.CONVERSATION)
    spent(org, version, 300)
    spend_cap_set(org=org, version=version, period="week", tokens=1000, cost_micros=None, actor=None)
    key = api_key_create(org=org, name="pipeline").plaintext
    answer = client.get("/api/v1/spend", headers={"authorization": f"Bearer {key}"}).json()
    [cap] = answer["caps"]
    assert (cap["scope"], cap["period"], cap["tokens"], cap["spent"]["tokens"], cap["reached"]) == (
        "criteria_version", "week", 1000, 300, False
    )  # fmt: skip
    assert answer["spend"] == [
        {
            "criteria_version": {"kind": "conversation", "number": version.number},
            "judge": version.judge,
            "today": {"calls": 2, "tokens": 300, "cost_micros": 0},
            "this_week": {"calls": 2, "tokens": 300, "cost_micros": 0},
        }
    ]
    theirs = api_key_create(org=other_org, name="theirs").plaintext
    assert client.get("/api/v1/spend", headers={"authorization": f"Bearer {theirs}"}).json()["caps"] == []


def test_an_item_with_no_review_says_on_its_page_that_it_waits_on_the_cap(admin_client, org):
    version = criteria_active(org=org, kind=ItemKind.CONVERSATION)
    spent(org, version, 300)
    spend_cap_set(org=org, version=None, period="day", tokens=250, cost_micros=None, actor=None)
    conversation = upsert(org, support_conversation("cv-waits")).conversation
    page = admin_client.get(reverse("criteria_item", args=["conversation", conversation.pk])).content.decode()
    assert "spend_cap" in page and "300 of 250 tokens" in page


def test_the_criteria_page_links_the_spend_page(admin_client):
    html = admin_client.get(reverse("criteria")).content.decode()
    assert f'<a href="{reverse("criteria_spend")}">Judge spend and its caps</a>' in html


def test_the_page_shows_cost_in_money_with_the_currency_named_and_takes_a_cap_in_money(admin_client, org, settings):
    settings.SPEND_CURRENCY = "EUR"
    version = criteria_active(org=org, kind=ItemKind.CONVERSATION)
    JudgeSpend.objects.create(
        org=org, criteria_version=version, judge=version.judge, day=timezone.now().date(), calls=3,
        prompt_tokens=900, completion_tokens=100, cost_micros=1_234_500,
    )  # fmt: skip
    answer = admin_client.post(URL, {"org": org.pk, "version": "", "period": "day", "cost": "2.5"})
    assert answer.status_code == 302 and SpendCap.objects.get(org=org).cost_micros == 2_500_000
    page = admin_client.get(URL).content.decode()
    assert "1.23 EUR" in page and "2.50 EUR" in page and "cost (EUR)" in page
    assert "micros" not in page
    for bad in ("-1", "lots", "0.0000001"):
        refused = admin_client.post(URL, {"org": org.pk, "version": "", "period": "week", "cost": bad})
        assert refused.status_code == 400 and "cost:" in refused.content.decode()
    assert SpendCap.objects.count() == 1

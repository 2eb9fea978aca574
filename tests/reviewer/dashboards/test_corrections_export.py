"""The corrections' export on the dashboard: for the people who read items (operators and leads within their
reach, criteria admins), never a stakeholder or another org; the same rows as the API's."""

import json

import pytest
from django.urls import reverse

from reviewer.models import Membership, Role
from tests.builders.corrections import draft_correction, expected_reply
from tests.builders.people import make_person
from tests.builders.queue_items import conversation_item, draft_item

pytestmark = pytest.mark.django_db


def _export(client, org, **query):
    return client.get(reverse("dashboard_corrections_export"), {"org": org.slug, **query})


def _ids(response) -> set[int]:
    assert response.status_code == 200 and response.streaming
    assert "attachment" in response["Content-Disposition"]
    return {json.loads(line)["id"] for line in b"".join(response.streaming_content).decode().splitlines()}


@pytest.fixture
def corrections(org, operator):
    billing, shop = conversation_item(org, "cv-billing"), conversation_item(org, "cv-shop", application="shop")
    for review in (billing, shop):
        review.state = "decided"
        review.save(update_fields=["state"])
    return {
        "draft": draft_correction(draft_item(org), author=operator, corrected="A fixed body."),
        "billing": expected_reply(billing, author=operator, reply="The reply billing wanted."),
        "shop": expected_reply(shop, author=operator, reply="The reply the shop wanted."),
    }


def test_anonymous_is_sent_to_sign_in(client, org):
    response = _export(client, org)
    assert response.status_code == 302 and "login" in response["Location"]


def test_a_stakeholder_may_not_export_the_items_text(client_for, org, stakeholder, corrections):
    assert _export(client_for(stakeholder), org).status_code == 403


def test_another_orgs_operator_finds_no_such_org(client_for, org, other_org_operator, corrections):
    assert _export(client_for(other_org_operator), org).status_code == 404


def test_a_criteria_admin_exports_the_whole_org(client_for, org, criteria_admin, corrections):
    assert _ids(_export(client_for(criteria_admin), org)) == {c.pk for c in corrections.values()}


def test_an_operator_exports_only_what_their_reach_covers(client_for, org, corrections):
    shop_only = make_person("sol")
    Membership.objects.create(user=shop_only, org=org, role=Role.OPERATOR, applications=["shop"], drafts=False)
    client = client_for(shop_only)
    assert _ids(_export(client, org)) == {corrections["shop"].pk}
    chat = b"".join(_export(client, org, format="chat").streaming_content).decode().splitlines()
    assert [json.loads(line)["messages"][-1]["content"] for line in chat] == ["The reply the shop wanted."]
    assert _export(client, org, application="billing").status_code == 400  # not one of theirs


def test_a_bad_filter_is_a_400_naming_it(client_for, org, operator, corrections):
    response = _export(client_for(operator), org, kind="essay")
    assert response.status_code == 400 and b"kind" in response.content
    assert _export(client_for(operator), org, format="chat", kind="draft").status_code == 400

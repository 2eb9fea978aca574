"""The regression sets page: a criteria admin sees their org's sets with counts and the last run's figures, never
another org's; other roles are refused."""

import pytest
from django.urls import reverse

from grading.models import ItemKind
from grading.reviews.versions import criteria_active
from grading.sets.build import set_build
from grading.sets.runs import set_run_start
from tests.builders.queue_items import conversation_item

pytestmark = pytest.mark.django_db


def test_an_admin_sees_the_orgs_sets_and_last_runs_not_another_orgs(client_for, criteria_admin, org, other_org):
    conversation_item(org, "cv-1")
    conversation_item(other_org, "cv-9")
    mine = set_build(org=org, name="refunds", kind=ItemKind.CONVERSATION, source="decisions", external_ids=["cv-1"])
    set_run_start(regression_set=mine, version=criteria_active(org=org, kind=ItemKind.CONVERSATION), min_agreement=0.9)
    set_build(org=other_org, name="theirs", kind=ItemKind.CONVERSATION, source="decisions", external_ids=["cv-9"])
    page = client_for(criteria_admin).get(reverse("criteria_sets"))
    assert page.status_code == 200
    text = page.content.decode()
    assert "refunds" in text and "v1" in text and "theirs" not in text


def test_an_operator_is_refused(client_for, operator):
    assert client_for(operator).get(reverse("criteria_sets")).status_code == 403

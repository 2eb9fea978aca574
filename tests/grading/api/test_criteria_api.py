"""A pipeline reads what a criteria version asks: its checks by key, with their answers and rules."""

import pytest

from grading.api.keys import api_key_create
from grading.certify.services import certificate_compute, certify_target_set, version_judge_key
from grading.models import ItemKind
from grading.reviews.versions import criteria_active, criteria_new_version, criteria_publish, criteria_update
from tests.builders.certified import agreeing, graded_drafts
from tests.builders.check_documents import CITES_POLICY, INTENT, with_checks

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(client, org):
    key = api_key_create(org=org, name="pipeline").plaintext
    return lambda path: client.get(f"/api/v1{path}", HTTP_AUTHORIZATION=f"Bearer {key}")


def test_it_shows_the_active_version_s_checks_and_any_version_by_number(api, org, other_org):
    version = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    criteria_update(version=version, checks=with_checks(version, CITES_POLICY, INTENT, judge_after_rule_fail=False))
    criteria_publish(version=version)
    body = api("/criteria/conversation").json()
    assert (body["criteria_version"], body["active"], body["judge_after_rule_fail"]) == (2, True, False)
    keys = [check["key"] for check in body["checks"]]
    assert keys == ["grounded", "complete", "usable", "cites_policy", "intent"]
    policy = body["checks"][3]
    assert (policy["name"], policy["required"], policy["guidance"]) == (
        "Cites the policy", True, CITES_POLICY["guidance"]
    )  # fmt: skip
    assert policy["rules"] == [CITES_POLICY["rules"][0]]
    assert body["checks"][4]["categories"] == ["refund", "order_status", "other"]
    first = api("/criteria/conversation?number=1").json()
    assert [c["key"] for c in first["checks"]] == ["grounded", "complete", "usable"] and first["active"] is False
    drafts = api("/criteria/draft").json()
    assert [(c["key"], c["kind"]) for c in drafts["checks"]] == [
        ("aeo", "score"),
        ("writing", "score"),
        ("org_fit", "score"),
    ]


def test_an_unknown_kind_or_number_is_a_404_naming_it(api, org, other_org):
    criteria_new_version(org=other_org, kind=ItemKind.CONVERSATION)  # another org's v2 is not this org's
    assert api("/criteria/conversation?number=2").status_code == 404
    response = api("/criteria/essay")
    assert response.status_code == 404 and "draft or conversation" in response.json()["detail"]


def test_it_shows_the_version_s_certification_target_and_certificate(api, org):
    assert api("/criteria/draft").json()["certification"] == {"target": None, "certificate": None}
    version = certify_target_set(
        version=criteria_active(org=org, kind=ItemKind.DRAFT), actor=None, agreement=0.9, confidence=0.8
    )
    judge_key = version_judge_key(version)
    graded_drafts(org, agreeing(30), judge_key=judge_key)
    certificate = certificate_compute(version, judge_key=judge_key)

    shown = api("/criteria/draft").json()["certification"]
    assert shown["target"] == {"agreement": 0.9, "confidence": 0.8}
    assert shown["certificate"]["id"] == certificate.pk and shown["certificate"]["certified"] is True
    stored = certificate.checks["pass_fail"]
    assert shown["certificate"]["checks"] == {"pass_fail": {k: v for k, v in stored.items() if k != "curve"}}

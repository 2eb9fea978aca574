"""A criteria admin's work over the API with the org key: clone a version, edit it, preview it, trial it and publish
it as planned, with the pages' rules and audit trail (grading/api/criteria.py)."""

import json

import pytest

from grading.api.keys import api_key_create
from grading.criteria.trials import trial_item_grade
from grading.drafts.gate import draft_grade
from grading.models import AuditEvent, CriteriaVersion, Draft, ItemKind, Review
from grading.reviews.versions import criteria_active, criteria_new_version, criteria_publish
from tests.builders.criteria import GIZMO_BODY, with_banned_word
from tests.builders.drafts import draft_reply, llm_draft_judge, save_draft, setup_org_memory
from tests.builders.tokens import token_of

pytestmark = pytest.mark.django_db


class Api:
    """HTTP with the org's key, as a pipeline or a script sends it."""

    def __init__(self, client, key: str) -> None:
        self.client, self.key = client, key

    def __call__(self, method: str, path: str, body: dict | None = None):
        data = "" if body is None else json.dumps(body)
        return self.client.generic(
            method, f"/api/v1{path}", data, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {self.key}"
        )


@pytest.fixture
def key(org):
    return api_key_create(org=org, name="criteria-script")


@pytest.fixture
def api(client, key) -> Api:
    return Api(client, key.plaintext)


@pytest.fixture
def graded(org, fake_llm) -> dict[str, Draft]:
    """Two drafts graded under v1 (both pass): one clean, one that says "gizmo"."""
    setup_org_memory(org)
    drafts = {"clean": save_draft(org, external_id="clean"), "gizmo": save_draft(org, GIZMO_BODY, external_id="gizmo")}
    fake_llm.set_default(draft_reply(8))
    for draft in drafts.values():
        draft_grade(draft_id=draft.pk, judge=llm_draft_judge(fake_llm))
    fake_llm.reset()
    return drafts


def _events(action: str, key) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action=action, api_key=key.api_key, actor=None).order_by("pk"))


def test_it_clones_edits_trials_and_publishes_a_version_each_write_audited_under_the_key(
    api, key, org, graded, fake_llm
):
    assert [(v["number"], v["state"]) for v in api("GET", "/criteria/draft/versions").json()] == [(1, "published")]
    v1 = criteria_active(org=org, kind=ItemKind.DRAFT)

    created = api("POST", "/criteria/draft/versions", {})
    assert created.status_code == 201, created.content
    v2 = created.json()
    assert (v2["number"], v2["state"], v2["based_on"], v2["revision"]) == (2, "draft", {"id": v1.pk, "number": 1}, 1)
    assert v2["threshold"] == 7.0 and v2["rules"] == v1.rules
    [event] = _events("criteria.create", key)
    assert event.object_id == str(v2["id"]) and event.detail["based_on"] == 1

    # A refused edit names every refused field at once, and writes nothing.
    rules = with_banned_word(CriteriaVersion.objects.get(pk=v2["id"]), "gizmo")
    bad_rules = {**rules, "threshold": 11}
    refused = api("PATCH", f"/criteria/versions/{v2['id']}", {"rubric": "  ", "rules": bad_rules, "checks": {}})
    assert refused.status_code == 400
    fields = {error["field"] for error in refused.json()["errors"]}
    assert {"rubric", "rules.threshold", "checks"} <= fields
    again = api("GET", f"/criteria/versions/{v2['id']}").json()
    assert (again["revision"], again["rules"], again["rubric"]) == (1, v1.rules, v1.rubric)
    assert _events("criteria.update", key) == []

    edited = api("PATCH", f"/criteria/versions/{v2['id']}", {"revision": 1, "rules": {**rules, "threshold": 7.5}})
    assert edited.status_code == 200, edited.content
    assert (edited.json()["revision"], edited.json()["threshold"]) == (2, 7.5)
    assert "gizmo" in edited.json()["rules"]["banned_words"]["terms"]
    [update] = _events("criteria.update", key)
    assert update.detail["changed"] == ["rules"]
    stale = api("PATCH", f"/criteria/versions/{v2['id']}", {"revision": 1, "rubric": "Mine."})
    assert stale.status_code == 409 and "your changes were not saved" in stale.json()["detail"]

    preview = api("GET", f"/criteria/versions/{v2['id']}/preview?n=10").json()
    [row] = preview["rows"]
    assert row["item"]["external_id"] == "gizmo" and row["route_after"] == "fail"
    assert [finding["subject"] for finding in row["new_findings"]] == ["gizmo"]

    count = api("GET", f"/criteria/versions/{v2['id']}/trial-count?k=2").json()
    assert ({item["external_id"] for item in count["items"]}, count["judge_calls"]) == ({"clean", "gizmo"}, 2)
    changed = api("POST", f"/criteria/versions/{v2['id']}/trials", {"k": 2, "counted_calls": 3})
    assert changed.status_code == 409 and "Nothing was started" in changed.json()["detail"]
    started = api("POST", f"/criteria/versions/{v2['id']}/trials", {"k": 2, "counted_calls": 2})
    assert started.status_code == 202, started.content
    trial = started.json()
    running = api("POST", f"/criteria/versions/{v2['id']}/trials", {"k": 2, "counted_calls": 2})
    assert running.status_code == 409 and "still running" in running.json()["detail"]
    fake_llm.set_default(draft_reply(8))
    for index in range(trial["items"]):
        trial_item_grade(trial_id=trial["id"], index=index, draft_judge=llm_draft_judge(fake_llm))
    figures = api("GET", f"/criteria/trials/{trial['id']}").json()
    assert (figures["finished"], figures["graded"], figures["judge_calls"]) == (True, 2, 2)
    results = {row["item"]: (row["current"]["route"], row["trial"]["route"]) for row in figures["results"]}
    assert results == {"clean": ("pass", "pass"), "gizmo": ("pass", "fail")}
    assert [t["id"] for t in api("GET", f"/criteria/versions/{v2['id']}/trials").json()] == [trial["id"]]
    [trial_event] = _events("criteria.trial", key)
    assert trial_event.detail["trial"] == trial["id"]

    plan = api("GET", f"/criteria/versions/{v2['id']}/publish-plan").json()
    assert (plan["replaces"], plan["stale"], plan["judge_configured"]) == ({"id": v1.pk, "number": 1}, 2, True)
    published = api("POST", f"/criteria/versions/{v2['id']}/publish", {"replaces": plan["replaces"]["number"]})
    assert published.status_code == 200, published.content
    body = published.json()
    assert (body["published_now"], body["version"]["state"], body["replaced"]["number"]) == (True, "published", 1)
    [publish] = _events("criteria.publish", key)
    assert publish.detail["reviews_made_stale"] == 2
    versions = api("GET", "/criteria/draft/versions").json()
    assert [(v["number"], v["state"]) for v in versions] == [(2, "published"), (1, "retired")]

    # Published: it never changes again.
    frozen = api("PATCH", f"/criteria/versions/{v2['id']}", {"rubric": "Something else."})
    assert frozen.status_code == 409 and "published" in frozen.json()["detail"]
    assert CriteriaVersion.objects.get(pk=v2["id"]).revision == 2
    assert api("POST", f"/criteria/versions/{v2['id']}/trials", {"counted_calls": 2}).status_code == 409
    assert api("GET", f"/criteria/versions/{v2['id']}/publish-plan").status_code == 409
    twice = api("POST", f"/criteria/versions/{v2['id']}/publish", {"replaces": 1})
    assert (twice.status_code, twice.json()["published_now"]) == (200, False)
    assert len(_events("criteria.publish", key)) == 1


def test_a_publication_planned_against_another_active_version_is_refused_and_changes_nothing(api, org):
    planned = criteria_new_version(org=org, kind=ItemKind.DRAFT)
    plan = api("GET", f"/criteria/versions/{planned.pk}/publish-plan").json()
    meanwhile = criteria_publish(version=criteria_new_version(org=org, kind=ItemKind.DRAFT))

    refused = api("POST", f"/criteria/versions/{planned.pk}/publish", {"replaces": plan["replaces"]["number"]})

    assert refused.status_code == 409 and "Read its plan again" in refused.json()["detail"]
    assert criteria_active(org=org, kind=ItemKind.DRAFT) == meanwhile
    assert CriteriaVersion.objects.get(pk=planned.pk).published_at is None
    unknown = api("POST", f"/criteria/versions/{planned.pk}/publish", {"replaces": 10**9})
    assert unknown.status_code == 400 and unknown.json()["errors"][0]["field"] == "replaces"


def test_a_conversation_version_has_no_rules_document_and_its_edit_says_so_beside_its_other_errors(api, org):
    version = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)

    refused = api("PATCH", f"/criteria/versions/{version.pk}", {"rules": {}, "judge": "nobody", "routing": [{}]})

    assert refused.status_code == 400
    assert {"rules", "judge"} <= {error["field"] for error in refused.json()["errors"]}
    body = api("GET", f"/criteria/versions/{version.pk}").json()
    assert (body["rules"], body["threshold"], body["revision"]) == (None, None, 1)
    assert [check["key"] for check in body["check_set"]["checks"]] == ["grounded", "complete", "usable"]
    assert api("GET", f"/criteria/versions/{version.pk}/preview").json()["rows"] == []


def test_another_org_s_versions_do_not_exist_for_the_key(api, org, other_org):
    theirs = criteria_new_version(org=other_org, kind=ItemKind.DRAFT)
    criteria_active(org=org, kind=ItemKind.DRAFT)

    assert [v["number"] for v in api("GET", "/criteria/draft/versions").json()] == [1]
    for method, path, body in [
        ("GET", "", None),
        ("PATCH", "", {"rubric": "Theirs no more."}),
        ("GET", "/preview", None),
        ("GET", "/trial-count", None),
        ("GET", "/trials", None),
        ("POST", "/trials", {"counted_calls": 0}),
        ("GET", "/publish-plan", None),
        ("POST", "/publish", {"replaces": 1}),
    ]:
        response = api(method, f"/criteria/versions/{theirs.pk}{path}", body)
        assert response.status_code == 404, (method, path, response.content)
    assert api("POST", "/criteria/draft/versions", {"source": theirs.pk}).status_code == 404
    theirs.refresh_from_db()
    assert (theirs.revision, theirs.published_at) == (1, None)


def test_the_published_version_grades_new_items(api, org, graded, fake_llm):
    v2 = api("POST", "/criteria/draft/versions", {}).json()
    rules = with_banned_word(CriteriaVersion.objects.get(pk=v2["id"]), "gizmo")
    api("PATCH", f"/criteria/versions/{v2['id']}", {"rules": rules})
    plan = api("GET", f"/criteria/versions/{v2['id']}/publish-plan").json()
    api("POST", f"/criteria/versions/{v2['id']}/publish", {"replaces": plan["replaces"]["number"]})

    new = save_draft(org, GIZMO_BODY, external_id="gizmo-2")
    fake_llm.set_default(draft_reply(8))
    draft_grade(draft_id=new.pk, judge=llm_draft_judge(fake_llm))

    review = Review.objects.counting().get(draft=new)
    assert review.criteria_version_id == v2["id"] and review.route == "fail"
    assert "gizmo" in {finding["subject"] for finding in review.findings}
    shown = api("GET", f"/drafts/{new.pk}").json()
    assert (shown["route"], shown["identity"]["criteria_version"]) == ("fail", 2)


def test_a_version_whose_judge_is_no_longer_configured_is_neither_trialled_nor_published(api, org):
    version = criteria_new_version(org=org, kind=ItemKind.DRAFT)
    CriteriaVersion.objects.filter(pk=version.pk).update(judge="removed")  # taken out of JUDGES_FILE since

    count = api("GET", f"/criteria/versions/{version.pk}/trial-count")
    plan = api("GET", f"/criteria/versions/{version.pk}/publish-plan").json()
    published = api("POST", f"/criteria/versions/{version.pk}/publish", {"replaces": 1})

    assert count.status_code == 409 and "removed" in count.json()["detail"]
    assert plan["judge_configured"] is False
    assert published.status_code == 409 and "removed" in published.json()["detail"]
    assert CriteriaVersion.objects.get(pk=version.pk).published_at is None


def test_a_criteria_admins_token_clones_and_edits_as_the_person_and_an_operators_token_is_refused(
    client, org, criteria_admin, operator
):
    admin = Api(client, token_of(criteria_admin, org))
    created = admin("POST", "/criteria/conversation/versions", {})
    assert created.status_code == 201, created.content
    version = created.json()["id"]
    assert admin("PATCH", f"/criteria/versions/{version}", {"rubric": "grounded: say where."}).status_code == 200

    events = AuditEvent.objects.filter(action__in=("criteria.create", "criteria.update"), object_id=str(version))
    assert {(event.action, event.actor_id, event.api_key_id) for event in events} == {
        ("criteria.create", criteria_admin.pk, None),
        ("criteria.update", criteria_admin.pk, None),
    }
    assert CriteriaVersion.objects.get(pk=version).author == criteria_admin
    refused = Api(client, token_of(operator, org))("PATCH", f"/criteria/versions/{version}", {"rubric": "x"})
    assert refused.status_code == 403
    assert CriteriaVersion.objects.get(pk=version).rubric == "grounded: say where."

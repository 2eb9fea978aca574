"""The queue over the API under a personal token (issue 42): the page's rules, services and audit trail, the token's
person in the token's org and their reach there; an org's key refused with a 403 that says a person is needed."""

import pytest

from grading.api.keys import api_key_create
from grading.models import AuditEvent, Decision, ItemKind
from reviewer.models import Claim, Membership, Role
from tests.builders.people import make_person
from tests.builders.queue_items import conversation_item, draft_item, slots_ask
from tests.builders.tokens import api, token_of

pytestmark = pytest.mark.django_db

ANSWERS = {"grounded": "pass", "complete": "fail", "usable": "pass"}


def claim(client, token, review):
    return api(client, token, "POST", f"/queue/items/{review.pk}/claim")


def decide(client, token, review, **body):
    return api(client, token, "POST", f"/queue/items/{review.pk}/decision", body)


def test_it_lets_an_operator_list_claim_and_decide_a_draft_recorded_with_the_person(client, org, operator):
    review = draft_item(org)
    token = token_of(operator, org)
    listed = api(client, token, "GET", "/queue").json()
    assert [item["review"] for item in listed["items"]] == [review.pk] and listed["next"] is None
    claimed = claim(client, token, review).json()
    assert claimed["fingerprint"] == review.fingerprint and claimed["outcomes"] == ["approve", "reject", "send_back"]
    answer = decide(client, token, review, fingerprint=review.fingerprint, outcome="approve", note="Reads well.")
    assert answer.status_code == 200, answer.content
    assert answer.json() == {
        "review": review.pk, "answered": False, "decided": True, "outcome": "approve", "learning_error": None
    }  # fmt: skip
    assert Decision.objects.get(review=review).decided_by == operator
    event = AuditEvent.objects.get(action="decision.create")
    assert (event.actor, event.api_key) == (operator, None)


def test_it_decides_a_conversation_with_the_pages_answers_and_names_a_refused_field(client, org, operator):
    review = conversation_item(org)
    token = token_of(operator, org)
    checks = {check["key"] for check in claim(client, token, review).json()["checks"]}
    assert checks == set(ANSWERS)
    refused = decide(client, token, review, fingerprint=review.fingerprint, checks={"grounded": "maybe"}, note="n")
    assert refused.status_code == 400
    fields = {error["field"] for error in refused.json()["errors"]}
    assert {"checks.grounded", "checks.complete", "checks.usable"} <= fields
    unknown = decide(
        client, token, review, fingerprint=review.fingerprint, checks={**ANSWERS, "tone": "pass"}, note="n"
    )
    assert [error["field"] for error in unknown.json()["errors"]] == ["checks.tone"]
    assert not Decision.objects.exists() and not AuditEvent.objects.filter(action="decision.create").exists()
    done = decide(client, token, review, fingerprint=review.fingerprint, checks=ANSWERS, note="The refund was wrong.")
    assert done.json()["decided"] is True
    assert Decision.objects.get(review=review).checks == ANSWERS


def test_it_refuses_a_decision_on_an_item_the_person_does_not_hold_with_a_409(client, org, operator):
    review = draft_item(org)
    answer = decide(client, token_of(operator, org), review, fingerprint=review.fingerprint, outcome="approve")
    assert answer.status_code == 409 and answer.json()["code"] == "not_claimed"
    assert not Decision.objects.exists()


def test_it_refuses_an_org_key_on_the_queues_work_with_a_403_that_asks_for_a_personal_token(client, org):
    review = draft_item(org)
    key = api_key_create(org=org, name="pipeline").plaintext
    for method, path, body in [
        ("GET", "/queue", None),
        ("POST", "/queue/claim-next", None),
        ("POST", f"/queue/items/{review.pk}/claim", None),
        ("POST", f"/queue/items/{review.pk}/decision", {"fingerprint": review.fingerprint, "outcome": "approve"}),
    ]:
        answer = api(client, key, method, path, body)
        assert answer.status_code == 403, (path, answer.content)
        assert "personal token" in answer.json()["detail"]
    assert not Claim.objects.exists()


def test_it_refuses_a_stakeholders_token_the_queue_and_lets_it_read_the_dashboard(client, org, stakeholder):
    review = draft_item(org)
    token = token_of(stakeholder, org)
    for method, path in [("GET", "/queue"), ("POST", f"/queue/items/{review.pk}/claim")]:
        answer = api(client, token, method, path)
        assert answer.status_code == 403 and "stakeholder" in answer.json()["detail"]
    assert api(client, token, "GET", "/dashboard").status_code == 200
    assert api(client, token, "GET", "/whoami").json() == {"org": org.slug, "key_name": "laptop", "person": "sam"}


def test_it_takes_a_role_away_from_the_token_at_once_and_refuses_it_once_the_membership_is_gone(client, org, operator):
    review = draft_item(org)
    token = token_of(operator, org)
    assert api(client, token, "GET", "/queue").status_code == 200
    Membership.objects.filter(user=operator).update(role=Role.STAKEHOLDER)
    assert api(client, token, "GET", "/queue").status_code == 403
    Membership.objects.filter(user=operator).delete()
    gone = api(client, token, "POST", f"/queue/items/{review.pk}/claim")
    assert gone.status_code == 403 and "no longer a member" in gone.json()["detail"]


def test_it_keeps_a_token_to_its_persons_reach_out_of_reach_is_a_404(client, org):
    limited = make_person("lee", org)
    Membership.objects.create(user=limited, org=org, role=Role.OPERATOR, applications=["billing"], drafts=False)
    mine = conversation_item(org, "cv-billing", application="billing")
    theirs = conversation_item(org, "cv-shipping", application="shipping")
    draft = draft_item(org)
    token = token_of(limited, org)
    assert [item["review"] for item in api(client, token, "GET", "/queue").json()["items"]] == [mine.pk]
    for review in (theirs, draft):
        assert claim(client, token, review).status_code == 404
        assert decide(client, token, review, fingerprint=review.fingerprint, outcome="approve").status_code == 404
    assert claim(client, token, mine).status_code == 200


def test_it_keeps_a_token_to_its_org_another_orgs_items_are_invisible(client, org, other_org):
    both = make_person("bea", org, Role.OPERATOR)
    Membership.objects.create(user=both, org=other_org, role=Role.OPERATOR)
    ours, theirs = draft_item(org, "ours"), draft_item(other_org, "theirs")
    token = token_of(both, org)
    assert [item["review"] for item in api(client, token, "GET", "/queue").json()["items"]] == [ours.pk]
    assert claim(client, token, theirs).status_code == 404
    assert api(client, token, "POST", "/queue/claim-next").json()["claimed"]["review"] == ours.pk
    assert api(client, token, "POST", "/queue/claim-next").json() == {"claimed": None}


def test_it_hides_what_blind_review_hides_on_the_page(client, org, operator):
    audit = conversation_item(org, "cv-audit")
    audit.audit = True
    audit.save(update_fields=["audit"])
    row = api(client, token_of(operator, org), "GET", "/queue").json()["items"][0]
    assert row["blind"] is True and row["reason"] == "" and row["checks"] == [] and "unknown" not in str(row)


def test_it_answers_as_one_of_several_then_the_second_answer_decides(client, org, operator):
    slots_ask(org, ItemKind.DRAFT, 2)
    review = draft_item(org)
    other = make_person("oli", org, Role.OPERATOR)
    for person, expected in [(operator, {"answered": True, "decided": False}), (other, {"decided": True})]:
        token = token_of(person, org)
        assert claim(client, token, review).status_code == 200
        body = decide(client, token, review, fingerprint=review.fingerprint, outcome="approve").json()
        assert expected.items() <= body.items(), body
    assert Decision.objects.get(review=review).basis == Decision.Basis.AGREED


def test_it_releases_and_declines_through_the_pages_services(client, org, operator):
    review = draft_item(org)
    token = token_of(operator, org)
    claim(client, token, review)
    assert api(client, token, "POST", f"/queue/items/{review.pk}/release").status_code == 200
    assert api(client, token, "POST", f"/queue/items/{review.pk}/release").json()["code"] == "released"
    claim(client, token, review)
    empty = api(client, token, "POST", f"/queue/items/{review.pk}/decline", {"reason": " "})
    assert empty.status_code == 400 and empty.json()["errors"][0]["field"] == "reason"
    assert api(client, token, "POST", f"/queue/items/{review.pk}/decline", {"reason": "not mine"}).status_code == 200
    assert list(Claim.objects.values_list("end", flat=True).order_by("pk")) == ["released", "declined"]
    assert api(client, token, "POST", "/queue/claim-next").json() == {"claimed": None}


def test_it_pages_the_queue_by_cursor(client, org, operator):
    reviews = [draft_item(org, f"d-{n}", minutes_ago=60 - n) for n in range(3)]
    token = token_of(operator, org)
    first = api(client, token, "GET", "/queue", limit=2).json()
    second = api(client, token, "GET", "/queue", limit=2, after=first["next"]).json()
    assert [i["review"] for i in first["items"] + second["items"]] == [r.pk for r in reviews]
    assert second["next"] is None
    assert api(client, token, "GET", "/queue", limit=0).json()["errors"][0]["field"] == "query.limit"
    assert api(client, token, "GET", "/queue", kind="memo").json()["errors"][0]["field"] == "query.kind"

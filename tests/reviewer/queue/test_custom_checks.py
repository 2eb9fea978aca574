"""People answer the checks the item's criteria version asks (issue 39): a verdict, a category and a score, each shown
with its question and guidance beside the answer; a decision naming a check or an answer the version does not have is
refused and writes nothing."""

import re

import pytest
from django.urls import reverse
from pydantic import ValidationError

from grading.checks.definitions import CheckDefinition, CheckSet, PhrasesRule
from grading.models import Answer, AuditEvent, CriteriaExample, CriteriaVersion, Decision, ItemKind, Review
from grading.reviews.services import PersonVerdict
from grading.reviews.versions import criteria_new_version
from reviewer.models import Role
from reviewer.queue.services import Refused, claim_take, decision_create
from tests.builders.custom_checks import (
    MACHINE_SAID,
    POLICY_GUIDANCE,
    SUPPORT_CHECKS,
    custom_checks_item,
    support_checks_ask,
)
from tests.builders.people import make_person
from tests.builders.queue_items import conversation_item, item_answer, slots_ask

ANSWERS = {"cites_policy": "fail", "intent": "shipping", "helpful": "4"}


def decide(client, review: Review, answers: dict, note: str = "No policy named before the refund."):
    return client.post(
        reverse("review_decide", args=[review.pk]), {**answers, "fingerprint": review.fingerprint, "note": note}
    )


def assert_nothing_written() -> None:
    assert not Decision.objects.exists() and not Answer.objects.exists()
    assert not AuditEvent.objects.filter(action__in=("decision.create", "answer.create")).exists()


def test_it_shows_each_checks_question_and_guidance_beside_the_answer(client_for, operator, org):
    review = custom_checks_item(org)
    claim_take(user=operator, review_id=review.pk)
    html = client_for(operator).get(reverse("review_detail", args=[review.pk])).content.decode()
    assert "A required check came back unknown (Cites the policy)" in html  # why a person is needed
    form = html.split('id="decide-form"')[1].split("</form>")[0]
    assert "Cites the policy" in form and "Does the assistant cite the refund policy when it promises a refund?" in form
    assert "What did the user come for?" in form and "Asks for money back." in form
    assert "How helpful was the assistant, 1 to 5?" in form and "Solved it in one reply." in form
    # The admin's words are text: escaped, never markup.
    assert POLICY_GUIDANCE not in html and "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in form and "&lt;b&gt;refund policy&lt;/b&gt;" in form
    # A category offers its categories, a score 1 to the scale, each with its key; none starts from the machine's
    # answer (refund, 4): the item came to a person because the machine was unsure, and its answer would anchor.
    intent = form.split('id="check-intent"')[1].split("</fieldset>")[0]
    assert re.findall(r'name="intent" value="([^"]+)"', intent) == ["refund", "shipping", "other", "unknown"]
    assert re.findall(r'<span class="kbd">(\w)</span>', intent) == ["1", "2", "3", "u"]
    helpful = form.split('id="check-helpful"')[1].split("</fieldset>")[0]
    assert re.findall(r'name="helpful" value="([^"]+)"', helpful) == ["1", "2", "3", "4", "5", "unknown"]
    assert "4 of 5" in helpful
    assert " checked" not in intent + helpful
    assert 'name="grounded"' not in form  # the version does not ask it


def test_an_operator_answers_the_versions_own_checks_in_the_queue(client_for, operator, org):
    review = custom_checks_item(org)
    claim_take(user=operator, review_id=review.pk)
    response = decide(client_for(operator), review, ANSWERS)
    assert response.status_code == 302
    decision = Decision.objects.get()
    assert decision.checks == ANSWERS
    assert decision.outcome == "fail"  # a required verdict failed
    event = AuditEvent.objects.get(action="decision.create")
    assert event.detail["checks"] == ANSWERS


def test_a_check_that_is_not_required_never_fails_the_decision(org, operator):
    review = custom_checks_item(org)
    answers = {"cites_policy": "pass", "intent": "other", "helpful": "3"}  # intent is counted and shown, not required
    assert item_answer(operator, review, checks=answers, note="ok").decision.outcome == "pass"
    low = custom_checks_item(org, "cv-2")
    result = item_answer(operator, low, checks={"cites_policy": "pass", "intent": "refund", "helpful": "2"}, note="no")
    assert result.decision.outcome == "fail"  # below the score check's lowest pass
    unsure = custom_checks_item(org, "cv-3")
    answers = {"cites_policy": "pass", "intent": "refund", "helpful": "unknown"}
    assert item_answer(operator, unsure, checks=answers, note="?").decision.outcome == "unknown"


@pytest.mark.parametrize(
    ("answers", "named"),
    [
        ({**ANSWERS, "grounded": "pass"}, "'grounded' is not a check of this criteria version"),
        ({"cites_policy": "fail", "intent": "shipping"}, "missing helpful"),
        ({**ANSWERS, "intent": "refunds"}, "'refunds' is not an answer of 'intent'"),
        ({**ANSWERS, "helpful": "6"}, "'6' is not an answer of 'helpful': one of 1, 2, 3, 4, 5, unknown"),
        ({**ANSWERS, "cites_policy": "yes"}, "'yes' is not an answer of 'cites_policy'"),
    ],
)
def test_a_decision_with_a_check_or_an_answer_the_version_does_not_have_is_refused(org, operator, answers, named):
    review = custom_checks_item(org)
    claim_take(user=operator, review_id=review.pk)
    with pytest.raises(Refused) as refused:
        decision_create(
            user=operator,
            review_id=review.pk,
            fingerprint=review.fingerprint,
            verdict=PersonVerdict(checks=answers, note="n"),
        )
    assert named in refused.value.message
    assert_nothing_written()
    assert Review.objects.get(pk=review.pk).state == "waiting"


def test_the_form_refuses_an_answer_its_check_does_not_offer_and_writes_nothing(client_for, operator, org):
    review = custom_checks_item(org)
    claim_take(user=operator, review_id=review.pk)
    response = decide(client_for(operator), review, {**ANSWERS, "helpful": "9"})
    assert response.status_code == 422
    helpful = response.content.decode().split('id="check-helpful"')[1].split("</fieldset>")[0]
    assert "Select a valid choice" in helpful
    assert_nothing_written()


def test_people_answer_the_versions_own_checks_in_double_review_and_agree(org):
    slots_ask(org, ItemKind.CONVERSATION, 2)
    review = custom_checks_item(org)
    ann, bob = (make_person(name, org, Role.OPERATOR) for name in ("ann", "bob"))
    first = item_answer(ann, review, checks=ANSWERS, note="no policy")
    assert first.decision is None and first.answer.checks == ANSWERS
    # The same answers in another order agree.
    second = item_answer(bob, review, checks=dict(reversed(ANSWERS.items())), note="same")
    assert second.decision is not None and second.decision.basis == "agreed"
    assert second.decision.checks == ANSWERS and second.decision.outcome == "fail"


def test_answers_that_differ_on_a_category_or_a_score_are_adjudicated_with_the_versions_checks(client_for, org):
    slots_ask(org, ItemKind.CONVERSATION, 2)
    review = custom_checks_item(org)
    ann, bob, cy = (make_person(name, org, Role.OPERATOR) for name in ("ann", "bob", "cy"))
    item_answer(ann, review, checks=ANSWERS, note="shipping")
    item_answer(bob, review, checks={**ANSWERS, "intent": "refund", "helpful": "2"}, note="refund")
    claim_take(user=cy, review_id=review.pk)
    html = client_for(cy).get(reverse("review_detail", args=[review.pk])).content.decode()
    answers = html.split('id="answers"')[1].split("</table>")[0]
    assert 'Intent <b class="fail">differ</b>' in answers and 'Helpful <b class="fail">differ</b>' in answers
    assert "Adjudicate" in html and "What did the user come for?" in html
    settled = {**ANSWERS, "cites_policy": "pass", "helpful": "3"}
    response = decide(client_for(cy), review, settled, note="The policy is quoted in m4; the order is shipping.")
    assert response.status_code == 302
    decision = Decision.objects.get()
    assert (decision.basis, decision.checks, decision.outcome) == ("adjudicated", settled, "pass")
    decided = client_for(cy).get(reverse("review_detail", args=[review.pk])).content.decode()
    assert 'Cites the policy <span class="pass">pass</span>, Intent <span class="shipping">shipping</span>' in decided


def test_an_answer_in_double_review_with_a_check_the_version_does_not_ask_is_refused(org):
    slots_ask(org, ItemKind.CONVERSATION, 2)
    review = custom_checks_item(org)
    ann = make_person("ann", org, Role.OPERATOR)
    with pytest.raises(Refused) as refused:
        item_answer(ann, review, checks={**ANSWERS, "usable": "pass"}, note="n")
    assert "'usable' is not a check of this criteria version" in refused.value.message
    assert_nothing_written()


@pytest.mark.parametrize("key", ["note", "fingerprint", "keep_as_learning", "csrfmiddlewaretoken"])
def test_a_check_cannot_take_the_name_of_a_field_the_decision_form_posts(key):
    # The form posts each answer under its check's key: a check keyed "note" would take the note's place.
    with pytest.raises(ValidationError, match="reserved"):
        CheckDefinition(key=key, name="A check", question="Is it?")


def test_an_audit_items_form_starts_from_no_answer_of_the_machines_and_still_shows_the_questions(client_for, org):
    review = custom_checks_item(org)
    Review.objects.filter(pk=review.pk).update(route="pass", reason="", audit=True)
    operator = make_person("ann", org, Role.OPERATOR)
    claim_take(user=operator, review_id=review.pk)
    html = client_for(operator).get(reverse("review_detail", args=[review.pk])).content.decode()
    assert 'id="blind"' in html and "The user asks for a refund." not in html
    form = html.split('id="decide-form"')[1].split("</form>")[0]
    assert "What did the user come for?" in form and "Solved it in one reply." in form
    assert re.findall(r'<input type="radio"[^>]* checked', form) == []


def test_a_rules_finding_is_listed_before_the_judges_evidence_with_the_text_it_matched(client_for, operator, org):
    rule = PhrasesRule(phrases=["full refund"], note="Promises a refund")
    cites = SUPPORT_CHECKS["cites_policy"].model_copy(update={"rules": [rule]})
    support_checks_ask(org, CheckSet(checks=[cites, *SUPPORT_CHECKS.checks[1:]]))
    found = {"rule": 0, "message_id": "m4", "text": "a <i>full refund</i>"}
    said = {**MACHINE_SAID, "cites_policy": {"verdict": "fail", "message_ids": ["m4"], "rationale": "JUDGE-SAID",
                                             "source": "rule", "findings": [found]}}  # fmt: skip
    review = conversation_item(org, checks=said)
    html = client_for(operator).get(reverse("review_detail", args=[review.pk])).content.decode()
    evidence = html.split("Cites the policy · ")[1].split("</details>")[0]
    assert "<b>Rule:</b> Promises a refund" in evidence and "by a rule" in html
    assert '“<bdi class="untrusted">a &lt;i&gt;full refund&lt;/i&gt;</bdi>”' in evidence
    assert evidence.index("Promises a refund") < evidence.index("JUDGE-SAID")  # first, as a draft's hard findings
    Review.objects.filter(pk=review.pk).update(route="pass", reason="", audit=True)
    blind = client_for(operator).get(reverse("review_detail", args=[review.pk])).content.decode()
    assert "Promises a refund" not in blind and "full refund" not in blind  # what the machine said, hidden


def test_an_admin_makes_a_decided_category_answer_a_worked_example_from_the_items_page(
    org, operator, criteria_admin, client_for
):
    review = custom_checks_item(org)
    item_answer(operator, review, checks=ANSWERS, note="A delivery question.")
    version = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    CriteriaVersion.objects.filter(pk=version.pk).update(checks=SUPPORT_CHECKS.model_dump(mode="json"))
    client = client_for(criteria_admin)
    page = client.get(reverse("criteria_item", args=["conversation", review.conversation_id])).content.decode()
    assert "intent (people: shipping)" in page and "helpful (people: 4)" in page
    form = {"version": version.pk, "kind": "conversation", "item": review.conversation_id, "check": "intent"}
    assert client.post(reverse("criteria_example_add"), form).status_code == 302
    example = CriteriaExample.objects.get()
    assert (example.check_name, example.human_verdict, example.machine_verdict) == ("intent", "shipping", "refund")

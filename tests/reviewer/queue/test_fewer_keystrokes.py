"""Fewer keystrokes per decision (issue 41): the next item opens after a decision (a setting of each person's, on
unless they turn it off), an adjudicator's form starts from what the answers agree on, an unsure item's form from no
answer of the machine's, and a refused decision keeps what the person typed."""

import pytest
from django.urls import reverse
from django.utils import timezone

from grading.models import Decision, ItemKind
from reviewer.models import Claim, Preferences, Role
from reviewer.queue.item_reads import item_page
from reviewer.queue.services import claim_take
from tests.builders.people import make_person
from tests.builders.queue_items import conversation_item, draft_item, item_answer, resubmit, slots_ask

pytestmark = pytest.mark.django_db


def approve(client, review):
    return client.post(
        reverse("review_decide", args=[review.pk]), {"outcome": "approve", "fingerprint": review.fingerprint}
    )


def test_after_a_decision_the_next_free_item_opens_claimed(client_for, operator, org):
    first, second = draft_item(org, "first", minutes_ago=30), draft_item(org, "second", minutes_ago=20)
    claim_take(user=operator, review_id=first.pk)
    client = client_for(operator)
    response = approve(client, first)
    assert response.status_code == 302 and response["Location"] == reverse("review_detail", args=[second.pk])
    assert Claim.objects.get(review=second, ended_at=None).holder == operator
    assert "Decided: approve on first" in client.get(response["Location"]).content.decode()

    htmx = client.post(
        reverse("review_decide", args=[second.pk]),
        {"outcome": "approve", "fingerprint": second.fingerprint},
        HTTP_HX_REQUEST="true",
        HTTP_HX_TARGET="actions",
    )
    assert htmx["HX-Redirect"] == reverse("queue")  # nothing left: back to the queue, which says so
    assert "Nothing left to claim" in client.get(reverse("queue")).content.decode()


def test_a_person_who_turns_it_off_goes_back_to_the_queue_and_others_keep_it(client_for, operator, org):
    first, _ = draft_item(org, "first", minutes_ago=30), draft_item(org, "second", minutes_ago=20)
    client = client_for(operator)
    assert 'name="next_after_decision" checked' in client.get(reverse("queue")).content.decode()
    assert client.post(reverse("queue_preferences"), {}).status_code == 302  # the box unticked
    assert Preferences.objects.get(user=operator).next_after_decision is False
    assert 'name="next_after_decision" checked' not in client.get(reverse("queue")).content.decode()
    claim_take(user=operator, review_id=first.pk)
    assert approve(client, first)["Location"] == reverse("queue")
    assert Claim.objects.filter(ended_at=None).count() == 0

    client.post(reverse("queue_preferences"), {"next_after_decision": "on"}, HTTP_HX_REQUEST="true")
    assert Preferences.objects.get(user=operator).next_after_decision is True


def test_an_adjudicators_form_starts_from_what_the_answers_agree_on(org):
    slots_ask(org, ItemKind.CONVERSATION, 2)
    review = conversation_item(org)
    ann, bob, cy = (make_person(name, org, Role.OPERATOR) for name in ("ann", "bob", "cy"))
    item_answer(ann, review, checks={"grounded": "pass", "complete": "fail", "usable": "pass"}, note="a")
    item_answer(bob, review, checks={"grounded": "pass", "complete": "pass", "usable": "pass"}, note="b")
    claim_take(user=cy, review_id=review.pk)
    page = item_page(review, user=cy, now=timezone.now())
    assert page.adjudicating
    assert {answer.check.key: answer.field.initial for answer in page.form.check_fields()} == {
        "grounded": "pass",
        "complete": None,  # the answers differ: the adjudicator's own answer
        "usable": "pass",
    }


def test_an_unsure_items_form_starts_from_no_answer_of_the_machines(org, operator):
    review = conversation_item(org)  # the machine said pass, unknown, pass
    claim_take(user=operator, review_id=review.pk)
    page = item_page(review, user=operator, now=timezone.now())
    assert not page.blind and [answer.field.initial for answer in page.form.check_fields()] == [None, None, None]


def test_a_refused_decision_keeps_what_was_typed(client_for, operator, org):
    draft, conversation = draft_item(org), conversation_item(org)
    client = client_for(operator)
    claim_take(user=operator, review_id=draft.pk)
    resubmit(draft)  # the item changes while the note is written: the form cannot come back
    note = "Cite the source for the 41% figure; the rest reads well."
    response = client.post(
        reverse("review_decide", args=[draft.pk]),
        {"outcome": "reject", "fingerprint": draft.fingerprint, "note": note},
        HTTP_HX_REQUEST="true",
        HTTP_HX_TARGET="actions",
    )
    assert response.status_code == 409
    kept = response.content.decode().split('id="kept"', 1)[1].split("</textarea>")[0]
    assert "outcome: reject" in kept and note in kept

    claim_take(user=operator, review_id=conversation.pk)
    posted = {"fingerprint": conversation.fingerprint, "grounded": "pass", "note": "Only grounded so far."}
    response = client.post(reverse("review_decide", args=[conversation.pk]), posted)
    assert response.status_code == 422  # two checks unanswered: the form comes back as it was posted
    html = response.content.decode()
    assert 'value="pass" id="id_grounded_0" required checked' in html and "Only grounded so far." in html
    assert "Answer Complete: pass, fail, unknown." in html
    assert not Decision.objects.exists()

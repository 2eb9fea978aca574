"""A reader's page of an item (/dashboard/items/<review>/, issue 41): where a dashboard list's row leads someone who
does not decide the item in the queue. It shows what the queue's item page shows of the evidence and of what was said
of it (the item page's one read), with no decision form, claim, lease or assignment, for any review the lists hold
(the machine's own verdicts too), within the reader's reach."""

import pytest
from django.urls import reverse
from django.utils import timezone

from grading.core.evidence import draft_fingerprint
from grading.models import ItemKind, Review, ReviewState, Route
from grading.reviews.versions import criteria_new_version
from reviewer.models import Membership, Role
from reviewer.queue.corrections import correction_create
from reviewer.queue.services import claim_take
from tests.builders.conversations import PATH_IDS, verdicts
from tests.builders.corrected_drafts import FIXED_BODY, waiting_with_finding
from tests.builders.people import make_person
from tests.builders.queue_items import DRAFT_BODY, conversation_item, draft_item, item_answer, resubmit

pytestmark = pytest.mark.django_db

DELVE = DRAFT_BODY.index("delve")
# What only the queue's page has: the decision form, claiming, the lease's heartbeat, assigning, the key map.
QUEUE_ONLY = (
    'id="actions"',
    'id="decide-form"',
    "Claim this",
    "Claim next",
    "/heartbeat/",
    'id="assignment"',
    "queue.js",
)


def read(client, review: Review):
    return client.get(reverse("dashboard_item", args=[review.pk]))


def test_it_shows_a_stakeholder_a_drafts_body_with_its_findings_marked_and_the_verdicts_with_nothing_to_act_with(
    client_for, org, stakeholder
):
    finding = {"code": "banned_word", "message": "banned word: delve", "severity": "fatal",
               "spans": [[DELVE, DELVE + 5]], "subject": "delve"}  # fmt: skip
    review = draft_item(org, findings=[finding])
    response = read(client_for(stakeholder), review)
    html = response.content.decode()
    assert response.status_code == 200
    assert '<mark class="fatal" title="banned word: delve">delve</mark>' in html
    assert "Score 6.7 against threshold 7.0" in html and "The opening warms up for a paragraph" in html
    assert review.fingerprint in html and "openai · judge-test · prompt 5be0c2d1" in html  # the score identity
    assert 'id="read-only"' in html and "people decide this item in the queue" in html
    assert [marker for marker in QUEUE_ONLY if marker in html] == []


def test_it_shows_a_conversations_active_path_with_the_messages_each_check_cites(client_for, org, stakeholder):
    review = conversation_item(org)
    html = read(client_for(stakeholder), review).content.decode()
    assert "Please refund order 1182, it arrived broken." in html
    assert "1 abandoned branch after m3 (1 message). Not evidence." in html
    assert 'Complete · <span class="unknown">unknown</span> · quoted evidence' in html
    assert "cited by Grounded, Complete, Usable" in html
    assert "Write the expected reply" not in html  # the control of the person deciding it
    assert [marker for marker in QUEUE_ONLY if marker in html] == []


def test_it_shows_the_human_decision_and_its_note_once_people_decided(client_for, org, operator, stakeholder):
    review = draft_item(org)
    item_answer(operator, review, outcome="approve", note="Reads well enough for the docs.")
    html = read(client_for(stakeholder), review).content.decode()
    assert "Decided: approve" in html and "by dana" in html and "Reads well enough for the docs." in html


def test_it_opens_what_the_machine_decided_alone_and_says_what_it_decided(client_for, org, stakeholder):
    passed = conversation_item(org, "cv-passed", checks=verdicts(PATH_IDS))
    finding = {"code": "banned_word", "message": "banned word: delve", "severity": "fatal", "spans": []}
    failed = draft_item(org, "failed-draft", findings=[finding])
    Review.objects.filter(pk=passed.pk).update(route=Route.PASS, reason="", state=ReviewState.CURRENT)
    Review.objects.filter(pk=failed.pk).update(route=Route.FAIL, reason="", state=ReviewState.CURRENT)
    reader = client_for(stakeholder)
    conversation = read(reader, passed).content.decode()
    assert 'Decided by the machine <span class="pill pass">pass</span>' in conversation
    assert "The machine passed it without a person." in conversation
    assert "the machine decided this item without a person" in conversation
    draft = read(reader, failed).content.decode()
    assert 'Decided by the machine <span class="pill fail">fail</span>' in draft
    assert "The gate failed it without a person: the hard findings (banned_word) veto the judge." in draft


def test_it_says_a_review_that_stopped_counting_is_history_and_leads_to_the_items_other_reviews(
    client_for, org, stakeholder
):
    old = draft_item(org)
    resubmit(old)
    body = "A different body."
    Review.objects.filter(pk=old.pk).update(state=ReviewState.SUPERSEDED)
    newer = draft_item(org, "second")  # another item: only its own reviews are listed under the first
    current = Review.objects.create(
        org=org, kind=ItemKind.DRAFT, draft=old.draft, fingerprint=draft_fingerprint(title=old.draft.title, body=body,
        source_urls=[]), criteria_version=old.criteria_version, judge=old.judge, judge_key="judge-test",
        started_at=timezone.now(), finished_at=timezone.now(), stages=1, route=Route.PASS, score=8.2,
        state=ReviewState.CURRENT,
    )  # fmt: skip
    html = read(client_for(stakeholder), old).content.decode()
    assert "This review is superseded: it no longer counts." in html
    assert f'<a href="{reverse("dashboard_item", args=[current.pk])}">read</a>' in html
    assert reverse("dashboard_item", args=[newer.pk]) not in html
    assert "The gate passed it without a person: score 8.2" in read(client_for(stakeholder), current).content.decode()


def test_it_is_a_404_outside_the_readers_reach_and_for_a_trial_review(
    client, client_for, org, other_org, stakeholder, roleless
):
    theirs = conversation_item(other_org, "cv-theirs")
    billing = conversation_item(org, "cv-billing", application="billing")
    draft = draft_item(org)
    trial = draft_item(org, "tried")
    unpublished = criteria_new_version(org=org, kind=ItemKind.DRAFT)
    Review.objects.filter(pk=trial.pk).update(criteria_version=unpublished, state=ReviewState.TRIAL)
    assert read(client_for(stakeholder), theirs).status_code == 404
    assert read(client_for(stakeholder), trial).status_code == 404
    docs_reader = make_person("dee")
    Membership.objects.create(user=docs_reader, org=org, role=Role.STAKEHOLDER, applications=["docs"], drafts=False)
    assert [read(client_for(docs_reader), review).status_code for review in (billing, draft)] == [404, 404]
    assert read(client_for(roleless), billing).status_code == 403
    client.logout()
    assert read(client, billing).status_code == 302


def test_it_lets_a_criteria_admin_read_an_item_and_add_it_as_a_worked_example(
    client_for, org, operator, criteria_admin
):
    review = draft_item(org)
    item_answer(operator, review, outcome="reject", note="Opens with filler.")
    criteria_new_version(org=org, kind=ItemKind.DRAFT)
    html = read(client_for(criteria_admin), review).content.decode()
    assert 'id="add-example"' in html and "Opens with filler." in html


def test_it_opens_a_review_the_judge_could_not_give_a_verdict_on_and_says_why(client_for, org, stakeholder):
    errored = conversation_item(org, "cv-errored")
    Review.objects.filter(pk=errored.pk).update(
        route=Route.ERROR, reason="judge_unknown", detail="No judge named 'strict' is configured.", checks={}
    )
    unscorable = draft_item(org)
    Review.objects.filter(pk=unscorable.pk).update(
        route=Route.NOT_SCORABLE, reason="empty", detail="The draft has no body.", score=None, sub_scores={}
    )
    reader = client_for(stakeholder)
    html = read(reader, errored).content.decode()
    assert "No verdict: the judge could not grade it (judge_unknown). No judge named" in html
    assert "Please refund order 1182, it arrived broken." in html  # the evidence, whatever the judge did
    assert "Not scorable, so no judge read it: The draft has no body." in read(reader, unscorable).content.decode()


def test_the_queue_page_leads_an_operator_to_the_readers_page_of_an_earlier_review_the_machine_decided(
    client_for, org, operator
):
    earlier = draft_item(org, score=8.1)
    Review.objects.filter(pk=earlier.pk).update(route=Route.PASS, reason="", state=ReviewState.SUPERSEDED)
    waiting = Review.objects.create(
        org=org, kind=ItemKind.DRAFT, draft=earlier.draft, fingerprint=earlier.fingerprint,
        criteria_version=earlier.criteria_version, judge=earlier.judge, judge_key="judge-test",
        started_at=timezone.now(), finished_at=timezone.now(), stages=1, route=Route.HUMAN, reason="band", score=6.7,
        state=ReviewState.WAITING,
    )  # fmt: skip
    html = client_for(operator).get(reverse("review_detail", args=[waiting.pk])).content.decode()
    assert f'<a href="{reverse("dashboard_item", args=[earlier.pk])}">read</a>' in html
    assert client_for(operator).get(reverse("dashboard_item", args=[earlier.pk])).status_code == 200


def test_a_correction_the_gate_is_grading_shows_on_the_readers_page_and_refreshes_from_it(
    client_for, org, operator, stakeholder
):
    review = waiting_with_finding(org)
    claim_take(user=operator, review_id=review.pk)
    correction_create(user=operator, review_id=review.pk, fingerprint=review.fingerprint, body=FIXED_BODY)
    reader, url = client_for(stakeholder), reverse("dashboard_item", args=[review.pk])
    html = reader.get(url).content.decode()
    assert f'hx-get="{url}"' in html and "the gate is grading it" in html and "corrected by dana" in html
    part = reader.get(url, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="corrections").content.decode().strip()
    assert part.startswith('<div class="card corrections" id="corrections"') and "corrected by dana" in part

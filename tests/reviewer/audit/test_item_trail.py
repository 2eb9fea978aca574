"""Each item's own trail, on its queue page and its criteria page: claims, declines, decisions, label imports,
escalations and gradings (the reviews' history, each saying why it happened), newest first; the verdicts hidden
while the item is blind; a link to the whole trail on the audit page for the org's admins."""

import json
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from grading.api.keys import api_key_create
from grading.models import AuditEvent, ItemKind, ServiceTarget
from grading.reviews.services import PersonVerdict, ReviewOutcome, ScoreIdentity, review_record
from grading.reviews.targets import due_times_refresh
from grading.reviews.versions import criteria_active
from reviewer.models import Escalation, Membership, Role
from reviewer.queue.escalation import escalation_sweep
from reviewer.queue.services import claim_decline, claim_take, decision_create
from tests.builders.people import make_person
from tests.builders.queue_items import JUDGE, conversation_item, draft_item, resubmit

pytestmark = pytest.mark.django_db


def trail(client, url: str) -> list[tuple[str, str]]:
    response = client.get(url)
    assert response.status_code == 200
    assert b'id="trail"' in response.content
    return [(row.what, row.who) for row in response.context["trail"].rows]


def label_through_the_api(client, org, external_id: str, verdict: str) -> None:
    key = api_key_create(org=org, name="qa import").plaintext
    body = {"labels": [{"item": external_id, "check": "pass_fail", "verdict": verdict, "labeller": "qa-team"}]}
    response = client.post(
        "/api/v1/labels", json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {key}"
    )
    assert response.status_code == 201, response.content


def grade_again(review):
    """The pipeline sends a new body; the grader's review of it lands as the item's latest, routed to people."""
    resubmit(review)
    draft = type(review.draft).objects.get(pk=review.draft_id)
    identity = ScoreIdentity(
        fingerprint=draft.fingerprint,
        criteria_version=criteria_active(org=review.org, kind=ItemKind.DRAFT),
        judge=JUDGE,
        judge_key="judge-test",
        memory_snapshot="mem1:c83d",
    )
    outcome = ReviewOutcome(route="human", reason="band")
    return review_record(subject=draft, identity=identity, outcome=outcome, started_at=timezone.now())


def test_an_items_page_shows_its_claims_decline_decision_label_import_and_regrade_newest_first(
    client, client_for, org, operator, criteria_admin
):
    review = draft_item(org)
    colleague = make_person("lee", org, Role.OPERATOR)
    claim_take(user=operator, review_id=review.pk)
    claim_decline(user=operator, review_id=review.pk, reason="I wrote this one <myself>")
    claim_take(user=colleague, review_id=review.pk)
    decision_create(
        user=colleague, review_id=review.pk, fingerprint=review.fingerprint, verdict=PersonVerdict(outcome="approve")
    )
    label_through_the_api(client, org, review.draft.external_id, "pass")
    regraded = grade_again(review)

    expected = [
        ("graded: new evidence", "Tollgate"),
        ("labelled", "key qa import"),
        ("decided", "lee"),
        ("claimed", "lee"),
        ("declined", "dana"),
        ("claimed", "dana"),
        ("graded: first grading", "Tollgate"),
    ]
    assert trail(client_for(operator), reverse("review_detail", args=[regraded.pk])) == expected
    page = client_for(operator).get(reverse("review_detail", args=[regraded.pk])).content.decode()
    assert "I wrote this one &lt;myself&gt;" in page  # the decline's reason, as text
    criteria_page = reverse("criteria_item", kwargs={"kind": "draft", "pk": review.draft_id})
    assert trail(client_for(criteria_admin), criteria_page) == expected
    assert AuditEvent.objects.get(action="label.create").api_key.name == "qa import"


def test_an_escalation_shows_in_the_trail_of_the_item_it_concerns(client_for, org, operator):
    review = draft_item(org, minutes_ago=0)
    ServiceTarget.objects.create(org=org, position=1, kind="draft", minutes=60)
    due_times_refresh(org.pk)
    review.refresh_from_db()
    Escalation.objects.create(org=org, swept_until=review.due_at - timedelta(minutes=1))
    escalation_sweep(Escalation.objects.get(org=org), review.due_at)
    assert trail(client_for(operator), reverse("review_detail", args=[review.pk]))[0] == (
        "overdue: escalated",
        "Tollgate",
    )


def test_a_blind_items_trail_hides_every_verdict_until_it_is_decided(client, client_for, org, operator):
    review = draft_item(org, audit=True)
    label_through_the_api(client, org, review.draft.external_id, "fail")
    response = client_for(operator).get(reverse("review_detail", args=[review.pk]))
    rows = response.context["trail"].rows
    assert [row.what for row in rows] == ["labelled", "graded: first grading"]
    shown = {key for row in rows for key, _ in row.details}
    assert not shown & {"verdict", "route", "score", "outcome", "checks"}
    assert "labeller" in shown

    claim_take(user=operator, review_id=review.pk)
    decision_create(
        user=operator,
        review_id=review.pk,
        fingerprint=review.fingerprint,
        verdict=PersonVerdict(outcome="reject", note="no"),
    )
    rows = client_for(operator).get(reverse("review_detail", args=[review.pk])).context["trail"].rows
    assert ("verdict", "fail") in rows[-2].details and ("outcome", "reject") in rows[0].details


def test_an_org_admin_gets_a_link_to_the_items_whole_trail_on_the_audit_page(client_for, org, operator):
    review = conversation_item(org)
    url = reverse("review_detail", args=[review.pk])
    assert client_for(operator).get(url).context["trail"].audit_url == ""
    Membership.objects.create(user=operator, org=org, role=Role.ORG_ADMIN)
    response = client_for(operator).get(url)
    link = response.context["trail"].audit_url
    assert link == f"/audit/?org={org.slug}&item_kind=conversation&item_id={review.conversation_id}"
    assert b'id="trail-audit"' in response.content
    claim_take(user=operator, review_id=review.pk)
    listed = client_for(operator).get(link).context["rows"]
    assert [row.event.action for row in listed] == ["claim.create"]

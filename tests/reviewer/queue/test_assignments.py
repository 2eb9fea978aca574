"""Assignment: a lead reserves an item for a person or a pool (until a time, or while it waits), or a rule does by
kind, application and reason. Only the assignees may claim a reserved item; claim next hands them theirs first;
the SQL scan and the Python check under the lock say the same; every change is audited."""

import json
import threading
from datetime import timedelta
from itertools import product

import pytest
from django.contrib.auth import get_user_model
from django.db import connections
from django.db.models import BooleanField
from django.db.models.expressions import RawSQL
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from grading.api.keys import api_key_create
from grading.models import AuditEvent, Review
from grading.reviews.services import PersonVerdict
from reviewer.models import Assignment, AssignmentRule, Claim, Membership, Pool, Role
from reviewer.queue.assignments import (
    InvalidAssignment,
    assignment_clear,
    assignment_set,
    reservation_of,
    reserved_q,
    rules_for,
)
from reviewer.queue.reads import reserved_for_others_sql
from reviewer.queue.services import Refused, claim_next, claim_take, decision_create
from tests.builders.people import make_person
from tests.builders.queue_items import bulk_draft_items, conversation_item, draft_item

pytestmark = pytest.mark.django_db


@pytest.fixture
def team(org):
    """ann and bob (the billing pool), cy outside it; lee, a lead."""
    people = {name: make_person(name, org, Role.OPERATOR) for name in ("ann", "bob", "cy")}
    people["lee"] = make_person("lee", org, Role.LEAD)
    pool = Pool.objects.create(org=org, name="billing")
    pool.members.add(people["ann"], people["bob"])
    return people | {"pool": pool}


def test_an_item_assigned_to_a_person_is_theirs_to_claim_and_claim_next_hands_it_to_them_first(org, team):
    older = draft_item(org, "older", minutes_ago=120)
    assigned = draft_item(org, "assigned", minutes_ago=10)
    assignment_set(review_id=assigned.pk, person=team["ann"], by=team["lee"])

    with pytest.raises(Refused) as refused:
        claim_take(user=team["cy"], review_id=assigned.pk)
    assert refused.value.code == "assigned" and "ann" in refused.value.message
    assert claim_next(user=team["cy"]).review_id == older.pk
    assert claim_next(user=team["cy"]) is None  # the assigned one is not hers
    assert claim_next(user=team["ann"]).review_id == assigned.pk  # hers; the older one is held by cy
    assert Claim.objects.filter(review=assigned).get().holder == team["ann"]


def test_once_the_assignment_ends_anyone_in_reach_may_claim(org, team):
    review = draft_item(org, "until")
    now = timezone.now()
    assignment_set(review_id=review.pk, pool=team["pool"], until=now + timedelta(hours=1), by=team["lee"])
    assert claim_next(user=team["cy"], now=now + timedelta(minutes=59)) is None
    assert claim_next(user=team["cy"], now=now + timedelta(hours=1)).review_id == review.pk


def test_a_pools_members_may_claim_and_nobody_else(org, team):
    review = draft_item(org, "pooled")
    assignment_set(review_id=review.pk, pool=team["pool"], by=team["lee"])
    with pytest.raises(Refused):
        claim_take(user=team["cy"], review_id=review.pk)
    with pytest.raises(Refused):
        claim_take(user=team["lee"], review_id=review.pk)
    assert claim_take(user=team["bob"], review_id=review.pk).holder == team["bob"]


def test_rules_reserve_by_kind_application_and_reason_for_their_hours_and_by_hand_overrides_them(org, team):
    billing = conversation_item(org, "cv-billing", application="billing", minutes_ago=30)
    other = conversation_item(org, "cv-other", application="onboarding", minutes_ago=30)
    draft = draft_item(org, "a-draft", minutes_ago=30)
    AssignmentRule.objects.create(org=org, position=1, application="billing", pool=team["pool"], hours=1)
    AssignmentRule.objects.create(org=org, position=2, kind="conversation", person=team["cy"])
    now = timezone.now()
    assert reservation_of(billing, now).named == "pool billing" and reservation_of(billing, now).by_rule == 1
    assert reservation_of(other, now).named == "cy"  # the first rule did not match
    assert reservation_of(draft, now) is None
    # rule 1's hour runs from routing; then the item is anyone's (rule 2 does not take over: the first match decides)
    assert reservation_of(billing, billing.finished_at + timedelta(hours=1)) is None
    assignment_set(review_id=billing.pk, person=team["cy"], by=team["lee"])
    assert reservation_of(billing, now).named == "cy" and reservation_of(billing, now).by_rule is None


def test_the_scan_the_filter_and_the_check_under_the_lock_agree_for_every_person_item_and_time(org, team):
    """The rule's SQL forms against `reservation_of` (Python, under the lock): what claim next's scan passes over
    (`reserved_for_others_sql`) and what the "assigned to me" filter lists (`reserved_q`). Over items of both kinds
    and two applications, two reasons and the audit sample, rules of every shape (a person, a pool, with hours and
    without), assignments by hand (ended or not), each person of the team, and three moments."""
    items = [conversation_item(org, f"cv-{n}", application=app, minutes_ago=20 + 50 * n)
             for n, app in enumerate(["billing", "onboarding", "billing"])]  # fmt: skip
    items += [draft_item(org, f"d-{n}", reason=reason, minutes_ago=20 + 50 * n)
              for n, reason in enumerate(["band", "spread", "band"])]  # fmt: skip
    Review.objects.filter(pk=items[2].pk).update(audit=True)
    AssignmentRule.objects.create(org=org, position=1, reason="audit", person=team["bob"])
    AssignmentRule.objects.create(org=org, position=2, kind="draft", reason="band", pool=team["pool"], hours=1)
    AssignmentRule.objects.create(org=org, position=3, application="onboarding", person=team["cy"], hours=2)
    AssignmentRule.objects.create(org=org, position=4, kind="draft", person=team["ann"])
    AssignmentRule.objects.create(org=org, position=5, person=team["cy"])  # any item the others leave
    now = timezone.now()
    assignment_set(review_id=items[3].pk, person=team["cy"], by=team["lee"])
    assignment_set(review_id=items[4].pk, pool=team["pool"], until=now + timedelta(minutes=30), by=team["lee"])
    reviews = list(Review.objects.filter(pk__in=[r.pk for r in items]))
    people = [team[name] for name in ("ann", "bob", "cy", "lee")]
    seen = set()
    for person, moment in product(people, (now, now + timedelta(minutes=45), now + timedelta(hours=3))):
        expected_mine = set()
        expected_theirs = set()
        for review in reviews:
            reservation = reservation_of(review, moment)
            if reservation is not None:
                (expected_mine if reservation.allows(person.pk) else expected_theirs).add(review.pk)
        waiting = Review.objects.filter(pk__in=[r.pk for r in items])
        mine_q = reserved_q(org.pk, person.pk, moment)  # None: nothing can be reserved for them
        mine = set() if mine_q is None else set(waiting.filter(mine_q).values_list("pk", flat=True))
        sql, params = reserved_for_others_sql(rules_for(org.pk), user_id=person.pk, now=moment)
        passed_over = RawSQL(sql, params, output_field=BooleanField())  # noqa: S611 - every value a parameter
        theirs = set(waiting.filter(passed_over).values_list("pk", flat=True))
        assert (mine, theirs) == (expected_mine, expected_theirs), (person.username, moment - now)
        seen.add(frozenset(expected_theirs))
    assert len(seen) > 3  # the cases differ: the test reads more than one answer
    assert any(reservation_of(r, now) for r in reviews) and not all(reservation_of(r, now) for r in reviews)


def test_assigning_checks_who_can_work_the_item_writes_nothing_when_refused_and_audits_every_change(org, team):
    review = conversation_item(org, "cv-1", application="billing")
    outsider = make_person("out")
    Membership.objects.create(user=outsider, org=org, role=Role.OPERATOR, applications=["onboarding"], drafts=False)
    for person in (outsider, make_person("nobody")):
        with pytest.raises(InvalidAssignment):
            assignment_set(review_id=review.pk, person=person, by=team["lee"])
    with pytest.raises(InvalidAssignment):
        assignment_set(review_id=review.pk, person=team["ann"], until=timezone.now() - timedelta(1), by=team["lee"])
    assert not Assignment.objects.exists() and not AuditEvent.objects.filter(action__startswith="assignment").exists()

    assignment_set(review_id=review.pk, person=team["ann"], by=team["lee"])
    assignment_set(review_id=review.pk, pool=team["pool"], by=team["lee"])
    assert assignment_clear(review_id=review.pk, by=team["lee"])
    events = AuditEvent.objects.filter(action__startswith="assignment").order_by("pk")
    assert [(e.action, e.detail.get("to"), e.detail.get("was")) for e in events] == [
        ("assignment.create", "ann", None),
        ("assignment.replace", "pool billing", "ann"),
        ("assignment.delete", None, "pool billing"),
    ]
    assert {e.actor for e in events} == {team["lee"]}

    claim_take(user=team["ann"], review_id=review.pk)
    decision_create(
        user=team["ann"],
        review_id=review.pk,
        fingerprint=review.fingerprint,
        verdict=PersonVerdict(checks=_every_pass(), note="ok"),
    )
    with pytest.raises(InvalidAssignment):  # decided: out of the queue
        assignment_set(review_id=review.pk, person=team["bob"], by=team["lee"])


def _every_pass() -> dict:
    return {"grounded": "pass", "complete": "pass", "usable": "pass"}


def test_a_lead_assigns_from_the_item_page_and_an_operator_cannot(org, team, client_for):
    review = draft_item(org, "page")
    page = client_for(team["lee"]).get(reverse("review_detail", args=[review.pk])).content.decode()
    assert f'action="{reverse("review_assign", args=[review.pk])}"' in page and ">ann<" in page
    operator_page = client_for(team["ann"]).get(reverse("review_detail", args=[review.pk])).content.decode()
    assert 'id="assignment"' not in operator_page

    to_bob = {"to": f"person:{team['bob'].pk}"}
    refused = client_for(team["ann"]).post(reverse("review_assign", args=[review.pk]), to_bob)
    assert refused.status_code == 403 and not Assignment.objects.exists()
    lead = client_for(team["lee"])
    lead.post(reverse("review_assign", args=[review.pk]), {"to": f"pool:{team['pool'].pk}", "hours": "2"})
    assignment = Assignment.objects.get()
    assert assignment.pool == team["pool"] and assignment.assigned_by == team["lee"]
    assert timedelta(hours=1, minutes=59) < assignment.until - timezone.now() <= timedelta(hours=2)
    queue = client_for(team["ann"]).get(reverse("queue")).content.decode()
    assert "for pool billing (you among them) until" in queue
    lead = client_for(team["lee"])  # one client, signed in as each person in turn
    bad = lead.post(reverse("review_assign", args=[review.pk]), {"to": "person:999999"}, follow=True)
    assert "Pick someone who can work this item" in bad.content.decode()
    assert Assignment.objects.get().pool == team["pool"]  # unchanged
    lead.post(reverse("review_unassign", args=[review.pk]))
    assert not Assignment.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_twenty_operators_claiming_at_once_never_take_an_item_reserved_for_others(org):
    """20 threads claim next until nothing is left over 120 items, 60 of them reserved for a pool of 3 (half by
    hand, half by a rule): each reserved item is claimed by a member, every item exactly once."""
    reviews = bulk_draft_items(org, 120)
    user_model = get_user_model()
    people = user_model.objects.bulk_create([user_model(username=f"op-{n}") for n in range(20)])
    Membership.objects.bulk_create([Membership(user=p, org=org, role=Role.OPERATOR) for p in people])
    pool = Pool.objects.create(org=org, name="trio")
    pool.members.add(*people[:3])
    for review in reviews[:30]:
        assignment_set(review_id=review.pk, pool=pool)
    # the rule: the items whose review ids are highest, by reason (bulk items are all "band"): use by-hand for the
    # first 30 and a rule on a reason the other 30 are given
    Review.objects.filter(pk__in=[r.pk for r in reviews[30:60]]).update(reason="spread")
    AssignmentRule.objects.create(org=org, position=1, reason="spread", pool=pool)
    reserved = {r.pk for r in reviews[:60]}
    start = threading.Barrier(len(people))
    taken: dict[int, list[int]] = {p.pk: [] for p in people}
    errors: list[BaseException] = []

    def claimer(person) -> None:
        try:
            start.wait()
            while (claim := claim_next(user=person)) is not None:
                taken[person.pk].append(claim.review_id)
                connections.close_all()
        except BaseException as exc:  # noqa: BLE001 - any error fails the test below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=claimer, args=(p,)) for p in people]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    claimed = sorted(review_id for ids in taken.values() for review_id in ids)
    assert claimed == sorted(r.pk for r in reviews)
    members = {p.pk for p in people[:3]}
    assert all(holder in members for holder, ids in taken.items() for review_id in ids if review_id in reserved)
    assert any(taken[p.pk] for p in people[3:])  # the others worked the rest


def test_an_org_key_reads_sets_and_clears_an_assignment_over_the_api_audited_under_the_key(org, other_org, team):
    review = draft_item(org, "over-the-api")
    issued = api_key_create(org=org, name="ops")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {issued.plaintext}")
    url = f"/api/v1/drafts/{review.draft_id}/assignment"

    def put(body: dict):
        return client.put(url, json.dumps(body), content_type="application/json")

    assert client.get(url).json() == {"review": review.pk, "to": None, "until": None, "by_rule": None}
    assert put({"person": "ann"}).json()["to"] == "ann"
    assert client.get(url).json()["to"] == "ann"
    for refused in ({"person": "nobody-here"}, {"person": "ann", "pool": "billing"}, {"pool": "elsewhere"}, {}):
        assert put(refused).status_code == 422, refused
    assert Assignment.objects.get().person == team["ann"]  # unchanged by every refusal
    event = AuditEvent.objects.get(action="assignment.create")
    assert event.api_key_id == issued.api_key.pk and event.actor is None
    assert client.delete(url).json()["to"] is None and not Assignment.objects.exists()

    theirs = Client(HTTP_AUTHORIZATION=f"Bearer {api_key_create(org=other_org, name='theirs').plaintext}")
    assert theirs.put(url, json.dumps({"person": "ann"}), content_type="application/json").status_code == 404
    claim_take(user=team["ann"], review_id=review.pk)
    decision_create(
        user=team["ann"], review_id=review.pk, fingerprint=review.fingerprint, verdict=PersonVerdict(outcome="approve")
    )
    assert put({"person": "bob"}).status_code == 409  # decided: nothing waits


def test_over_the_api_another_orgs_person_gets_the_answer_a_name_nobody_has_gets(org, team, other_org_operator):
    review = draft_item(org, "who-is-that")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {api_key_create(org=org, name='ops').plaintext}")
    url = f"/api/v1/drafts/{review.draft_id}/assignment"
    events = AuditEvent.objects.count()
    answers = {}
    for name in ("nobody-here", "mallory"):
        response = client.put(url, json.dumps({"person": name}), content_type="application/json")
        answers[name] = (response.status_code, response.json()["detail"].replace(name, "NAME"))
    assert answers["mallory"] == answers["nobody-here"]
    assert answers["mallory"][0] == 422
    assert not Assignment.objects.exists() and AuditEvent.objects.count() == events

"""Who a decision is credited to: one person's decision and an adjudication to whoever made it, an agreed decision
(several people answered alike) to every person whose answer made it, never to "a former user". The dashboard's
decisions per person, the queue's workload and the lists their numbers open say the same, and the counters booked
with the answers equal a rebuild."""

import importlib

import pytest
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from grading.dashboard.figures import dashboard_figures, scope_for
from grading.models import Decision, ItemKind, Rollup
from grading.reviews.rollups import live_counters, rollups_rebuild, stored_counters
from reviewer.dashboards.reads import ReviewFilter, reviews_behind
from reviewer.dashboards.service import service_figures
from reviewer.models import Role
from reviewer.queue.services import Refused, claim_take
from tests.builders.people import make_person
from tests.builders.queue_items import draft_item, item_answer, slots_ask

pytestmark = pytest.mark.django_db
NOW = timezone.now()


@pytest.fixture
def decided(org):
    """Two drafts two people decide: ann and bob agree on one; they split on the other, and cy adjudicates it."""
    slots_ask(org, ItemKind.DRAFT, 2)
    agreed, split = draft_item(org, "agreed"), draft_item(org, "split")
    rollups_rebuild(org_id=org.pk)  # the builder writes the reviews straight to the table: count them first
    ann, bob, cy = (make_person(name, org, Role.OPERATOR) for name in ("ann", "bob", "cy"))
    item_answer(ann, agreed, outcome="approve")
    item_answer(bob, agreed, outcome="approve")
    item_answer(ann, split, outcome="approve")
    item_answer(bob, split, outcome="reject", note="Off brand.")
    item_answer(cy, split, outcome="approve", note="On brand: see the style guide.")
    assert sorted(Decision.objects.values_list("basis", flat=True)) == ["adjudicated", "agreed"]
    return {"agreed": agreed, "split": split, "people": {"ann": ann, "bob": bob, "cy": cy}}


def test_it_credits_an_agreed_decision_to_every_person_whose_answer_made_it(org, decided):
    scope = scope_for(org)

    by_operator = dashboard_figures(scope)["queue"]["decisions_by_operator"]
    workload = service_figures(scope)["workload"]

    assert {row["operator"]: row["decisions"] for row in by_operator} == {"ann": 1, "bob": 1, "cy": 1}
    assert {row["person"]: row["decided"] for row in workload} == {"ann": 1, "bob": 1, "cy": 1}
    expected = {"ann": {decided["agreed"].pk}, "bob": {decided["agreed"].pk}, "cy": {decided["split"].pk}}
    for name, person in decided["people"].items():  # each number opens the decisions it counted
        listed = reviews_behind(org, scope, ReviewFilter(kind="any", operator=person.pk))
        assert set(listed.values_list("pk", flat=True)) == expected[name], name
    assert stored_counters(org_ids=[org.pk]) == live_counters(org_ids=[org.pk])
    assert rollups_rebuild(org_id=org.pk).drifted == 0


def test_an_agreed_decision_reads_as_the_answers_never_as_a_former_users(org, decided, stakeholder, client_for):
    ann = decided["people"]["ann"]
    listed = client_for(stakeholder).get(reverse("dashboard_reviews"), {"kind": "any", "operator": ann.pk})

    assert listed.status_code == 200
    html = listed.content.decode()
    assert "approve · the answers agreed" in html and "a former user" not in html
    with pytest.raises(Refused, match=r"already decided \(approve\) by the answers, which agreed"):
        claim_take(user=make_person("dee", org, Role.OPERATOR), review_id=decided["agreed"].pk)


def test_the_migration_credits_the_agreed_decisions_counted_before_to_nobody(org, decided):
    """Before, an agreed decision was counted under person 0 ("a former user"): migration 0026 counts the decisions
    per person again, so the dashboard is right from the upgrade on, without waiting for the hourly rebuild."""
    credited = Rollup.objects.filter(org=org, metric="decided_by")
    cell = credited.values("kind", "criteria_id", "application", "week").first()
    credited.delete()
    for person, n in (("0", 1), (str(decided["people"]["cy"].pk), 1)):
        Rollup.objects.create(org=org, **cell, metric="decided_by", key1=person, key2="", value=n, updated_at=NOW)

    migration = importlib.import_module("grading.migrations.0026_decisions_credited_to_their_people")
    with connection.cursor() as cursor:
        for statement in migration.DECISIONS_CREDITED:
            cursor.execute(statement)

    assert stored_counters(org_ids=[org.pk]) == live_counters(org_ids=[org.pk])
    people = {row["operator"] for row in dashboard_figures(scope_for(org))["queue"]["decisions_by_operator"]}
    assert people == {"ann", "bob", "cy"}

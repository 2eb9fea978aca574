"""The queue's service-level figures: each equals a direct count of the rows, each opens exactly the items it
counted, and they keep to the reader's reach; the same figures over the API. Those that are counters are counted
for the decisions made before the upgrade as the rebuild counts them."""

import importlib
import re
from html import unescape

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from grading.api.keys import api_key_create
from grading.dashboard.figures import scope_for
from grading.models import Decision, Review, Rollup, ServiceTarget
from grading.models.reach import Reach
from grading.reviews.rollups import live_counters, rollups_rebuild, stored_counters
from grading.reviews.services import PersonVerdict
from grading.reviews.targets import due_times_refresh
from reviewer.dashboards.display import Links, service_panel
from reviewer.dashboards.service import service_figures
from reviewer.queue.services import claim_decline, claim_take, decision_create
from tests.builders.dashboard_page import card_loaded
from tests.builders.queue_items import conversation_item, draft_item

pytestmark = pytest.mark.django_db


@pytest.fixture
def worked(org, operator):
    """Six drafts due 30 minutes after routing (two decided in time, one late, one declined, two waiting: one
    overdue) and two billing conversations due in a day, one decided."""
    drafts = [draft_item(org, f"d-{n}", minutes_ago=m) for n, m in enumerate((20, 25, 90, 10, 120, 5))]
    conversations = [conversation_item(org, f"cv-{n}", application="billing", minutes_ago=30) for n in range(2)]
    ServiceTarget.objects.create(org=org, position=1, kind="draft", minutes=30)
    ServiceTarget.objects.create(org=org, position=2, kind="conversation", minutes=24 * 60)
    due_times_refresh(org.pk)
    for review in (drafts[0], drafts[1], drafts[2], conversations[0]):
        review.refresh_from_db()
        claim_take(user=operator, review_id=review.pk)
        every_pass = dict.fromkeys(("grounded", "complete", "usable"), "pass")
        verdict = (
            PersonVerdict(outcome="approve") if review.kind == "draft" else PersonVerdict(checks=every_pass, note="ok")
        )
        decision_create(user=operator, review_id=review.pk, fingerprint=review.fingerprint, verdict=verdict)
    claim_take(user=operator, review_id=drafts[3].pk)
    claim_decline(user=operator, review_id=drafts[3].pk, reason="not mine")
    return {"drafts": drafts, "conversations": conversations}


def test_the_figures_equal_a_direct_count_and_each_opens_exactly_its_items(org, operator, stakeholder, worked,
                                                                          client_for):  # fmt: skip
    scope = scope_for(org)
    figures = service_figures(scope)
    decided = Decision.objects.filter(review__org=org, review__due_at__isnull=False).select_related("review")
    on_time = {d.review_id for d in decided if d.decided_at <= d.review.due_at}
    late = {d.review_id for d in decided} - on_time
    this_week = figures["weeks"][-1]
    assert (this_week["decided"], this_week["within_target"]) == (len(decided), len(on_time)) == (4, 3)
    overdue = Review.objects.filter(org=org, state="waiting", due_at__lte=timezone.now())
    assert figures["overdue_total"] == overdue.count() == 1
    assert figures["workload"] == [{"person": "dana", "person_id": operator.pk, "claimed": 5, "declined": 1,
                                    "decided": 4, "overdue": 0}]  # fmt: skip

    client = client_for(stakeholder)
    card = card_loaded(client, client.get(reverse("dashboard")).content.decode(), "queue-service")
    assert card.startswith('<div class="card" id="queue-service">')
    listed = [
        (int(text), set(map(int, re.findall(r'data-review="(\d+)"', client.get(unescape(url)).content.decode()))))
        for url, text in re.findall(r'<a href="([^"]+)">(\d+)</a>', card)
    ]
    assert all(count == len(ids) for count, ids in listed)  # every number opens exactly as many items
    opened = [ids for _, ids in listed]
    assert on_time in opened and late in opened and set(overdue.values_list("pk", flat=True)) in opened


def test_they_keep_to_the_readers_reach_and_the_api_gives_the_same_figures(org, worked):
    only_billing = service_figures(scope_for(org, reach=Reach(org.pk, frozenset({"billing"}), drafts=False)))
    assert only_billing["weeks"][-1]["decided"] == 1 and only_billing["overdue_total"] == 0
    assert only_billing["workload"][0]["claimed"] == 1
    key = api_key_create(org=org, name="ops").plaintext
    answer = Client(HTTP_AUTHORIZATION=f"Bearer {key}").get("/api/v1/queue/service").json()
    whole = service_figures(scope_for(org))
    assert answer["overdue_total"] == whole["overdue_total"] and answer["weeks"][-1]["decided"] == 4


def test_a_hostile_application_name_reaches_the_pages_links_only_url_encoded(org):
    """The links are marked safe (display.Links): what a pipeline named an application must arrive encoded."""
    hostile = '"><script>alert(1)</script>'
    service = {"weeks": [], "overdue_total": 1, "workload": [],
               "overdue_now": [{"kind": "conversation", "application": hostile, "reason": "band", "n": 1}]}  # fmt: skip
    [row] = service_panel(service, Links(org.slug, scope_for(org)))["overdue_now"]
    assert not set('<>"') & set(row.url) and "application=%22%3E%3Cscript%3E" in row.url


def test_the_migration_counts_the_decisions_made_before_as_the_rebuild_does(org, worked):
    """Before, the figures were read from the decisions on each view: migration 0027 counts them once."""
    rollups_rebuild(org_id=org.pk)  # the builder writes the reviews straight to the table: count them first
    before = service_figures(scope_for(org))["weeks"]
    Rollup.objects.filter(org=org, metric__startswith="decided_due").delete()
    assert service_figures(scope_for(org))["weeks"][-1]["decided"] == 0

    migration = importlib.import_module("grading.migrations.0027_service_target_counters")
    with connection.cursor() as cursor:
        for statement in migration.SERVICE_TARGET_COUNTERS:
            cursor.execute(statement)

    assert stored_counters(org_ids=[org.pk]) == live_counters(org_ids=[org.pk])
    assert service_figures(scope_for(org))["weeks"] == before

"""Memberships limited to part of an org (some applications, drafts or not): the queue, the claims, the dashboard's
figures, its lists and exports read only that part, and nothing of the rest shows in a count, a title or a row.

Every URL against another application's objects (404) is the security matrix's (tests/resilience/).
"""

import csv
import io
import re

import pytest
from django.urls import reverse

from grading.dashboard.figures import SECTIONS, dashboard_figures, scope_for
from grading.models import Review
from grading.models.reach import Reach
from grading.reviews.rollups import live_counters
from reviewer.access import reaches_of
from reviewer.models import Claim, Membership, Role
from reviewer.queue.display import queue_page
from reviewer.queue.services import Refused, claim_extend, claim_next, claim_take
from tests.builders.people import make_person
from tests.builders.queue_items import conversation_item, draft_item
from tests.builders.world import build_world, world_scope

pytestmark = pytest.mark.django_db

ONBOARDING_ONLY = {"applications": ["onboarding"], "drafts": False}


def limited(name: str, org, *roles: Role, applications: list[str], drafts: bool):
    person = make_person(name)
    for role in roles:
        Membership.objects.create(user=person, org=org, role=role, applications=applications, drafts=drafts)
    return person


def test_reaches_unite_a_persons_memberships_per_org(org, other_org):
    person = limited("lee", org, Role.OPERATOR, applications=["billing"], drafts=False)
    Membership.objects.create(user=person, org=org, role=Role.STAKEHOLDER, applications=["onboarding"], drafts=True)
    Membership.objects.create(user=person, org=other_org, role=Role.STAKEHOLDER)
    assert reaches_of(person, Role.OPERATOR) == {org.pk: Reach(org.pk, frozenset({"billing"}), False)}
    both = reaches_of(person, Role.OPERATOR, Role.STAKEHOLDER)
    assert both == {
        org.pk: Reach(org.pk, frozenset({"billing", "onboarding"}), True),
        other_org.pk: Reach(other_org.pk),
    }


def test_a_limited_operators_queue_lists_counts_and_claims_only_their_applications(org, client_for):
    draft_item(org, "secret-draft", title="Pricing memo nobody else may see")
    conversation_item(org, "cv-billing-1", application="billing")
    conversation_item(org, "cv-billing-2", application="billing", minutes_ago=90)
    mine = [conversation_item(org, f"cv-onboarding-{n}", application="onboarding", minutes_ago=10 + n) for n in (1, 2)]
    person = limited("oli", org, Role.OPERATOR, **ONBOARDING_ONLY)

    page = queue_page(user=person)
    assert {row.review_id for row in page.rows} == {review.pk for review in mine}
    assert page.total == 2 and page.applications == ["onboarding"]
    html = client_for(person).get(reverse("queue")).content.decode()
    for outside in ("secret-draft", "Pricing memo", "cv-billing", "billing"):
        assert outside not in html, outside
    claimed = [claim_next(user=person).review_id, claim_next(user=person).review_id]
    assert sorted(claimed) == sorted(review.pk for review in mine)
    assert claim_next(user=person) is None  # the drafts and billing items wait for others


def test_a_claim_stops_working_when_the_membership_stops_reaching_the_item(org):
    review = conversation_item(org, "cv-billing", application="billing")
    person = limited("bea", org, Role.OPERATOR, applications=["billing"], drafts=False)
    claim_take(user=person, review_id=review.pk)
    Membership.objects.filter(user=person).update(applications=["onboarding"])
    with pytest.raises(Refused):
        claim_extend(user=person, review_id=review.pk)
    with pytest.raises(Refused) as refused:
        claim_take(user=person, review_id=review.pk)
    assert refused.value.code == "not_found"
    assert Claim.objects.filter(review=review, ended_at__isnull=True).count() == 1  # nothing else written


def test_a_limited_readers_figures_are_those_of_their_part_of_the_org_alone(org, fake_llm, operator):
    """Every section, from the rollup, equals the whole-org figures of a world holding onboarding's conversations
    alone (their counters only): no number carries anything of billing or of the drafts."""
    build_world(org, fake_llm, operator)
    whole = world_scope(org)
    reach = Reach(org.pk, frozenset({"onboarding"}), drafts=False)
    scope = scope_for(org, since=whole.as_query()["from"], until=whole.as_query()["to"], reach=reach)
    part = {key: n for key, n in live_counters(org_ids=[org.pk]).items() if reach.covers(key[1], key[3])}
    mine = dashboard_figures(scope)
    alone = dashboard_figures(whole, rows=part)
    for section in SECTIONS:
        assert _counted(mine[section]) == _counted(alone[section]), section
    waiting = Review.objects.waiting().filter(org=org, application="onboarding").order_by("finished_at").first()
    assert mine["queue"]["oldest_waiting_since"] == waiting.finished_at
    everything = dashboard_figures(whole)
    assert mine["quality"]["total"] != everything["quality"]["total"]
    assert mine["gate"]["total"]["pass"] == 0 < everything["gate"]["total"]["pass"]
    assert mine["staleness"]["stale"] == {"conversation": 1, "draft": 0}  # c7 is onboarding's
    assert [app["application"] for app in mine["quality"]["by_application"]] == ["onboarding"]
    assert mine["staleness"]["last_pass"] is None and not mine["staleness"]["whole_org"]


READ_BESIDE = {"rollup", "last_pass", "whole_org", "mismatched", "mismatched_checked_at", "evaluation_export",
               "oldest_waiting_since", "oldest_wait_seconds"}  # fmt: skip


def _counted(section: dict) -> dict:
    """A section's figures from the counters: without what is read beside them (the rollup's freshness and check,
    the grading passes, the export, the queue's head, which `rows` cannot stand in for)."""
    return {key: value for key, value in section.items() if key not in READ_BESIDE}


def test_a_limited_stakeholders_page_lists_and_exports_show_nothing_of_the_rest(org, fake_llm, operator, client_for):
    world = build_world(org, fake_llm, operator)
    person = limited("sol", org, Role.STAKEHOLDER, **ONBOARDING_ONLY)
    client = client_for(person)
    scope = world_scope(org).as_query()
    html = client.get(reverse("dashboard"), {"org": org.slug, **scope}).content.decode()
    assert "billing" not in html and "d-pass" not in html

    listed = client.get(reverse("dashboard_reviews"), {"org": org.slug, "kind": "any", "set": "stale", **scope})
    ids = set(map(int, re.findall(r'data-review="(\d+)"', listed.content.decode())))
    assert ids == {world.reviews["c7"].pk}
    exported = client.get(reverse("dashboard_export"), {"org": org.slug, **scope, "format": "csv"})
    rows = list(csv.DictReader(io.StringIO(b"".join(exported.streaming_content).decode())))
    assert rows and {row["application"] for row in rows} == {"onboarding"}
    reachable = Review.objects.counting().filter(org=org, kind="conversation", application="onboarding")
    assert len(rows) == reachable.filter(week__isnull=False).count()
    drafts = client.get(reverse("dashboard_export"), {"org": org.slug, **scope, "kind": "draft", "format": "csv"})
    assert b"".join(drafts.streaming_content).decode().count("\n") == 1  # the header alone
    refused = client.get(reverse("dashboard"), {"org": org.slug, "application": "billing"})
    assert refused.status_code == 400 and b"billing" not in refused.content.split(b"<main")[0]


def test_a_whole_org_membership_beside_a_limited_one_reads_the_whole_org(org, client_for):
    draft_item(org, "a-draft")
    person = limited("max", org, Role.OPERATOR, applications=["billing"], drafts=False)
    Membership.objects.create(user=person, org=org, role=Role.STAKEHOLDER)
    assert queue_page(user=person).rows == []  # the queue is the operator membership's
    html = client_for(person).get(reverse("dashboard")).content.decode()
    assert '<select name="application"><option value="">all</option>' in html  # a whole-org reader's, not "of yours"

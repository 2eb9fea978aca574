"""Each review is filed under the item's values of the org's dimensions when it is graded, never moved, and books
its counters under each of them as under the whole cell: a slice's counters equal a recount of its reviews."""

from collections import Counter

import pytest
from django.urls import reverse
from django.utils import timezone

from grading.dashboard.figures import counters_for, dashboard_figures, scope_for
from grading.models import Review
from grading.models.reach import Reach
from grading.reviews.rollups import live_counters, rollups_rebuild, slice_of, slices_seen, stored_counters
from grading.reviews.services import PersonVerdict, decision_record
from reviewer.models import Membership, Role
from tests.builders.conversations import upsert
from tests.builders.people import make_person
from tests.builders.releases import build_releases
from tests.builders.world import W48, conversation_payload

pytestmark = pytest.mark.django_db


@pytest.fixture
def releases(org, fake_llm):
    return build_releases(org, fake_llm)


def _recount(org, release: str) -> Counter:
    """The check counters of one release, counted from its reviews' own rows."""
    counts: Counter = Counter()
    for review in Review.objects.counting().filter(org=org, slice__contains={"release": release}):
        for check, answer in review.checks.items():
            counts[(check, answer["verdict"])] += 1
    return counts


def test_it_files_each_review_under_the_items_values_of_the_dimensions_and_no_other_name(releases):
    review = releases.reviews[0]
    review.refresh_from_db()
    assert review.slice == {"release": "2.3", "environment": "prod"}  # `model` is metadata, not a dimension


def test_a_slices_counters_equal_a_recount_of_the_reviews_filed_under_it(releases, org):
    stored = stored_counters(org_ids=[org.pk])
    assert stored == live_counters(org_ids=[org.pk])
    for release in ("2.3", "2.4"):
        sliced = slice_of(stored, f"release={release}")
        booked = Counter({(key[6], key[7]): n for key, n in sliced.items() if key[5] == "check"})
        assert booked == _recount(org, release)
    assert _recount(org, "2.4")[("grounded", "fail")] == 6


def test_the_whole_cell_is_the_sum_of_one_dimensions_slices_when_every_item_carries_it(releases, org):
    stored = stored_counters(org_ids=[org.pk])
    whole = Counter({key: n for key, n in slice_of(stored).items() if key[5] == "check"})
    parts = Counter()
    for release in ("2.3", "2.4"):
        parts.update({key: n for key, n in slice_of(stored, f"release={release}").items() if key[5] == "check"})
    assert whole == parts


def test_a_sliced_page_reads_the_same_figures_from_the_counters_as_from_a_recount(releases, org):
    scope = scope_for(org, since="2026-W48", until="2026-W48", slices=["release=2.4"])
    from_rollup = dashboard_figures(scope)
    recounted = dashboard_figures(scope, rows=live_counters(org_ids=[org.pk]))
    # The oldest wait is counted to the moment each was read, the recount a second or so later; what it counts from
    # (oldest_waiting_since) is compared with the rest of the queue's figures.
    waited = from_rollup["queue"].pop("oldest_wait_seconds"), recounted["queue"].pop("oldest_wait_seconds")
    assert waited[0] is not None and 0 <= waited[1] - waited[0] <= 5
    for section in ("quality", "agreement", "queue"):
        assert from_rollup[section] == recounted[section], section
    quality = from_rollup["quality"]
    assert quality["checks"]["grounded"] == {"pass": 4, "fail": 6, "unknown": 0}
    assert (quality["total"]["passed"], quality["total"]["failed"], quality["total"]["unknown"]) == (3, 5, 2)
    assert counters_for(scope).rows  # read from the slice's own counters


def test_changing_an_items_metadata_moves_no_review_and_no_counter(releases, org, fake_llm):
    before = stored_counters(org_ids=[org.pk])
    payload = conversation_payload("r0", "billing", W48)
    payload["metadata"] = {"release": "2.5", "environment": "prod"}
    upsert(org, payload)
    review = Review.objects.get(pk=releases.reviews[0].pk)
    assert review.slice == {"release": "2.3", "environment": "prod"} and review.state == "current"
    assert stored_counters(org_ids=[org.pk]) == before
    assert rollups_rebuild(org_id=org.pk).drifted == 0  # the rebuild files it where the review was filed too


def test_a_decision_on_a_sliced_review_books_its_slices_as_the_rebuild_counts_them(releases, org, operator):
    waiting = Review.objects.waiting().filter(org=org, slice__contains={"release": "2.4"}).first()
    asked = {check: "fail" for check in waiting.checks}
    decision_record(
        review_id=waiting.pk,
        decided_by=operator,
        decided_at=timezone.now(),
        verdict=PersonVerdict(checks=asked, note="no"),
    )
    assert stored_counters(org_ids=[org.pk]) == live_counters(org_ids=[org.pk])
    decided = slice_of(stored_counters(org_ids=[org.pk]), "release=2.4")
    assert sum(n for key, n in decided.items() if key[5] == "decision") == 1


def test_a_reader_limited_to_other_applications_is_offered_no_value_booked_only_outside_their_reach(
    releases, org, client_for
):
    whole = slices_seen(reach=Reach(org.pk))
    assert "release=2.4" in whole and "environment=staging" in whole
    assert slices_seen(reach=Reach(org.pk, applications=frozenset({"onboarding"}), drafts=True)) == []
    assert slices_seen(reach=Reach(org.pk, applications=frozenset({"billing"}), drafts=False)) == whole

    elsewhere = make_person("elsewhere")
    Membership.objects.create(user=elsewhere, org=org, role=Role.STAKEHOLDER, applications=["onboarding"])
    page = client_for(elsewhere).get(reverse("dashboard"), {"org": org.slug})
    assert page.status_code == 200 and b"release=2.4" not in page.content

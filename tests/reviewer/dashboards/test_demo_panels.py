"""The demo's data fills every panel of the dashboard (the README promises a demo that shows the product). One seeding
for the module (`demo_org`)."""

import pytest
from django.urls import reverse

from grading.dashboard.compare import comparison, slices_checked
from grading.dashboard.figures import dashboard_figures, scope_for
from grading.reviews.rollups import live_counters, stored_counters
from reviewer.demo import demo_seed

pytestmark = pytest.mark.django_db


def test_the_demo_fills_every_panel_of_the_dashboard(demo_org, client_for):
    org = demo_org
    figures = dashboard_figures(scope_for(org))
    quality, gate, staleness, agreement, queue = (
        figures[s] for s in ("quality", "gate", "staleness", "agreement", "queue")
    )
    assert quality["total"]["passed"] and quality["total"]["resolved"] > quality["total"]["passed"]
    assert quality["total"]["unknown"] and quality["total"]["not_scorable"]
    assert quality["total"]["thumbs_up"] and quality["total"]["thumbs_down"]
    assert len([w for w in quality["by_week"] if w["resolved"]]) >= 6  # a trend, not a point
    assert all(gate["total"][part] for part in ("pass", "fail", "human", "error", "repaired_pass"))
    assert gate["findings"] and all(s["n"] for s in gate["sub_scores"].values())
    assert gate["decisions"]["approve"] + gate["decisions"]["reject"]
    assert gate["time_to_verdict"]["machine"]["n"] and gate["time_to_verdict"]["human"]["n"]
    assert staleness["judge_errors"]["draft"] and staleness["tokens"]["prompt"] and staleness["stale"]
    assert staleness["rollup"]["last_rebuild"] is not None and staleness["mismatched"] == {
        "conversation": 0,
        "draft": 0,
    }
    for kind in ("conversation", "draft"):
        samples = agreement[kind]["samples"]
        for sample in ("audit", "label", "unsure"):
            assert any(check["n"] for check in samples[sample]["checks"].values()), (kind, sample)
        people = agreement[kind]["people"]["label"]["checks"].values()
        assert any(p["items"] for p in people) and any(p["unanimous"] < p["items"] for p in people), kind
    # Audited conversations are answered by two people: agreement between them, with its pair's Cohen's kappa.
    answered = agreement["conversation"]["people"]["audit"]["checks"]["grounded"]
    assert answered["items"] and answered["unanimous"] < answered["items"] and answered["pairs"]
    audit = agreement["conversation"]["samples"]["audit"]["checks"]["all_checks"]
    assert 0 < audit["agreed"] < audit["n"]  # the demo operator sometimes disagrees
    assert queue["waiting"] and queue["decisions_by_operator"]
    assert stored_counters(org_ids=[org.pk]) == live_counters(org_ids=[org.pk])
    from reviewer.models import Role
    from tests.builders.people import make_person

    page = client_for(make_person("a-stakeholder", org, Role.STAKEHOLDER)).get(reverse("dashboard"))
    assert page.status_code == 200 and "No pairs yet" not in page.content.decode()
    # Its conversations carry two releases, and grounding is worse in the newer: the comparison shows it.
    scope = scope_for(org)
    compared = comparison(scope, slices_checked(scope, dimension="release", a="2.3", b="2.4"))
    grounded = next(row for row in compared["rows"] if row["check"] == "grounded")
    assert compared["a"]["reviews"] and compared["b"]["reviews"]
    assert grounded["difference"] < 0 and grounded["significant"]


@pytest.mark.slow
def test_seeding_the_history_twice_changes_no_figure(demo_org):
    org = demo_org
    before = stored_counters(org_ids=[org.pk])
    demo_seed()
    assert stored_counters(org_ids=[org.pk]) == before

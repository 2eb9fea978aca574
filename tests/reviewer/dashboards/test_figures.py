"""Every figure of the dashboard, on the page and in the JSON, equals an independent recomputation over the rows;
the rollup behind them equals a live GROUP BY after every kind of write, and a rebuild puts drift right."""

import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from django.contrib.auth import get_user_model
from django.core.serializers.json import DjangoJSONEncoder
from django.urls import reverse
from django.utils import timezone

from grading.api.keys import api_key_create
from grading.checks.definitions import CONVERSATION_DEFAULTS
from grading.core.weeks import monday
from grading.dashboard.figures import dashboard_figures, scope_for
from grading.models import ItemKind, Org, Review, Rollup
from grading.reviews.rollups import live_counters, rollups_rebuild, stored_counters
from grading.reviews.versions import criteria_new_version, criteria_publish
from tests.builders.module_world import kept_for_module
from tests.builders.people import persona_operator, persona_org
from tests.builders.world import World, build_world, expected_agreement, expected_quality, iso, world_scope

CHECKS = CONVERSATION_DEFAULTS.keys  # what a version asks that names no checks of its own

pytestmark = pytest.mark.django_db


@dataclass(frozen=True)
class WorldRows:
    """The module's world by id: each test reads it afresh (`org`, `operator`, `world`)."""

    org_id: int
    operator_id: int
    review_ids: dict[str, int]


@pytest.fixture(scope="module")
def _world_built(django_db_setup, django_db_blocker, fake_llm_server) -> Iterator[WorldRows]:
    """The world, built once for the module's tests (`kept_for_module`: what a test writes, a rebuild, a
    publication, a key, is gone before the next). Building it for every test was most of the module's time. The org
    and the operator are the suite's personas."""
    with kept_for_module(django_db_blocker):
        org = persona_org()
        operator = persona_operator(org)
        fake_llm_server.reset()
        world = build_world(org, fake_llm_server, operator)
        fake_llm_server.reset()
        yield WorldRows(org.pk, operator.pk, {key: review.pk for key, review in world.reviews.items()})


@pytest.fixture
def org(_world_built: WorldRows, db) -> Org:
    return Org.objects.get(pk=_world_built.org_id)


@pytest.fixture
def operator(_world_built: WorldRows, db):
    return get_user_model().objects.get(pk=_world_built.operator_id)


@pytest.fixture
def world(_world_built: WorldRows, org) -> World:
    return World(org, {key: Review.objects.get(pk=pk) for key, pk in _world_built.review_ids.items()})


def test_the_rollup_kept_by_the_writes_equals_a_live_group_by_over_the_raw_tables(world, org):
    assert Rollup.objects.filter(org=org).exists()
    assert stored_counters(org_ids=[org.pk]) == live_counters(org_ids=[org.pk])


def test_it_shows_the_same_figures_from_the_counters_summed_over_the_weeks_as_from_each_weeks_counters(world, org):
    """A page reads most counters summed over its weeks by the database; the same counters read week by week (as
    stored, one per cell and week) must give every figure alike."""
    scope = world_scope(org)
    summed = dashboard_figures(scope)
    week_by_week = dashboard_figures(scope, rows=stored_counters(org_ids=[org.pk]))
    assert len(summed["weeks"]) > 1
    for section in ("quality", "gate", "agreement"):
        assert summed[section] == week_by_week[section], section
    for queue in (summed["queue"], week_by_week["queue"]):
        queue.pop("oldest_wait_seconds")  # each read's own clock
    assert summed["queue"] == week_by_week["queue"]
    assert summed["staleness"]["stale"] == week_by_week["staleness"]["stale"]
    assert summed["staleness"]["tokens"] == week_by_week["staleness"]["tokens"]


def test_quality_counts_passes_over_resolved_with_unknowns_beside_by_application_and_iso_week(world, org):
    figures = dashboard_figures(world_scope(org))["quality"]
    expected = expected_quality(org, figures_weeks := [row["week"] for row in figures["by_week"]])
    assert figures_weeks[:2] == ["2026-W46", "2026-W47"]
    for row in figures["by_application"]:
        counts = expected["by_app"][row["application"]]
        assert (row["passed"], row["resolved"], row["unknown"]) == (
            counts["passed"],
            counts["resolved"],
            counts["unknown"],
        )
        for name in CHECKS:
            assert row["checks"][name] == {v: counts[f"{name}:{v}"] for v in ("pass", "fail", "unknown")}
        assert (row["thumbs_up"], row["thumbs_down"]) == (counts["thumbs_up"], counts["thumbs_down"])
    assert {row["application"] for row in figures["by_application"]} == set(expected["by_app"])
    for row in figures["by_week"]:
        counts = expected["by_week"][row["week"]]
        assert (row["passed"], row["resolved"], row["unknown"]) == (
            counts["passed"],
            counts["resolved"],
            counts["unknown"],
        )
    # The hand count of the world: billing c1 c4 pass, c2 c8 fail, c3 unknown; onboarding c5 pass, c6 unknown.
    total = figures["total"]
    assert (total["passed"], total["resolved"], total["unknown"], total["quality"]) == (3, 5, 2, 0.6)
    billing = next(row for row in figures["by_application"] if row["application"] == "billing")
    assert (billing["passed"], billing["resolved"], billing["unknown"], billing["errors"]) == (2, 4, 1, 1)


def test_a_second_either_side_of_midnight_on_sunday_lands_in_its_own_iso_week(world, org):
    weeks = {row["week"]: row for row in dashboard_figures(world_scope(org))["quality"]["by_week"]}
    # W47: c1 (pass), c2 (Sunday 23:59:30, fail), c5 (pass). W48: c3 (Monday 00:00:00, unknown), c4, c6, c8.
    assert (weeks["2026-W47"]["passed"], weeks["2026-W47"]["resolved"], weeks["2026-W47"]["unknown"]) == (2, 3, 0)
    assert (weeks["2026-W48"]["passed"], weeks["2026-W48"]["resolved"], weeks["2026-W48"]["unknown"]) == (1, 2, 2)


def test_stale_superseded_and_trial_reviews_never_count(world, org):
    figures = dashboard_figures(world_scope(org))
    assert world.reviews["c7"].state == "stale"
    assert figures["staleness"]["stale"] == {"conversation": 1, "draft": 0}
    # c8's first review (a pass) is history; its second (complete fail) counts. The trial's 999 tokens never count.
    billing = next(row for row in figures["quality"]["by_application"] if row["application"] == "billing")
    assert billing["checks"]["complete"]["fail"] == 1
    judged = Review.objects.filter(org=org).exclude(state="trial").exclude(usage={})
    assert figures["staleness"]["tokens"]["prompt"] == sum(r.usage.get("prompt_tokens", 0) for r in judged)
    assert figures["staleness"]["tokens"]["judged_reviews"] == judged.filter(usage__has_key="prompt_tokens").count()


def test_the_gate_figures_equal_a_recount_of_the_draft_reviews(world, org):
    gate = dashboard_figures(world_scope(org))["gate"]
    drafts = list(Review.objects.counting().filter(org=org, kind=ItemKind.DRAFT))
    routes = Counter(r.route for r in drafts)
    repaired = sum(1 for r in drafts if r.route == "pass" and r.repairs and r.repairs.get("applied"))
    assert gate["total"] == {
        "pass": routes["pass"], "fail": routes["fail"], "human": routes["human"], "error": routes["error"],
        "repaired_pass": repaired,
    }  # fmt: skip
    assert gate["total"] == {"pass": 2, "fail": 1, "human": 1, "error": 1, "repaired_pass": 1}
    findings = Counter(code for r in drafts for code in {f["code"] for f in r.findings})
    assert {f["code"]: f["reviews"] for f in gate["findings"]} == dict(findings)
    assert "banned_word" in findings
    scored = [r for r in drafts if r.sub_scores]
    for name in ("aeo", "writing", "org_fit"):
        assert gate["sub_scores"][name]["n"] == len(scored)
        assert gate["sub_scores"][name]["mean"] == pytest.approx(sum(r.sub_scores[name] for r in scored) / len(scored))
    assert gate["decisions"] == {"approve": 1, "reject": 1, "send_back": 0}
    assert gate["time_to_verdict"]["machine"]["n"] == routes["pass"] + routes["fail"] + routes["human"]
    assert gate["time_to_verdict"]["human"]["n"] == 2


def test_agreement_pairs_equal_the_decisions_and_labels_read_directly(world, org):
    agreement = dashboard_figures(world_scope(org))["agreement"]
    expected = expected_agreement(org)
    for (kind, sample, check), pairs in expected.items():
        figure = agreement[kind]["samples"][sample]["checks"][check]
        categories = figure["categories"]
        table = {(m, h): figure["confusion"][i][j] for i, m in enumerate(categories) for j, h in enumerate(categories)}
        assert {pair: n for pair, n in table.items() if n} == dict(pairs), (kind, sample, check)
    audit = agreement["conversation"]["samples"]["audit"]["checks"]
    # c1: every check agreed; c4: grounded pass by the machine, fail by the person.
    assert (audit["grounded"]["n"], audit["grounded"]["agreed"]) == (2, 1)
    assert (audit["all_checks"]["n"], audit["all_checks"]["agreed"]) == (6, 5)
    unsure = agreement["conversation"]["samples"]["unsure"]["checks"]["complete"]
    assert unsure["confusion"][2][0] == 1  # c3: the machine's unknown, the person's pass
    drafts = agreement["draft"]["samples"]
    assert drafts["audit"]["checks"]["pass_fail"]["confusion"] == [[0, 1], [0, 0]]  # d-pass rejected
    assert drafts["unsure"]["checks"]["pass_fail"]["confusion"] == [[0, 0], [1, 0]]  # d-band leaned fail, approved
    assert drafts["label"]["checks"]["pass_fail"]["confusion"] == [[0, 0], [0, 1]]  # d-fail labelled fail


def test_queue_health_counts_what_waits_and_who_decided_per_iso_week(world, org, operator):
    queue = dashboard_figures(world_scope(org))["queue"]
    assert queue["depth"] == {"conversation": 1, "draft": 0}  # c6
    assert queue["oldest_waiting_since"] == world.reviews["c6"].finished_at
    by_week = {(row["week"], row["operator"]): row["decisions"] for row in queue["decisions_by_operator"]}
    assert by_week == {("2026-W48", operator.username): 4, ("2026-W49", operator.username): 1}


def test_publishing_new_criteria_moves_every_counting_review_to_stale_without_touching_the_rollup(
    world, org, criteria_admin
):
    before = stored_counters(org_ids=[org.pk])
    draft = criteria_new_version(org=org, kind=ItemKind.CONVERSATION, author=criteria_admin)
    criteria_publish(version=draft, actor=criteria_admin)
    assert stored_counters(org_ids=[org.pk]) == before
    figures = dashboard_figures(world_scope(org))
    assert figures["quality"]["total"]["scored"] == 0
    counting = Review.objects.filter(org=org, kind=ItemKind.CONVERSATION, state__in=["current", "waiting", "decided"])
    assert figures["staleness"]["stale"]["conversation"] == counting.count() + 1  # and c7, stale before


def test_a_rebuild_counts_the_drift_and_puts_it_right(world, org):
    clean = rollups_rebuild(org_id=org.pk)
    assert clean.drifted == 0 and clean.mismatched == {"conversation": 0, "draft": 0}
    Rollup.objects.filter(org=org, metric="route", key1="pass").update(value=999)
    repaired = rollups_rebuild(org_id=org.pk)
    assert repaired.drifted == Rollup.objects.filter(org=org, metric="route", key1="pass").count()
    assert stored_counters(org_ids=[org.pk]) == live_counters(org_ids=[org.pk])


def _text(html: str, element_id: str) -> str:
    start = html.index(f'id="{element_id}"')
    end = html.find('class="card', start)
    block = html[start : end if end > 0 else None]
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", block))


def test_the_page_shows_the_figures_and_each_number_links_to_the_reviews_it_counted(
    world, org, client_for, stakeholder
):
    scope = world_scope(org)
    query = scope.as_query() | {"org": org.slug}
    client = client_for(stakeholder)
    html = client.get(reverse("dashboard"), query).content.decode()
    total = dashboard_figures(scope)["quality"]["total"]
    assert f"{total['passed']} / {total['resolved']} resolved pass every check" in _text(html, "kpi-quality")
    assert f"{total['unknown']} of {total['scored']} unknown, not counted" in _text(html, "kpi-quality")
    assert "2 pass · 1 fail · 1 human" in _text(html, "kpi-gate")
    assert "<svg" in html and "<polyline" in html
    links = re.findall(r'href="(/dashboard/reviews/\?[^"]+)"', html)
    assert links
    for link in {link.replace("&amp;", "&") for link in links}:
        page = client.get(link)
        assert page.status_code == 200, link
    # The KPI's passes link lists exactly the reviews counted as passes.
    passed_link = re.search(r'id="kpi-quality".*?href="([^"]+)"', html, re.S).group(1).replace("&amp;", "&")
    listed = set(map(int, re.findall(r'data-review="(\d+)"', client.get(passed_link).content.decode())))
    assert listed == {world.reviews[k].pk for k in ("c1", "c4", "c5")}


def test_the_json_api_returns_the_same_figures_as_the_page(world, org, client):
    key = api_key_create(org=org, name="stakeholder tools").plaintext
    scope = world_scope(org)
    response = client.get("/api/v1/dashboard", scope.as_query(), HTTP_AUTHORIZATION=f"Bearer {key}")
    assert response.status_code == 200
    body = response.json()
    expected = json.loads(json.dumps(dashboard_figures(scope), cls=DjangoJSONEncoder))
    # The oldest wait is counted to the moment each was asked, a second or so apart; what it counts from is equal.
    waited = body["queue"].pop("oldest_wait_seconds"), expected["queue"].pop("oldest_wait_seconds")
    assert waited[0] is not None and 0 <= waited[1] - waited[0] <= 5
    for section in ("quality", "gate", "agreement", "queue"):
        assert body[section] == expected[section], section
    assert body["staleness"]["stale"] == expected["staleness"]["stale"]
    one = client.get("/api/v1/dashboard/agreement", scope.as_query(), HTTP_AUTHORIZATION=f"Bearer {key}").json()
    assert one["agreement"] == expected["agreement"] and "quality" not in one


def test_the_json_api_names_a_bad_week_and_an_unknown_section(org, client):
    key = api_key_create(org=org, name="tools").plaintext
    auth = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
    bad = client.get("/api/v1/dashboard", {"from": "last week"}, **auth)
    assert bad.status_code == 400 and "from" in bad.json()["detail"]
    assert client.get("/api/v1/dashboard/nonsense", **auth).status_code == 404
    assert client.get("/api/v1/dashboard").status_code == 401


def test_an_application_filter_narrows_the_conversation_figures_only(world, org):
    scope = scope_for(org, since="2026-W46", until=iso(monday(timezone.now())), application="onboarding")
    figures = dashboard_figures(scope)
    assert [row["application"] for row in figures["quality"]["by_application"]] == ["onboarding"]
    assert (figures["quality"]["total"]["passed"], figures["quality"]["total"]["unknown"]) == (1, 1)
    assert figures["gate"]["total"]["pass"] == 2


def test_weeks_outside_the_range_are_left_out(world, org):
    figures = dashboard_figures(scope_for(org, since="2026-W48", until="2026-W48"))
    assert figures["weeks"] == ["2026-W48"]
    assert (figures["quality"]["total"]["passed"], figures["quality"]["total"]["resolved"]) == (1, 2)

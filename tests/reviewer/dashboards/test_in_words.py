"""The stakeholder's first screen reads in words (issue 41): quality with its unknowns, the gate's outcomes, what
changed since the week before, and agreement said as "4 times in 5", each number leading to what it counts; the
statistics stay, folded under their sections with a plain reading each; the application filter offers the reader's
applications and refuses one the org does not have; no link answers a signed-in reader with "Unauthorized"."""

import re
from html import unescape

import pytest
from django.urls import reverse
from django.utils import timezone

from grading.core.weeks import monday
from grading.dashboard.figures import (
    GATE_METRICS,
    PAGE_METRICS,
    QUEUE_METRICS,
    SECTIONS,
    SERVICE_METRICS,
    STATISTICS_METRICS,
    agreement_figures,
    agreement_headline,
    counters_for,
    dashboard_figures,
)
from reviewer.dashboards.display import times_in
from reviewer.dashboards.service import service_figures
from reviewer.dashboards.views.dashboard import PAGE_APART
from tests.builders.world import build_world, iso, world_scope

pytestmark = pytest.mark.django_db


def test_a_share_reads_aloud():
    assert [times_in(share) for share in (0.8, 0.9, 0.5, 0.33, 0.97, 0.02, None)] == [
        "4 times in 5",
        "9 times in 10",
        "1 time in 2",
        "3 times in 10",
        "nearly always",
        "almost never",
        "",
    ]


def test_the_first_screen_says_the_figures_in_words_and_folds_the_statistics(
    client_for, org, fake_llm, operator, stakeholder
):
    build_world(org, fake_llm, operator)
    figures = dashboard_figures(world_scope(org))
    # The page reads only the counters its first screen shows, and they say what every counter says; so do the
    # counters of each section it loads apart, of what that section shows.
    page, every = counters_for(world_scope(org), metrics=PAGE_METRICS), counters_for(world_scope(org))
    assert {key[5] for key in every.rows} - {key[5] for key in page.rows}  # the statistics' counters left out
    sections = [section for section in SECTIONS if section not in PAGE_APART]
    read = [dashboard_figures(world_scope(org), counters=c, sections=sections) for c in (page, every)]
    assert read[0] | {"generated_at": None} == read[1] | {"generated_at": None}
    ticking = {"oldest_wait_seconds": None}  # read from the clock
    for metrics, section in ((QUEUE_METRICS, "queue"), (GATE_METRICS, "gate")):
        apart = dashboard_figures(world_scope(org), counters=counters_for(world_scope(org), metrics=metrics))
        assert apart[section] | ticking == figures[section] | ticking
    service = service_figures(world_scope(org), counters=counters_for(world_scope(org), metrics=SERVICE_METRICS))
    assert service == service_figures(world_scope(org))
    assert agreement_headline(page) == agreement_headline(every)
    whole = agreement_figures(every)
    for part, metrics in STATISTICS_METRICS.items():  # so does each statistics section, from its part's counters
        alone = agreement_figures(counters_for(world_scope(org), metrics=metrics), parts=(part,))
        assert {kind: figures[part] for kind, figures in alone.items()} == {k: f[part] for k, f in whole.items()}
    url = f"{reverse('dashboard')}?org={org.slug}&from=2026-W46&to={iso(monday(timezone.now()))}"
    html = client_for(stakeholder).get(url).content.decode()
    words = html.split('id="in-words"', 1)[1].split("</ul>", 1)[0]
    total = figures["quality"]["total"]
    text = re.sub(r"<[^>]+>", "", words)
    assert f"Conversations: {total['passed']} of the {total['resolved']} whose checks all resolved" in text
    assert f"{total['unknown']} more wait" in text
    gate = figures["gate"]["total"]
    assert f"the gate passed {gate['pass']}, failed {gate['fail']} and sent {gate['human']} to people" in text
    judge = figures["agreement"]["conversation"]["samples"]["audit"]["checks"]["all_checks"]
    assert f"the judge gives people's answer {times_in(judge['percent'])}" in text
    assert "Since 2026-W" in text
    assert len(re.findall(r'<a href="/dashboard/reviews/\?', words)) >= 6  # the numbers lead to what they count
    card = re.sub(r"<[^>]+>", "", html.split('id="kpi-agreement"', 1)[1].split("</div></div>", 1)[0])
    assert f"of {judge['n']} audited answers the judge gave people's" in card and "κ 0" not in card  # no bare κ
    # The statistics are still there, folded, each section with its plain reading, loaded when it is opened (a
    # page of its own without JavaScript).
    for section, of in (("judge-against-people", "judge"), ("people-against-people", "people")):
        folded = re.search(f'<details class="stats" id="{section}" hx-get="([^"]+)" hx-trigger="toggle once"', html)
        assert folded and f'<a href="{folded.group(1)}">open them on a page of their own</a>' in html
        url = unescape(folded.group(1))
        assert f"of={of}" in url and "from=2026-W46" in url
        statistics = client_for(stakeholder).get(url, HTTP_HX_REQUEST="true").content.decode()
        assert '<div class="card agreement' in statistics and "<html" not in statistics
        assert "κ" in client_for(stakeholder).get(url).content.decode()


def test_a_statistics_section_refuses_what_it_cannot_read_and_names_the_field(client_for, org, stakeholder):
    client = client_for(stakeholder)
    for query, field in (({"of": "kappa"}, "of"), ({"of": "judge", "from": "2026-W99"}, "from")):
        response = client.get(reverse("dashboard_statistics"), {"org": org.slug, **query}, HTTP_HX_REQUEST="true")
        assert response.status_code == 400 and f"<b>{field}</b>" in response.content.decode()


def test_the_application_filter_offers_the_orgs_applications_and_refuses_a_typo(
    client_for, org, fake_llm, operator, stakeholder
):
    build_world(org, fake_llm, operator)
    client = client_for(stakeholder)
    html = client.get(reverse("dashboard"), {"org": org.slug}).content.decode()
    options = re.findall(r'<option value="([^"]*)"', html.split('name="application"', 1)[1].split("</select>")[0])
    assert options == ["", "billing", "onboarding"]
    assert "/api/v1/dashboard?" not in html  # an API key's link, which answered a signed-in reader "Unauthorized"
    response = client.get(reverse("dashboard"), {"org": org.slug, "application": "biling"})
    assert response.status_code == 400
    assert "application" in response.content.decode() and "biling" in response.content.decode()


def test_a_week_with_nothing_resolved_is_said_in_words_not_as_a_dash(client_for, org, fake_llm, operator, stakeholder):
    build_world(org, fake_llm, operator)  # conversations in 2026-W47 and W48 only
    client = client_for(stakeholder)

    def change(weeks: str) -> str:
        start, end = weeks.split(" to ")
        html = client.get(reverse("dashboard"), {"org": org.slug, "from": start, "to": end}).content.decode()
        return re.sub(r"<[^>]+>", "", html.split('id="words-change">', 1)[1].split("</li>", 1)[0])

    assert "in 2026-W48 quality was 50% (from 67%)" in change("2026-W47 to 2026-W48")
    quiet = change("2026-W48 to 2026-W49")
    assert "in 2026-W49 no conversation had every check resolved (quality was 50% in 2026-W48)" in quiet
    assert "–" not in quiet
    assert "in 2026-W47 quality was 67% (none had every check resolved in 2026-W46)" in change("2026-W46 to 2026-W47")

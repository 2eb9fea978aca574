"""The list behind a number: exactly the reviews the number counted, a page at a time; a confusion table's cells
lead to the items the machine and the people disagreed on."""

import re
from datetime import UTC, date, datetime
from html import escape, unescape
from urllib.parse import parse_qs, urlsplit

import pytest
from django.db.models import DateField
from django.db.models.functions import TruncWeek
from django.urls import reverse

from grading.checks.definitions import CONVERSATION_DEFAULTS
from grading.conversations.grader import conversation_grade
from grading.dashboard.figures import dashboard_figures, scope_for
from grading.dashboard.labels import LabelIn, labels_record
from grading.models import CriteriaVersion, ItemKind, Review, SlotsFor
from grading.reviews.rollups import live_counters, stored_counters
from grading.reviews.services import PersonVerdict, answer_record, decision_record, review_audit_mark
from grading.reviews.versions import criteria_active
from reviewer.dashboards.reads import PAGE_SIZE
from reviewer.models import Role
from tests.builders.conversations import llm_judge, upsert, verdicts_reply
from tests.builders.dashboard_page import card_loaded
from tests.builders.people import make_person
from tests.builders.queue_items import bulk_draft_items
from tests.builders.world import W48, build_world, conversation_payload, world_scope

CHECKS = CONVERSATION_DEFAULTS.keys  # what a version asks that names no checks of its own

pytestmark = pytest.mark.django_db


def _listed(client, url: str) -> set[int]:
    return set(map(int, re.findall(r'data-review="(\d+)"', client.get(url).content.decode())))


def _links(html: str, element_id: str) -> dict[str, str]:
    start = html.index(f'id="{element_id}"')
    block = html[start : html.find('class="card', start + 1)]
    return {unescape(text.strip()): unescape(url) for url, text in re.findall(r'<a href="([^"]+)">([^<]+)</a>', block)}


def _statistics(client, org, scope_query: dict, of: str) -> str:
    """A statistics section of the dashboard (judge or people), as the page loads it when it is opened."""
    query = {"org": org.slug, **scope_query, "of": of}
    return client.get(reverse("dashboard_statistics"), query, HTTP_HX_REQUEST="true").content.decode()


def test_a_confusion_cell_lists_the_items_the_machine_and_the_person_disagreed_on(
    org, fake_llm, operator, client_for, stakeholder
):
    world = build_world(org, fake_llm, operator)
    client = client_for(stakeholder)
    html = _statistics(client, org, world_scope(org).as_query(), "judge")
    block = html[html.index('id="agreement-conversation-audit"') :]
    block = block[: block.index("</table>\n  </table>") if "</table>\n  </table>" in block else block.index("</div>")]
    cells = re.findall(r'<td class="disagree"><a href="([^"]+)">(\d+)</a>', block)
    assert cells, "the audit sample has a disagreement"
    for url, count in cells:
        listed = _listed(client, unescape(url))
        assert len(listed) == int(count)
    grounded = [unescape(url) for url, _ in cells if "check=grounded" in url]
    assert _listed(client, grounded[0]) == {world.reviews["c4"].pk}
    drafts = html[html.index('id="agreement-draft-audit"') :]
    url = re.search(r'<td class="disagree"><a href="([^"]+)">1</a>', drafts).group(1)
    assert _listed(client, unescape(url)) == {world.reviews["d-pass"].pk}


def test_the_gate_and_staleness_numbers_list_what_they_counted(org, fake_llm, operator, client_for, stakeholder):
    world = build_world(org, fake_llm, operator)
    client = client_for(stakeholder)
    html = client.get(reverse("dashboard"), {"org": org.slug, **world_scope(org).as_query()}).content.decode()
    stale = re.search(r'conversations <a href="([^"]+)">1</a>', html).group(1)
    assert _listed(client, unescape(stale)) == {world.reviews["c7"].pk}
    errors = re.search(r'<code>JudgeRejected</code>: <a href="([^"]+)">1</a>', html).group(1)
    assert len(_listed(client, unescape(errors))) == 1
    gate = card_loaded(client, html, "gate-weeks")  # the gate's weeks and findings load apart
    finding = re.search(r'<code>banned_word</code></td><td><a href="([^"]+)">1</a>', gate).group(1)
    assert _listed(client, unescape(finding)) == {world.reviews["d-fail"].pk}
    repaired = re.search(r'<a href="([^"]+)">1</a> repaired then passed', html).group(1)
    assert _listed(client, unescape(repaired)) == {world.reviews["d-repaired"].pk}


def test_a_long_list_is_read_a_page_at_a_time(org, client_for, stakeholder):
    reviews = bulk_draft_items(org, PAGE_SIZE + 7)
    Review.objects.update(week=TruncWeek("finished_at", output_field=DateField()))
    client = client_for(stakeholder)
    url = reverse("dashboard_reviews") + f"?org={org.slug}&kind=draft&route=human"
    first = client.get(url).content.decode()
    seen = set(map(int, re.findall(r'data-review="(\d+)"', first)))
    assert len(seen) == PAGE_SIZE
    older = unescape(re.search(r'<a href="(\?[^"]+)">older', first).group(1))
    second = client.get(reverse("dashboard_reviews") + older).content.decode()
    rest = set(map(int, re.findall(r'data-review="(\d+)"', second)))
    assert seen.isdisjoint(rest) and seen | rest == {r.pk for r in reviews} and "older ›" not in second


HOSTILE_APPLICATION = '"><script>alert(1)</script><a href="/x">x</a>&route=fail#top'


def test_a_hostile_application_name_is_text_on_the_dashboard_and_its_links_carry_it_whole(
    org, fake_llm, client_for, stakeholder
):
    """An application name is whatever the source sent. It is shown as text, and every link that filters by it
    carries exactly it as one parameter: it cannot close an attribute, add markup or smuggle a filter of its own."""
    conversation = upsert(org, conversation_payload("h1", HOSTILE_APPLICATION, W48)).conversation
    fake_llm.script(verdicts_reply(["m1", "m2"], grounded="pass", complete="pass", usable="pass"))
    review = conversation_grade(conversation_id=conversation.pk, judge=llm_judge(fake_llm))
    client = client_for(stakeholder)
    html = client.get(reverse("dashboard"), {"org": org.slug, **world_scope(org).as_query()}).content.decode()

    assert "<script>" not in html and '<a href="/x">' not in html
    assert escape(HOSTILE_APPLICATION) in html
    filtering = [unescape(href) for href in re.findall(r'href="([^"]+)"', html) if "application=" in href]
    assert filtering, "the dashboard links the application's figures to their reviews"
    for href in filtering:
        query = parse_qs(urlsplit(href).query)
        assert query["application"] == [HOSTILE_APPLICATION]
        assert len(query.get("route", [])) <= 1 and "top" not in urlsplit(href).fragment
    passed = next(href for href in filtering if parse_qs(urlsplit(href).query).get("route") == ["pass"])
    assert _listed(client, passed) == {review.pk}


def test_a_page_scoped_to_a_hostile_application_carries_it_whole_in_its_export_links(org, client_for, stakeholder):
    """The page scoped to one application (chosen from the org's own) links its exports; those links are built like
    the others, so the name reaches the export as one whole parameter and cannot add a filter or cut the query
    short. The page links no API address: it answered a signed-in reader "Unauthorized"."""
    upsert(org, conversation_payload("h1", HOSTILE_APPLICATION, W48))
    client = client_for(stakeholder)
    query = {"org": org.slug, **world_scope(org).as_query(), "application": HOSTILE_APPLICATION}
    html = client.get(reverse("dashboard"), query).content.decode()

    exports = [unescape(href) for href in re.findall(r'href="([^"]+)"', html) if "/dashboard/export/" in href]
    assert len(exports) == 3
    for link in exports:
        url = urlsplit(link)
        assert (url.path, url.fragment) == (reverse("dashboard_export"), "")
        assert parse_qs(url.query)["application"] == [HOSTILE_APPLICATION]
    assert "/api/v1/dashboard" not in " ".join(re.findall(r'href="([^"]+)"', html))


def test_people_against_people_counts_the_items_several_labellers_labelled_and_lists_those_they_split_on(
    org, fake_llm, client_for, stakeholder
):
    reviews = {}
    for external_id in ("c1", "c2", "c3"):
        conversation = upsert(org, conversation_payload(external_id, "billing", date(2026, 11, 18))).conversation
        fake_llm.script(verdicts_reply(["m1", "m2"]))
        reviews[external_id] = conversation_grade(conversation_id=conversation.pk, judge=llm_judge(fake_llm))
    answers = {"c1": ("fail", "fail", "fail"), "c2": ("pass", "fail", "pass"), "c3": ("pass", "pass")}
    labels_record(org=org, labels=[
        LabelIn(item=item, check="grounded", verdict=verdict, labeller=labeller)
        for item, verdicts in answers.items() for labeller, verdict in zip(("ann", "bo", "cy"), verdicts, strict=False)
    ], source="test")  # fmt: skip

    scope = scope_for(org, since="2026-W46", until="2026-W49")
    people = dashboard_figures(scope)["agreement"]["conversation"]["people"]["label"]["checks"]["grounded"]
    assert (people["items"], people["answers"], people["unanimous"]) == (3, 8, 2)
    # P: 1, 1/3, 1 -> 7/9; shares pass 4/8, fail 4/8 -> Pe 1/2; kappa = (7/9 - 1/2) / (1/2).
    assert people["fleiss_kappa"] == pytest.approx(5 / 9)
    # The judge said pass on grounded for every item; the labellers agreed on c1 (fail) and c3 (pass), split on c2.
    assert (people["judge"]["n"], people["judge"]["agreed"]) == (2, 1)
    assert stored_counters(org_ids=[org.pk]) == live_counters(org_ids=[org.pk])

    client = client_for(stakeholder)
    html = _statistics(client, org, scope.as_query(), "people")
    links = _links(html, "people-conversation-label")
    assert _listed(client, links["1"]) == {reviews["c2"].pk}  # split on: the disagreement first
    assert _listed(client, links["3"]) == {review.pk for review in reviews.values()}


def test_people_against_people_counts_the_queues_answers_once_every_place_is_answered_and_lists_the_split(
    org, fake_llm, client_for, stakeholder
):
    """Two people answer each audit item blind: they agree on c1, split on grounded in c2 (adjudicated), and only
    one has answered c3, whose answers stay out of every figure until its last place is answered."""
    criteria_active(org=org, kind=ItemKind.CONVERSATION)
    CriteriaVersion.objects.filter(org=org, kind=ItemKind.CONVERSATION, is_active=True).update(
        slots=2, slots_for=SlotsFor.AUDIT
    )
    reviews = {}
    for external_id in ("c1", "c2", "c3"):
        conversation = upsert(org, conversation_payload(external_id, "billing", date(2026, 11, 18))).conversation
        fake_llm.script(verdicts_reply(["m1", "m2"]))  # the judge passes every check
        reviews[external_id] = conversation_grade(conversation_id=conversation.pk, judge=llm_judge(fake_llm))
    review_audit_mark(review_ids=[review.pk for review in reviews.values()])
    ann, bo, cy = (make_person(name, org, Role.OPERATOR) for name in ("ann", "bo", "cy"))
    every_pass = dict.fromkeys(CHECKS, "pass")
    answered_at = datetime(2026, 11, 24, 9, tzinfo=UTC)
    for external_id, person, checks in (
        ("c1", ann, every_pass),
        ("c1", bo, every_pass),
        ("c2", ann, every_pass),
        ("c2", bo, every_pass | {"grounded": "fail"}),
        ("c3", ann, every_pass | {"grounded": "fail"}),
    ):
        answer_record(
            review_id=reviews[external_id].pk,
            person=person,
            answered_at=answered_at,
            verdict=PersonVerdict(checks=checks, note="Read it."),
        )
    adjudication = PersonVerdict(checks=every_pass | {"grounded": "fail"}, note="The amount is invented.")
    decision_record(review_id=reviews["c2"].pk, decided_by=cy, decided_at=answered_at, verdict=adjudication)

    scope = scope_for(org, since="2026-W46", until="2026-W49")
    people = dashboard_figures(scope)["agreement"]["conversation"]["people"]
    assert set(people["audit"]["checks"]) == set(CHECKS)  # answered check by check: no pass_fail of the whole
    grounded = people["audit"]["checks"]["grounded"]
    assert (grounded["items"], grounded["answers"], grounded["unanimous"]) == (2, 4, 1)
    assert grounded["percent"] == pytest.approx(0.5)
    # The judge passed grounded on both; the verdicts people gave the items: pass (agreed), fail (adjudicated).
    assert (grounded["judge"]["n"], grounded["judge"]["agreed"]) == (2, 1)
    assert people["audit"]["checks"]["complete"]["percent"] == pytest.approx(1.0)
    assert people["unsure"]["checks"]["grounded"]["items"] == people["label"]["checks"]["grounded"]["items"] == 0
    # Cohen's kappa for ann and bo, the one pair: rows ann's verdicts, columns bo's; c3 (one answer) is not in it.
    (pair,) = grounded["pairs"]
    assert (pair["people"], pair["n"], pair["agreed"]) == ([ann.pk, bo.pk], 2, 1)
    assert pair["confusion"][0] == [1, 1, 0]  # ann said pass on both; bo pass on one, fail on the other
    assert stored_counters(org_ids=[org.pk]) == live_counters(org_ids=[org.pk])

    client = client_for(stakeholder)
    html = _statistics(client, org, scope.as_query(), "people")
    links = _links(html, "people-conversation-audit")
    assert "check=grounded" in links["1"] and _listed(client, links["1"]) == {reviews["c2"].pk}
    assert _listed(client, links["2"]) == {reviews["c1"].pk, reviews["c2"].pk}
    assert "Cohen's κ, two named people on the items both answered: ann &amp; bo" in html
    listed = client.get(links["1"]).content.decode()
    assert "in the audit sample, answered in the queue by everyone asked on grounded where they gave" in listed

"""Blind review holds on every surface: while people decide an audit item nobody sees what the machine said of it,
and while places are open nobody sees another person's answer (nor the answer it replaced); a reader always sees
their own (grading/reviews/blind.py). Each surface that leaked has a test; the walk opens every page, partial and
export as each persona and looks for the words planted in what must stay hidden."""

import csv
import io
import json
from collections.abc import Iterator

import pytest
from django.contrib.auth import get_user_model
from django.db.models import DateField
from django.db.models.functions import TruncWeek
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from grading.api.keys import api_key_create
from grading.models import CriteriaTrial, ItemKind, Org, Review
from grading.monitors.evaluate import monitor_evaluate
from grading.monitors.services import WINDOW_HOURS_MAX
from grading.reviews.versions import criteria_new_version
from tests.builders.blind_world import REPLACED_NOTE, BlindWorld, answer_note, blind_world, machine_said
from tests.builders.module_world import kept_for_module
from tests.builders.monitored import monitor
from tests.builders.page_matrix import PAGES, url_routes
from tests.builders.people import persona_org
from tests.builders.tokens import token_of

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def _world_built(django_db_setup, django_db_blocker) -> Iterator[BlindWorld]:
    """The world, built once for the module's tests (`kept_for_module`: what a test writes, a key, a criteria
    version, a trial, is gone before the next). The org is the suite's persona."""
    with kept_for_module(django_db_blocker):
        built = blind_world(persona_org())
        Review.objects.update(week=TruncWeek("finished_at", output_field=DateField()))
        yield built


@pytest.fixture
def world(_world_built: BlindWorld, db) -> BlindWorld:
    """The module's world, its rows read afresh for the test, its planted words the test's own."""
    built = _world_built
    return BlindWorld(
        org=Org.objects.get(pk=built.org.pk),
        reviews={tag: Review.objects.get(pk=review.pk) for tag, review in built.reviews.items()},
        people={name: get_user_model().objects.get(pk=person.pk) for name, person in built.people.items()},
        hidden={word: set(readers) for word, readers in built.hidden.items()},
        shown=set(built.shown),
    )


def signed_in(person) -> Client:
    client = Client()
    client.force_login(person)
    return client


def text_of(response) -> str:
    return b"".join(response.streaming_content).decode() if response.streaming else response.content.decode()


# --- each surface that leaked ---------------------------------------------------------------------------------


def test_an_answer_given_again_shows_neither_it_nor_the_one_it_replaced_to_anyone_else(world):
    half = world.reviews["half"]
    pages = [
        reverse("review_detail", args=[half.pk]),
        reverse("criteria_item", args=["conversation", half.conversation_id]),
    ]
    for person in ("bo", "carl", "lee", "ada"):
        for url in pages:
            page = text_of(signed_in(world.people[person]).get(url))
            assert REPLACED_NOTE not in page and answer_note("ann", "half") not in page, (person, url)
    own = text_of(signed_in(world.people["ann"]).get(pages[0]))
    assert answer_note("ann", "half") in own and REPLACED_NOTE in own  # her answer, and the trail of it


def test_the_audit_page_its_csv_and_the_api_show_no_answer_while_places_are_open(client, world):
    admin = signed_in(world.people["ada"])
    page = text_of(admin.get(reverse("audit"), {"org": world.org.slug, "action": "answer"}))
    exported = text_of(admin.get(reverse("audit_csv"), {"org": world.org.slug, "action": "answer"}))
    key = api_key_create(org=world.org, name="audit reader").plaintext
    over_api = [
        text_of(client.get("/api/v1/audit-events", {"action": "answer", **extra}, HTTP_AUTHORIZATION=f"Bearer {key}"))
        for extra in ({}, {"format": "csv"})
    ]
    for text in (page, exported, *over_api):
        assert REPLACED_NOTE not in text and answer_note("ann", "half") not in text
    events = json.loads(over_api[0])["events"]
    half = [event for event in events if event["item"]["id"] == world.reviews["half"].conversation_id]
    assert [event["action"] for event in half] == ["answer.replace", "answer.create"]
    assert all(not {"outcome", "checks", "replaced"} & set(event["detail"]) for event in half)
    split = [event for event in events if event["item"]["id"] == world.reviews["split"].conversation_id]
    assert {event["detail"]["outcome"] for event in split} == {"pass", "fail"}  # every place answered: shown


def test_the_dashboards_lists_and_exports_say_nothing_the_machine_said_of_an_item_people_decide_blind(world):
    reader = signed_in(world.people["sam"])
    listed = reader.get(reverse("dashboard_reviews"), {"org": world.org.slug})
    rows = {row.pk: row for row in listed.context["page"].rows}
    for tag in ("open", "half", "split"):
        assert rows[world.reviews[tag].pk].verdicts_hidden
    assert not rows[world.reviews["agreed"].pk].verdicts_hidden
    page = listed.content.decode()
    for tag in ("open", "half", "split"):
        assert f"reason-{tag}" not in page
    assert "reason-agreed" in page

    by_machine = reader.get(
        reverse("dashboard_reviews"), {"org": world.org.slug, "check": "complete", "verdict": "unknown"}
    )
    assert [row.pk for row in by_machine.context["page"].rows] == [world.reviews["agreed"].pk]
    assert by_machine.context["page"].withheld == 3
    assert b'id="withheld"' in by_machine.content

    exported = text_of(reader.get(reverse("dashboard_export"), {"org": world.org.slug, "format": "csv"}))
    cells = {row["item"]: row for row in csv.DictReader(io.StringIO(exported))}
    for tag in ("open", "half", "split"):
        row = cells[f"cv-{tag}"]
        assert (row["route"], row["reason"], row["check_complete"], row["labels"]) == ("", "", "", ""), tag
    assert (cells["cv-agreed"]["route"], cells["cv-agreed"]["check_complete"]) == ("human", "unknown")
    assert json.loads(cells["cv-split"]["answers"])[1]["note"] == answer_note("bo", "split")
    assert cells["cv-half"]["answers"] == ""
    for line in text_of(
        reader.get(reverse("dashboard_export"), {"org": world.org.slug, "format": "jsonl", "route": "human"})
    ).splitlines():
        assert json.loads(line)["item"] in ("cv-agreed",)  # picked by the machine's route: the blind ones withheld


def test_the_reviews_export_over_the_api_is_the_pages_for_the_person_and_for_a_key_shows_no_open_answer(client, world):
    ann = world.people["ann"]
    query = {"format": "jsonl"}
    page = text_of(signed_in(ann).get(reverse("dashboard_export"), {"org": world.org.slug, **query}))
    token = token_of(ann, world.org)
    over_api = text_of(client.get("/api/v1/reviews/export", query, HTTP_AUTHORIZATION=f"Bearer {token}"))
    assert over_api == page and answer_note("ann", "half") in page  # her own answer, as on the page

    key = api_key_create(org=world.org, name="export reader").plaintext
    by_key = text_of(client.get("/api/v1/reviews/export", query, HTTP_AUTHORIZATION=f"Bearer {key}"))
    rows = {row["item"]: row for row in map(json.loads, by_key.splitlines())}
    assert answer_note("ann", "half") not in by_key and rows["cv-half"]["answers"] is None  # a place is open
    for tag in ("open", "half", "split"):
        assert (rows[f"cv-{tag}"]["route"], rows[f"cv-{tag}"]["reason"]) == (None, None), tag
        assert machine_said(tag) not in by_key
    assert rows["cv-agreed"]["route"] == "human"
    refused = client.get("/api/v1/reviews/export", {"check": "nope"}, HTTP_AUTHORIZATION=f"Bearer {key}")
    assert refused.status_code == 400 and [e["field"] for e in refused.json()["errors"]] == ["query.check"]


def test_an_audit_items_row_in_the_queue_is_coloured_by_nothing_the_machine_said(world):
    queue = signed_in(world.people["carl"]).get(reverse("queue"))
    rows = {row.review_id: row for row in queue.context["page"].rows}
    row = rows[world.reviews["open"].pk]
    assert (row.blind, row.reason, row.reason_label) == (True, "", "audit sample")
    page = queue.content.decode()
    assert '<span class="pill">audit sample</span>' in page
    assert '<span class="pill unknown">audit sample</span>' not in page
    assert '<span class="pill human">audit sample</span>' not in page


def test_no_reason_filter_of_the_queue_lists_or_counts_an_audit_item(world):
    Review.objects.filter(pk=world.reviews["open"].pk).update(reason="unknown_check")
    queue = signed_in(world.people["carl"]).get(reverse("queue"), {"reason": "unknown_check"})
    assert world.reviews["open"].pk not in {row.review_id for row in queue.context["page"].rows}
    counts = {count.reason: count.count for count in queue.context["page"].counts}
    assert counts["unknown_check"] == 0


def test_the_criteria_pages_list_an_item_people_decide_blind_without_what_the_machine_said(world):
    admin = signed_in(world.people["ada"])
    blind = {world.reviews[tag].pk for tag in ("open", "half", "split", "draft")}
    draft_version = criteria_new_version(org=world.org, kind=ItemKind.DRAFT)
    version = criteria_new_version(org=world.org, kind=ItemKind.CONVERSATION)
    preview = admin.get(reverse("criteria_preview", args=[draft_version.pk]), {"n": 50})
    assert world.reviews["draft"].pk in {row.review.pk for row in preview.context["preview"].rows}
    assert preview.context["blind_reviews"] == {world.reviews["draft"].pk}
    for v in (version, draft_version):
        counted = admin.get(reverse("criteria_trial", args=[v.pk]), {"k": 20, "source": "current"})
        listed = {item.current.pk for item in counted.context["count"].items if item.current}
        assert counted.context["blind_reviews"] == listed & blind != set()
        assert b"blind-hidden" in counted.content


def test_a_readers_page_of_an_item_people_decide_blind_shows_its_evidence_and_nothing_said_of_it(world):
    reader = signed_in(world.people["sam"])

    def page(tag: str) -> str:
        return text_of(reader.get(reverse("dashboard_item", args=[world.reviews[tag].pk])))

    for tag in ("open", "half", "split", "draft"):
        shown = page(tag)
        assert 'id="blind"' in shown and f"reason-{tag}" not in shown and machine_said(tag) not in shown, tag
    half = page("half")
    assert "Please refund order 1182, it arrived broken." in half  # the evidence itself
    assert answer_note("ann", "half") not in half and REPLACED_NOTE not in half
    assert machine_said("draft-finding") not in page("draft") and "<mark" not in page("draft")
    agreed = page("agreed")  # decided: nothing is hidden any more
    assert machine_said("agreed") in agreed and answer_note("bo", "agreed") in agreed


# --- the walk -------------------------------------------------------------------------------------------------

HTMX = {"HTTP_HX_REQUEST": "true"}


def _pages(world: BlindWorld) -> dict[str, list[tuple[str, dict]]]:
    """Every page a signed-in person may GET, by URL name, with each object of the world it can name, and the
    partials htmx asks for."""
    org, reviews = world.org, world.reviews
    draft_version = criteria_new_version(org=org, kind=ItemKind.DRAFT)
    version = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    conversations = [reviews[tag].conversation_id for tag in ("open", "half", "split", "agreed")]
    trial = CriteriaTrial.objects.create(
        org=org, criteria_version=version, sample=conversations, judge_calls=4, review_ids=[None] * 4,
        finished_at=timezone.now(),
    )  # fmt: skip
    at_org = {"org": org.slug}
    watched = monitor(org, "blind-walk", figure="item_pass", check_key="", min_n=1, window_hours=WINDOW_HOURS_MAX)
    monitor_evaluate(monitor_id=watched.pk, now=timezone.now(), deliver=lambda *_: None)
    lists = [{}, {"kind": "draft"}, {"kind": "any"}, {"route": "human"}, {"check": "complete", "verdict": "unknown"},
             {"set": "stale"}, {"decided": "1"}]  # fmt: skip
    items = [("conversation", reviews[tag].conversation_id) for tag in ("open", "half", "split", "agreed")]
    items.append(("draft", reviews["draft"].draft_id))
    return {
        "queue": [(reverse("queue"), {}), (reverse("queue") + "?reason=unknown_check", {}),
                  (reverse("queue"), HTMX | {"HTTP_HX_TARGET": "queue-list"})],
        "review_detail": [
            (reverse("review_detail", args=[review.pk]), headers)
            for review in reviews.values()
            for headers in ({}, HTMX | {"HTTP_HX_TARGET": "actions"})
        ],
        "review_corrections": [(reverse("review_corrections", args=[reviews["draft"].pk]), HTMX)],
        "review_send": [(reverse("review_send", args=[review.pk]), {}) for review in reviews.values()],
        "dashboard_item": [
            (reverse("dashboard_item", args=[review.pk]), headers)
            for review in reviews.values()
            for headers in ({}, HTMX | {"HTTP_HX_TARGET": "corrections"})
        ],
        "criteria": [(reverse("criteria"), {})],
        "criteria_diff": [(reverse("criteria_diff"), {"data": {"old": version.pk, "new": version.pk}})],
        "criteria_spend": [(reverse("criteria_spend"), {})],
        "criteria_sets": [(reverse("criteria_sets"), {})],
        "criteria_version": [(reverse("criteria_version", args=[v.pk]), {}) for v in (version, draft_version)],
        "criteria_preview": [(reverse("criteria_preview", args=[draft_version.pk]), {"data": {"n": 50}})],
        "criteria_trial": [(reverse("criteria_trial", args=[v.pk]), {"data": {"k": 20, "source": "current"}})
                           for v in (version, draft_version)],
        "criteria_publish": [(reverse("criteria_publish", args=[version.pk]), {})],
        "criteria_trial_detail": [(reverse("criteria_trial_detail", args=[trial.pk]), {}),
                                  (reverse("criteria_trial_detail", args=[trial.pk]),
                                   HTMX | {"HTTP_HX_TARGET": "trial-results"})],
        "criteria_trial_csv": [(reverse("criteria_trial_csv", args=[trial.pk]), {})],
        "criteria_item": [(reverse("criteria_item", args=[kind, pk]), {}) for kind, pk in items],
        "dashboard": [(reverse("dashboard") + f"?org={org.slug}", {})],
        "dashboard_reviews": [(reverse("dashboard_reviews"), {"data": at_org | f}) for f in lists],
        "dashboard_regrade": [(reverse("dashboard_regrade"), {"data": at_org})],
        "dashboard_certified": [(reverse("dashboard_certified"), {"data": at_org} | headers) for headers in ({}, HTMX)],
        "dashboard_statistics": [(reverse("dashboard_statistics"), {"data": at_org | {"of": of}} | headers)
                                 for of in ("judge", "people") for headers in ({}, HTMX)],
        "dashboard_queue": [(reverse("dashboard_queue"), {"data": at_org} | headers) for headers in ({}, HTMX)],
        "dashboard_service": [(reverse("dashboard_service"), {"data": at_org} | headers) for headers in ({}, HTMX)],
        "dashboard_gate": [(reverse("dashboard_gate"), {"data": at_org} | headers) for headers in ({}, HTMX)],
        "dashboard_spend": [(reverse("dashboard_spend"), {"data": at_org} | headers) for headers in ({}, HTMX)],
        "dashboard_compare": [(reverse("dashboard_compare"), {"data": at_org})],
        "dashboard_corrections": [(reverse("dashboard_corrections"), {"data": at_org} | headers)
                                  for headers in ({}, HTMX)],
        "dashboard_corrections_items": [(reverse("dashboard_corrections_items"),
                                         {"data": at_org | {"kind": kind, "what": "decided"}})
                                        for kind in ("draft", "conversation")],
        "dashboard_corrections_export": [(reverse("dashboard_corrections_export"),
                                          {"data": at_org | {"format": file_format}})
                                         for file_format in ("jsonl", "chat")],
        "dashboard_export": [(reverse("dashboard_export"), {"data": at_org | f | {"format": file_format}})
                             for f in lists for file_format in ("csv", "jsonl")],
        "audit": [(reverse("audit"), {"data": at_org | f}) for f in ({}, {"action": "answer"})],
        "audit_csv": [(reverse("audit_csv"), {"data": at_org})],
        "orgadmin_members": [(reverse("orgadmin_members"), {})],
        "orgadmin_keys": [(reverse("orgadmin_keys"), {})],
        "orgadmin_webhook": [(reverse("orgadmin_webhook"), {})],
        "orgadmin_retention": [(reverse("orgadmin_retention"), {})],
        "orgadmin_dimensions": [(reverse("orgadmin_dimensions"), {})],
        "orgadmin_tokens": [(reverse("orgadmin_tokens"), {})],
        "account_tokens": [(reverse("account_tokens"), {})],
        "erasure": [(reverse("erasure"), {})],
        "monitors": [(reverse("monitors"), {})],
        "monitor_new": [(reverse("monitor_new"), {})],
        "monitor_detail": [(reverse("monitor_detail", args=[watched.pk]), {})],
        "monitor_items": [(reverse("monitor_items", args=[watched.pk]), {})],
        "monitor_edit": [(reverse("monitor_edit", args=[watched.pk]), {})],
        "setup_targets": [(reverse("setup_targets"), {})],
        "setup_pools": [(reverse("setup_pools"), {})],
        "setup_rules": [(reverse("setup_rules"), {})],
        "setup_escalation": [(reverse("setup_escalation"), {})],
    }  # fmt: skip


def _get(client: Client, url: str, options: dict):
    options = dict(options)
    return client.get(url, options.pop("data", {}), **options)


@pytest.mark.slow
def test_the_walk_every_page_partial_and_export_shows_nothing_blind_review_hides(client, world):
    pages = _pages(world)
    signed_in_pages = {
        name for name, policy in PAGES.items() if "GET" in policy.methods and policy.kind in ("roles", "account")
    }
    assert signed_in_pages <= set(pages), f"pages the walk does not open: {sorted(signed_in_pages - set(pages))}"
    assert {route.name for route in url_routes()} >= set(pages)

    seen: set[str] = set()
    served: set[str] = set()
    for person_name, person in world.people.items():
        reader = signed_in(person)
        for name, urls in pages.items():
            for url, options in urls:
                response = _get(reader, url, options)
                assert response.status_code < 500, (person_name, url)
                if response.status_code != 200:
                    continue
                served.add(name)
                text = text_of(response)
                for planted, allowed in world.hidden.items():
                    assert planted not in text or person_name in allowed, (person_name, url, options, planted)
                seen |= {planted for planted in world.shown if planted in text}
    key = api_key_create(org=world.org, name="walker").plaintext
    for query in ({}, {"action": "answer"}, {"format": "csv"}):
        text = text_of(client.get("/api/v1/audit-events", query, HTTP_AUTHORIZATION=f"Bearer {key}"))
        assert not [planted for planted in world.hidden if planted in text], query
        seen |= {planted for planted in world.shown if planted in text}
    # A conversation's read gives the pipeline its machine verdicts; what people wrote there is blind as anywhere.
    people_wrote = {planted: allowed for planted, allowed in world.hidden.items() if "-EXPECTED-" in planted}
    for review in world.reviews.values():
        if review.conversation_id:
            path = f"/api/v1/conversations/{review.conversation.external_id}"
            text = text_of(client.get(path, HTTP_AUTHORIZATION=f"Bearer {key}"))
            assert not [planted for planted in people_wrote if planted in text], path
            seen |= {planted for planted in world.shown if planted in text}
    assert served == set(pages), f"pages no persona was served: {sorted(set(pages) - served)}"
    assert seen == world.shown, f"the walk never saw {sorted(world.shown - seen)}: it could not see a leak either"

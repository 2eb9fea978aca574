"""The corrections figures (grading/dashboard/correction_figures.py): people's decisions as corrected, approved,
rejected or sent back, per week and per check that failed, equal to a recount from the rows; the repairs Tollgate
made beside the ones people made; the API's equal to the page's function; reach and application respected."""

from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone

from grading.api.keys import api_key_create
from grading.core.weeks import iso_week, monday
from grading.dashboard.correction_figures import correction_figures
from grading.dashboard.corrections import failed_checks
from grading.dashboard.figures import scope_for
from grading.models import Correction, Decision, ItemKind, Review
from grading.models.reach import Reach
from tests.builders.conversations import PATH_IDS, verdicts
from tests.builders.corrections import draft_correction, expected_reply
from tests.builders.queue_items import conversation_item, draft_item

pytestmark = pytest.mark.django_db

LINKS = {"code": "internal_links_missing", "severity": "fixable", "message": "no internal link", "spans": []}
BANNED = {"code": "banned_phrase", "severity": "fatal", "message": "delve", "spans": []}
DASH = {"code": "banned_character", "description": "em dash replaced"}


def _decide(review: Review, person, outcome: str, *, at=None) -> Review:
    Review.objects.filter(pk=review.pk).update(state="decided")
    Decision.objects.create(
        org=review.org, review=review, outcome=outcome, decided_by=person, decided_at=at or timezone.now(), note="n"
    )
    return review


def _world(org, operator):
    """Drafts approved, rejected and sent back; one approved as corrected (it lacked a link), one correction the gate
    refused (a banned phrase left); conversations decided with and without an expected reply; drafts the gate
    repaired; a decision of twelve weeks ago."""
    _decide(draft_item(org, "d-ok"), operator, "approve")
    _decide(draft_item(org, "d-no", findings=[BANNED]), operator, "reject")
    _decide(draft_item(org, "d-back", findings=[LINKS]), operator, "send_back")
    draft_correction(
        draft_item(org, "d-fixed", findings=[LINKS]), author=operator, corrected="Fixed.", regrade_findings=[]
    )
    refused = draft_correction(
        draft_item(org, "d-refused", findings=[LINKS, BANNED]), author=operator, corrected="Still delves.",
        regrade_findings=[BANNED],
    )  # fmt: skip
    failing = verdicts(PATH_IDS, complete="fail")
    replied = _decide(conversation_item(org, "cv-replied", checks=failing), operator, "fail")
    expected_reply(replied, author=operator, reply="What it should have said.")
    _decide(conversation_item(org, "cv-passed", checks=verdicts(PATH_IDS)), operator, "pass")
    _decide(conversation_item(org, "cv-shop", application="shop", checks=failing), operator, "fail")
    for slug in ("d-rep-1", "d-rep-2"):
        draft_item(org, slug, repairs={"applied": [DASH], "diff": "", "body": ""})
    _decide(draft_item(org, "d-old"), operator, "approve", at=timezone.now() - timedelta(weeks=12))
    return refused


def _recount(org, scope) -> dict:
    """The choices counted again, decision by decision, from the ORM."""
    out = {kind: {"total": Counter(), "weeks": Counter(), "checks": Counter()} for kind in ItemKind.values}
    for decision in Decision.objects.filter(org=org).select_related("review"):
        review = decision.review
        week = monday(decision.decided_at)
        if not scope.since <= week <= scope.until or not scope.covers(review.kind, review.application):
            continue
        approved = Correction.objects.filter(regrade=review, state="approved").select_related("review").first()
        replied = Correction.objects.filter(review=review).exclude(state="refused").exists()
        read = approved.review if approved else review
        choice = "corrected" if approved or replied else {
            "approve": "approved", "pass": "approved", "reject": "rejected", "fail": "rejected",
            "send_back": "sent_back",
        }.get(decision.outcome, "unknown")  # fmt: skip
        counts = out[review.kind]
        counts["total"][choice] += 1
        counts["weeks"][(iso_week(week), choice)] += 1
        for check in failed_checks(review.kind, findings=read.findings, checks=read.checks) or [""]:
            counts["checks"][(check, choice)] += 1
    return out


def _as_counters(figures: dict) -> dict:
    out = {}
    for kind, f in figures["choices"].items():
        choices = ("corrected", "approved", "rejected", "sent_back", "unknown")
        out[kind] = {
            "total": Counter({c: f["total"][c] for c in choices if f["total"][c]}),
            "weeks": Counter({(row["week"], c): row[c] for row in f["by_week"] for c in choices if row[c]}),
            "checks": Counter({(row["check"], c): row[c] for row in f["by_check"] for c in choices if row[c]}),
        }
    return out


def test_the_choices_equal_a_recount_per_week_and_per_check_that_failed(org, operator):
    _world(org, operator)
    scope = scope_for(org)

    figures = correction_figures(scope)

    assert _as_counters(figures) == _recount(org, scope)
    drafts, conversations = figures["choices"]["draft"], figures["choices"]["conversation"]
    assert {k: drafts["total"][k] for k in ("decided", "corrected", "approved", "rejected", "sent_back")} == {
        "decided": 4,
        "corrected": 1,
        "approved": 1,
        "rejected": 1,
        "sent_back": 1,
    }  # fmt: skip  (the refused correction is no decision; the old one is out of the weeks)
    assert drafts["total"]["corrected_share"] == 0.25
    links = next(row for row in drafts["by_check"] if row["check"] == "internal_links_missing")
    assert (links["decided"], links["corrected"], links["sent_back"]) == (2, 1, 1)
    assert conversations["total"]["corrected"] == 1 and conversations["total"]["decided"] == 3
    this_week = iso_week(monday(timezone.now()))
    assert next(row for row in drafts["by_week"] if row["week"] == this_week)["decided"] == 4


def test_the_repairs_put_tollgates_beside_peoples(org, operator):
    _world(org, operator)

    repairs = {row["code"]: row for row in correction_figures(scope_for(org))["repairs"]}

    assert repairs["internal_links_missing"] == {
        "code": "internal_links_missing",
        "auto_repaired": 0,
        "people_corrected": 2,
        "people_fixed": 2,
    }  # fmt: skip  (the refused correction fixed the link, not the banned phrase)
    assert repairs["banned_phrase"] == {
        "code": "banned_phrase", "auto_repaired": 0, "people_corrected": 1, "people_fixed": 0,
    }  # fmt: skip
    assert repairs["banned_character"] == {
        "code": "banned_character", "auto_repaired": 2, "people_corrected": 0, "people_fixed": 0,
    }  # fmt: skip
    assert list(repairs) == ["internal_links_missing", "banned_phrase", "banned_character"]  # most corrected first


def test_a_limited_reach_and_an_application_count_only_their_items(org, operator):
    _world(org, operator)

    shop = correction_figures(scope_for(org, reach=Reach(org.pk, frozenset({"shop"}), drafts=False)))
    billing = correction_figures(scope_for(org, application="billing"))

    assert (
        shop["choices"]["conversation"]["total"]["decided"] == 1 and shop["choices"]["draft"]["total"]["decided"] == 0
    )
    assert shop["repairs"] == []
    assert billing["choices"]["conversation"]["total"]["decided"] == 2
    assert billing["choices"]["draft"]["total"]["decided"] == 4  # drafts have no application


def test_the_api_gives_the_same_figures(client, org, operator):
    _world(org, operator)
    key = api_key_create(org=org, name="figures")

    response = client.get("/api/v1/corrections/figures", HTTP_AUTHORIZATION=f"Bearer {key.plaintext}")

    assert response.status_code == 200
    assert response.json() == correction_figures(scope_for(org))
    bad = client.get("/api/v1/corrections/figures", {"from": "W1"}, HTTP_AUTHORIZATION=f"Bearer {key.plaintext}")
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "query.from"


def test_a_decision_on_the_corrected_review_itself_counts_as_corrected_once(org, operator):
    """Whichever review the decision is written on, the corrected one or its corrected revision, it counts once."""
    review = draft_item(org, "d-1", findings=[LINKS])
    draft_correction(review, author=operator, corrected="Fixed.", revise=False)
    _decide(review, operator, "approve")

    drafts = correction_figures(scope_for(org))["choices"]["draft"]

    assert (drafts["total"]["decided"], drafts["total"]["corrected"], drafts["total"]["approved"]) == (1, 1, 0)
    assert drafts["by_check"][0]["check"] == "internal_links_missing" and drafts["by_check"][0]["corrected"] == 1

"""After a publish, how far the re-grade has come: the figures read from the rollup's counters equal a recount
from the review rows at every point while real workers re-grade, and pages and the API show them."""

import dataclasses

import pytest
from django.db import connection, transaction
from django.urls import reverse

from grading.api.keys import api_key_create
from grading.criteria.impact import criteria_publish_planned, publish_plan
from grading.dashboard.regrade import org_regrade_progress
from grading.drafts.gate import draft_grade
from grading.models import LIVE_STATES, Draft, Review
from tests.builders.drafts import llm_draft_judge
from tests.builders.processes import wait_until
from tests.grading.criteria.test_criteria_plan import banned_word_version, draft_reply_with_usage, graded_drafts


def recount(org, version) -> dict:
    """The progress from the review rows and the rollup's counters, read in one snapshot."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        [progress] = org_regrade_progress(org)
        earlier_live = Review.objects.filter(org=org, kind=version.kind, state__in=LIVE_STATES).exclude(
            criteria_version=version
        )
        return {"read": progress, "left_in_rows": earlier_live.count()}


@pytest.mark.django_db(transaction=True)
def test_the_progress_equals_a_recount_from_the_rows_while_workers_re_grade(celery_worker, fake_llm, org):
    graded_drafts(org, fake_llm, 12)
    version = banned_word_version(org)
    fake_llm.set_default(dataclasses.replace(draft_reply_with_usage(), latency=0.2))
    plan = publish_plan(version=version)
    criteria_publish_planned(version=version, actor=None, plan_active_id=plan.active.pk, regrade_now=True)

    points = []

    def finished() -> bool:
        point = recount(org, version)
        assert (point["read"].total, point["read"].left) == (12, point["left_in_rows"])
        points.append(point)
        return not point["read"].left

    wait_until(finished, timeout=120, interval=0.02, message="the re-grade to finish")
    regraded = sorted({point["read"].done for point in points})
    assert len(regraded) >= 3 and regraded[-1] == 12  # read at several points on the way, then done
    finished = points[-1]["read"].as_json()
    assert (finished["done"], finished["regraded"], finished["seconds_left"]) == (True, 12, 0)
    midway = next(point["read"] for point in points if 0 < point["read"].done < 12)
    assert midway.per_second > 0 and midway.seconds_left == pytest.approx(midway.left / midway.per_second)


@pytest.mark.django_db
def test_the_pages_and_the_api_show_it_and_refresh_only_while_it_runs(client_for, criteria_admin, org, fake_llm):
    graded_drafts(org, fake_llm, 2)
    version = banned_word_version(org)
    plan = publish_plan(version=version)
    criteria_publish_planned(version=version, actor=criteria_admin, plan_active_id=plan.active.pk, regrade_now=False)
    client = client_for(criteria_admin)

    page = client.get(reverse("criteria_version", args=[version.pk])).content.decode()
    assert '<b class="regrade-count">0 of 2</b> re-graded' in page and 'hx-trigger="every 3s"' in page
    dashboard = client.get(reverse("dashboard")).content.decode()
    assert "0 of 2</b> re-graded" in dashboard and "time left not known yet" in dashboard
    key = api_key_create(org=org, name="stakeholder script").plaintext
    figures = client.get("/api/v1/dashboard/staleness", HTTP_AUTHORIZATION=f"Bearer {key}").json()
    [regrade] = figures["staleness"]["regrade"]
    assert (regrade["kind"], regrade["criteria_version"], regrade["regraded"], regrade["total"]) == ("draft", 2, 0, 2)
    assert (regrade["left"], regrade["done"], regrade["seconds_left"]) == (2, False, None)

    fake_llm.set_default(draft_reply_with_usage())
    for draft in Draft.objects.filter(org=org):
        draft_grade(draft_id=draft.pk, judge=llm_draft_judge(fake_llm))
    panel = client.get(reverse("dashboard_regrade"), {"org": org.slug, "kind": "draft"}).content.decode()
    assert "2 of 2</b> re-graded" in panel and ">done<" in panel and "hx-trigger" not in panel
    refused = client.get(reverse("dashboard_regrade"), {"org": org.slug, "kind": "<b>x</b>"})
    assert refused.status_code == 400 and "<b>x</b>" not in refused.content.decode()

"""Certified decisions, end to end in Chromium (issue 40): the criteria admin sets a 90% target on the draft version;
people's labels arrive through the API and the certificate is computed in the background; the version page shows
it; the next grading pass sends fewer drafts to people, and what the machine decided alone names the certificate.

Last, people decide the week's blind audit sample and the stakeholder's dashboard shows the quality rate with its
PPI++ interval, and what the certificate decided this week.

The judge is the production one at the loopback OpenAI-compatible server, which returns log-probabilities: drafts
the judge is sure of but whose score has a long tail (8 at 97%, 2 at 3%) straddle the threshold, so the fixed bands
send them to people; a certificate at 96% lets the machine decide them."""

import json

import pytest
from django.test import Client

from grading.api.keys import api_key_create
from grading.certify.services import certificates_refresh, version_judge_key
from grading.dashboard.sampling import audit_sample_send
from grading.drafts.gate import draft_grade
from grading.models import CriteriaVersion, ItemKind, Review, Route
from grading.reviews.services import PersonVerdict
from grading.reviews.versions import criteria_active
from reviewer.queue.services import claim_take, decision_create
from tests.builders.browser import signed_in_tab
from tests.builders.certified import agreeing, counted, graded_drafts
from tests.builders.drafts import draft_verdict, save_draft, setup_org_memory
from tests.builders.judges import configure_judges, judge_config
from tests.fakes.openai_server import json_reply

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SURE_WITH_A_TAIL = {"8": 0.97, "2": 0.03}  # passes at 97%, its spread straddling 7
UNSURE = {"8": 0.6, "6": 0.4}


def grading_pass(org, fake_llm, name: str) -> list:
    """Three new drafts graded as a pass grades them: two the judge is sure of, one it is not."""
    reviews = []
    for n, alternatives in enumerate((SURE_WITH_A_TAIL, SURE_WITH_A_TAIL, UNSURE)):
        fake_llm.script(json_reply(draft_verdict(8), top_logprobs=alternatives, logprob_field="overall"))
        reviews.append(draft_grade(draft_id=save_draft(org, external_id=f"{name}-{n}").pk))
    return reviews


def test_an_admin_sets_a_target_labels_arrive_and_the_next_pass_sends_fewer_drafts_to_people(
    browser, live_server, fake_llm, settings, org, criteria_admin, operator, stakeholder
):
    configure_judges(settings, default=judge_config(fake_llm))
    setup_org_memory(org)
    before = grading_pass(org, fake_llm, "before")
    assert [review.route for review in before] == [Route.HUMAN] * 3  # the fixed bands: every one straddles

    # The criteria admin sets a 90% target with 90% confidence on the active draft version.
    page = signed_in_tab(browser, live_server, criteria_admin, "/dashboard/")
    version = criteria_active(org=org, kind=ItemKind.DRAFT)
    page.goto(f"/criteria/{version.pk}/")
    certificate = page.locator("#certificate")
    assert "No target: the fixed bands route." in certificate.inner_text()
    certificate.get_by_label("agreement with people (%)").fill("90")
    certificate.get_by_label("confidence (%)").fill("90")
    certificate.get_by_role("button", name="Set the target").click()
    assert "the certificate is being computed" in page.locator(".flash").inner_text()
    assert "No certificate computed yet" in page.locator("#certificate").inner_text()
    version.refresh_from_db()
    assert (version.certify_agreement, version.certify_confidence) == (0.9, 0.9)

    # People's verdicts arrive: the QA team's labels on 40 drafts the judge was sure of, through the API.
    judge_key = version_judge_key(version)
    labelled = graded_drafts(org, agreeing(40, confidence=0.96), judge_key=judge_key, label=False)
    key = api_key_create(org=org, name="qa spreadsheet").plaintext
    body = {
        "labels": [{"item": d.external_id, "check": "pass_fail", "verdict": "pass", "labeller": "qa"} for d in labelled]
    }
    response = Client().post(
        "/api/v1/labels", json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {key}"
    )
    assert response.status_code == 201, response.content
    assert certificates_refresh(org_id=org.pk) == 1  # what the worker runs when the labels' task reaches it

    page.reload()
    shown = page.locator("#certificate").inner_text()
    assert "from 40 items people judged" in shown
    row = page.locator("#certificate tbody tr").first.inner_text()
    assert "the draft's verdict" in row and "0.960" in row and "100.0%" in row
    assert page.locator("#certificate svg polyline").count() == 1
    assert page.console_errors == []

    after = grading_pass(org, fake_llm, "after")
    assert [review.route for review in after] == [Route.PASS, Route.PASS, Route.HUMAN]  # 1 to people, not 3
    assert after[2].reason == "below_certified"
    # The certificate of the judge that graded them: the target's and the labels' tasks reach the session's workers
    # too when an earlier test started them, and their judge (another model) gets a certificate of its own, which may
    # be written after this one.
    certified = (
        CriteriaVersion.objects.get(pk=version.pk).certificates.filter(judge_key=judge_key).latest("computed_at")
    )
    assert {review.certificate_id for review in after} == {certified.pk}

    # The operator's item page says why the unsure one is theirs, and names the certificate.
    desk = signed_in_tab(browser, live_server, operator, "/queue/")
    desk.goto(f"/queue/items/{after[2].pk}/")
    assert "Below the certified confidence" in desk.locator("main").inner_text()
    assert "below what people's verdicts certify" in desk.locator("main").inner_text()
    assert f"certificate {certified.pk}" in desk.locator("dl.ident").inner_text()
    assert desk.console_errors == []

    # People decide the week's blind audit sample; the stakeholder reads the quality rate with its interval.
    for review_id in audit_sample_send(org=org, per_week=6, weeks=1, salt="walk").marked:
        review = Review.objects.get(pk=review_id)
        claim_take(user=operator, review_id=review.pk)
        decision_create(
            user=operator, review_id=review.pk, fingerprint=review.fingerprint, verdict=PersonVerdict(outcome="approve")
        )
    counted(org)  # the labelled drafts were written straight to the tables: what the grading write stores and books
    dashboard = signed_in_tab(browser, live_server, stakeholder, "/dashboard/")
    drafts = dashboard.locator('#certified-quality .certified-kind[data-kind="draft"]')
    words = drafts.locator(".certified-words").inner_text()  # swapped in by htmx once the page has loaded
    assert words.startswith("People audited 6 drafts: the quality rate is") and "(PPI++, 95%)" in words
    week = drafts.locator(".certified-week").inner_text()  # the three before the target went to people by the bands
    assert "decided 2 drafts alone under a certificate; 4 went to people (1 below the certified confidence)" in week
    assert dashboard.console_errors == []

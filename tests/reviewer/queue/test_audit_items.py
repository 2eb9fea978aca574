"""The audit sample: the fixed-rule sample goes to the queue as audit items whatever the machine decided, and an
audit item's page hides the judge's verdicts until the person decided (blind); other items show them at once."""

import re
from datetime import date, timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from grading.conversations.grader import conversation_grade
from grading.core.weeks import monday
from grading.dashboard.figures import dashboard_figures, scope_for
from grading.models import Review
from tests.builders.conversations import llm_judge, upsert
from tests.builders.queue_items import conversation_item, draft_item
from tests.builders.world import conversation_payload
from tests.fakes.openai_server import json_reply

pytestmark = pytest.mark.django_db

RATIONALE = "SECRET-RATIONALE the refund amount matches the tool result"


def graded(org, fake_llm, external_id: str, *, grounded: str, started: date):
    conversation = upsert(org, conversation_payload(external_id, "billing", started)).conversation
    checks = {name: {"verdict": verdict, "message_ids": ["m2"], "rationale": f"{RATIONALE} ({name})"}
              for name, verdict in (("grounded", grounded), ("complete", "pass"), ("usable", "pass"))}  # fmt: skip
    fake_llm.script(json_reply(checks, usage={"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}))
    return conversation_grade(conversation_id=conversation.pk, judge=llm_judge(fake_llm))


def test_the_sample_cycle_sends_its_picks_to_the_queue_whatever_the_machine_decided(org, fake_llm, operator):
    this_week = monday(timezone.now())
    reviews = [graded(org, fake_llm, f"s{i}", grounded=("pass", "fail")[i % 2], started=this_week) for i in range(4)]
    assert {r.route for r in reviews} == {"pass", "fail"} and not Review.objects.waiting().filter(org=org).exists()
    out = StringIO()
    call_command("sample_cycle", "--org", org.slug, "--per-week", "2", "--salt", "pepper", stdout=out)
    assert "2 newly sent to the queue as audit items" in out.getvalue()
    audit = list(Review.objects.filter(org=org, audit=True))
    assert len(audit) == 2 and all(r.state == "waiting" for r in audit)
    assert set(Review.objects.waiting().filter(org=org)) == set(audit)
    out = StringIO()
    call_command("sample_cycle", "--org", org.slug, "--per-week", "2", "--salt", "pepper", stdout=out)
    assert "0 newly sent" in out.getvalue()
    out = StringIO()
    call_command("sample_cycle", "--org", org.slug, "--per-week", "3", "--salt", "pepper", "--dry-run", stdout=out)
    assert "nothing sent (dry run)" in out.getvalue() and Review.objects.filter(audit=True).count() == 2


def _page(client, review) -> str:
    return client.get(reverse("review_detail", args=[review.pk])).content.decode()


def test_an_audit_items_page_shows_no_judge_verdict_before_the_decision_and_shows_it_after(
    org, fake_llm, operator, client_for
):
    review = graded(org, fake_llm, "a1", grounded="fail", started=date.today() - timedelta(days=1))
    call_command("sample_cycle", "--org", org.slug, "--per-week", "1", stdout=StringIO())
    client = client_for(operator)
    listing = client.get(reverse("queue")).content.decode()
    assert "audit sample" in listing and "verdict hidden until you decide" in listing
    client.post(reverse("review_claim", args=[review.pk]))
    html = _page(client, review)
    assert 'id="blind"' in html
    assert "SECRET-RATIONALE" not in html and "cited by" not in html
    assert not re.search(r'class="pill (pass|fail)"', html)
    # The verdict form starts from nothing the machine said: the grounded select is not preset to its fail.
    assert not re.search(r'<option value="fail" selected>', html)
    response = client.post(
        reverse("review_decide", args=[review.pk]),
        {"fingerprint": review.fingerprint, "grounded": "pass", "complete": "pass", "usable": "pass", "note": "fine"},
    )
    assert response.status_code == 302
    html = _page(client, review)
    assert 'id="blind"' not in html and "SECRET-RATIONALE" in html and 'class="pill fail"' in html
    # The person's pass against the machine's fail is one disagreement in the audit sample.
    figures = dashboard_figures(scope_for(org))
    grounded = figures["agreement"]["conversation"]["samples"]["audit"]["checks"]["grounded"]
    assert (grounded["n"], grounded["confusion"][1][0]) == (1, 1)


def test_an_item_the_machine_sent_to_people_shows_the_judges_verdicts_at_once(org, operator, client_for):
    review = conversation_item(org)
    html = _page(client_for(operator), review)
    assert 'id="blind"' not in html and 'class="pill unknown"' in html and "complete unknown" in html


# The score as a number of its own: "8.2" alone also matched a time shown on the page (17:08:38.261488).
SCORE = re.compile(r"(?<![\d.])8\.2(?![\d])")


def test_an_audit_drafts_page_hides_the_score_and_the_judges_issues_until_decided(org, operator, client_for):
    review = draft_item(org, score=8.2, reason="")
    Review.objects.filter(pk=review.pk).update(route="pass", audit=True)
    client = client_for(operator)
    client.post(reverse("review_claim", args=[review.pk]))
    html = _page(client, review)
    assert 'id="blind"' in html and "The opening warms up" not in html and not SCORE.search(html)
    assert "How do you cut support costs?" in html  # the article itself is what the person judges
    client.post(reverse("review_decide", args=[review.pk]), {"fingerprint": review.fingerprint, "outcome": "approve"})
    html = _page(client, review)
    assert "The opening warms up" in html and SCORE.search(html)

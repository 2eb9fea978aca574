"""Definitions in front of the person deciding (issue 41): each check's question and guidance beside the machine's
answer on the item page, the queue's answers in words, the trail in words with times the reader's page localises,
the judge identity whole, and no token count where none was reported."""

import re
from datetime import datetime

import pytest
from django.urls import reverse
from django.utils import timezone

from grading.reviews.services import PersonVerdict
from reviewer.queue.item_reads import identity_rows, item_page
from reviewer.queue.services import claim_take, decision_create
from tests.builders.custom_checks import POLICY_GUIDANCE, SUPPORT_CHECKS, custom_checks_item
from tests.builders.queue_items import conversation_item, draft_item

pytestmark = pytest.mark.django_db


def verdicts_card(html: str) -> str:
    """The card of the machine's verdicts: what an operator reads before the evidence, claimed or not."""
    return html.split('class="card verdicts"', 1)[1].split('class="card"', 1)[0]


def test_it_shows_each_checks_question_and_guidance_beside_the_machines_answer(client_for, operator, org):
    review = custom_checks_item(org)
    html = client_for(operator).get(reverse("review_detail", args=[review.pk])).content.decode()
    card = verdicts_card(html)
    for check in SUPPORT_CHECKS.checks:
        assert check.question in card
        for text in check.guidance.values():
            assert (text if text != POLICY_GUIDANCE else "Quotes the &lt;b&gt;refund policy&lt;/b&gt;") in card
    assert "<b>refund policy</b>" not in html  # admin-written text, shown as text
    assert re.search(r'<dt class="given">refund</dt>', card)  # the guidance of the answer the machine gave, marked


def test_the_draft_page_asks_each_sub_scores_question(client_for, operator, org):
    review = draft_item(org)
    page = item_page(review, user=operator, now=timezone.now())
    assert [(sub.label, sub.question) for sub in page.sub_scores] == [
        (check.name, check.question) for check in review.criteria_version.check_set().checks
    ]
    html = client_for(operator).get(reverse("review_detail", args=[review.pk])).content.decode()
    assert all(sub.question in verdicts_card(html) for sub in page.sub_scores)


def test_the_queue_says_the_machines_answers_in_words(client_for, operator, org):
    conversation_item(org, "cv-words")
    draft_item(org, "draft-words")
    response = client_for(operator).get(reverse("queue"))
    rows = {row.title: row for row in response.context["page"].rows}
    assert rows["cv-words"].checks == [
        ("Grounded", "pass", "pass"),
        ("Complete", "unknown", "unknown"),
        ("Usable", "pass", "pass"),
    ]
    assert rows["cv-words"].criteria_label == "conversation v1"
    assert rows["draft-words"].summary == "score 6.7 of 10"
    assert rows["draft-words"].checks == [
        ("AEO compliance", "4 of 5", ""),
        ("Writing quality", "3 of 5", ""),
        ("Org fit", "4 of 5", ""),
    ]
    html = response.content.decode()
    assert 'Complete <b class="unknown">unknown</b>' in html and "U?" not in html and "4/3/4" not in html
    assert "a check came back unknown" in html and "score in the marginal band" in html


def test_the_judge_identity_is_shown_whole_and_tokens_nobody_reported_are_not_shown(org):
    review = draft_item(org, usage={"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0})
    review.judge = {"name": "default", "backend": "heuristic", "prompt_hash": "heuristic", "temperature": 0}
    rows = {row.label: row.value for row in identity_rows(review)}
    assert rows["judge"] == "default · heuristic · prompt heuristic · t=0"
    assert "tokens" not in rows
    review.usage = {"prompt_tokens": 1025, "completion_tokens": 90}
    assert {row.label: row.value for row in identity_rows(review)}["tokens"] == "1,025 in · 90 out"


def test_the_trail_reads_in_words_with_times_the_page_can_show_in_the_readers_zone(client_for, operator, org):
    review = conversation_item(org)
    claim_take(user=operator, review_id=review.pk)
    checks = {"grounded": "pass", "complete": "fail", "usable": "pass"}
    decision_create(
        user=operator,
        review_id=review.pk,
        fingerprint=review.fingerprint,
        verdict=PersonVerdict(checks=checks, note="No."),
    )
    response = client_for(operator).get(reverse("review_detail", args=[review.pk]))
    decided, claimed = response.context["trail"].rows[:2]
    assert decided.what == "decided" and claimed.what == "claimed"
    details = dict(decided.details)
    assert set(details["checks"].split(", ")) == {"grounded pass", "complete fail", "usable pass"}
    assert details["fingerprint"] == review.fingerprint[:16] + "…"
    assert details["keep as learning"] == "no" and "claim" not in details and "criteria version" in details
    assert isinstance(dict(claimed.details)["lease until"], datetime)
    trail = response.content.decode().split('id="trail"', 1)[1]
    assert "{" not in trail.split("</table>")[0]  # no JSON
    utc_time = r'<time datetime="[^"]+\+00:00" data-local="datetime">\d\d \w{3} \d{4} \d\d:\d\d UTC</time>'
    assert re.search(utc_time, trail)

"""A scored trial's page shows its items and its changed verdicts a page at a time, with the figures over every
item and links to the pages before and after; a page number that is not one is refused."""

import re

import pytest
from django.urls import reverse

from grading.criteria.scoring import trial_score
from grading.models import Conversation, TrialSource
from grading.reviews.versions import criteria_new_version
from reviewer.criteria.views import versions
from tests.builders.scored_trials import decide, graded_conversations, scored_trial

pytestmark = pytest.mark.django_db

PASS = {"grounded": "pass", "complete": "pass", "usable": "pass"}
FAIL = {"grounded": "fail", "complete": "fail", "usable": "fail"}


def test_it_pages_a_scored_trials_items_and_changed_verdicts_and_refuses_a_page_that_is_not_one(
    org, fake_llm, criteria_admin, client_for, monkeypatch
):
    conversations = graded_conversations(org, fake_llm, dict.fromkeys(range(5), PASS))
    for conversation in conversations.values():
        decide(conversation, criteria_admin, PASS)
    version = criteria_new_version(org=org, kind="conversation", author=criteria_admin)
    trial = scored_trial(version, fake_llm, TrialSource.DECISIONS, criteria_admin, dict.fromkeys(range(5), FAIL))
    monkeypatch.setattr(versions, "TRIAL_ROWS_SHOWN", 2)
    score = trial_score(trial)  # 5 items, 15 changed verdicts (every check of every item)
    client = client_for(criteria_admin)
    url = reverse("criteria_trial_detail", args=[trial.pk])

    page = client.get(url, {"page": 3, "changed_page": 2}).content.decode()
    assert shown_items(page) == [item.item_id for item in score.items[4:6]]
    assert shown_changed(page) == [(c.item_id, c.check) for c in score.changed[2:4]]
    assert "5–5 of 5" in page and "3–4 of 15" in page and "<b>Done</b>: 5 of 5 graded" in page
    assert 'href="?page=2&amp;changed_page=2">previous' in page and 'href="?changed_page=3&amp;page=3">next' in page
    assert 'data-check="grounded" data-side="trial"' in page  # the figures, over every item
    # Read again from the stored figures, the page's items read by position from the trial's row: the same rows.
    again = client.get(url, {"page": 3, "changed_page": 2}).content.decode()
    assert (shown_items(again), shown_changed(again)) == (shown_items(page), shown_changed(page))
    assert "5–5 of 5" in again and shown_items(client.get(url, {"page": 4}).content.decode()) == []

    for bad in ({"page": "two"}, {"page": 0}, {"changed_page": -1}):
        response = client.get(url, bad)
        assert response.status_code == 400
        assert next(iter(bad)) in response.content.decode()

    # An item's id is the pipeline's text: shown as text in both lists, never as markup.
    Conversation.objects.filter(pk=score.items[0].item_id).update(external_id='<img src=x onerror="alert(1)">')
    page = client.get(url).content.decode()
    assert page.count("&lt;img src=x onerror=&quot;alert(1)&quot;&gt;") == 1 + sum(
        1 for c in score.changed[:2] if c.item_id == score.items[0].item_id
    )
    assert "<img src=x" not in page


def shown_items(page: str) -> list[int]:
    table = re.search(r'<table class="trial-table">(.*?)</table>', page, re.S).group(1)
    return [int(i) for i in re.findall(r'<tr data-item="(\d+)">', table)]


def shown_changed(page: str) -> list[tuple[int, str]]:
    table = re.search(r'<table class="trial-changed">(.*?)</table>', page, re.S).group(1)
    return [(int(i), c) for i, c in re.findall(r'<tr data-item="(\d+)" data-check="(\w+)"', table)]

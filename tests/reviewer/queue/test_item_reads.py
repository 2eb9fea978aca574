"""The item page's one read: what blind review hides is taken out of every part of the page it returns, not only
out of what a template happens to show, and the page of an item nobody hides anything of shows it all."""

import pytest
from django.utils import timezone

from reviewer.queue.item_reads import item_page
from tests.builders.blind_world import blind_world, machine_said
from tests.builders.queue_items import conversation_item, draft_item

pytestmark = pytest.mark.django_db


def test_a_blind_drafts_page_holds_nothing_of_what_the_machine_said(org):
    world = blind_world(org)
    page = item_page(world.reviews["draft"], user=world.people["ann"], now=timezone.now())
    assert page.blind
    assert (page.why, page.scale, page.sub_scores, page.findings, page.judge_issues) == ("", None, [], [], [])
    assert (page.repairs, page.diff, page.memory, page.other_reviews, page.targets) == (None, [], {}, [], None)
    assert machine_said("draft") not in str(page.article) and "<mark" not in str(page.article)
    assert page.form.initial == {"fingerprint": page.review.fingerprint}


def test_a_blind_conversations_page_holds_no_check_and_no_citation(org):
    world = blind_world(org)
    page = item_page(world.reviews["open"], user=world.people["ann"], now=timezone.now())
    assert page.blind and page.why == "" and page.evidence.checks == []
    shown = [entry.message for entry in page.evidence.path if entry.message]
    assert shown and not any(message.cited_by for message in shown)
    assert all(answer.field.initial is None for answer in page.form.check_fields())


def test_a_page_nothing_is_hidden_of_shows_the_machines_verdicts(org, operator):
    draft = item_page(draft_item(org), user=operator, now=timezone.now())
    assert not draft.blind and draft.why and draft.scale is not None and len(draft.sub_scores) == 3
    assert draft.judge_issues and draft.memory["facts"] and "<mark" in str(draft.article)
    conversation = item_page(conversation_item(org), user=operator, now=timezone.now())
    assert conversation.why and [check.verdict for check in conversation.evidence.checks].count("unknown") == 1
    assert any(entry.message and entry.message.cited_by for entry in conversation.evidence.path)
    assert conversation.scale is None  # a conversation has no score to place against a threshold

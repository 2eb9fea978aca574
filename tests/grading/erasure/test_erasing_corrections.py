"""An erasure takes the corrections of the items it erases (a corrected body, an expected reply: they hold the item's
text and the person's), counts them in its preview and its tombstone, and leaves another item's alone."""

import json

import pytest

from grading.erasure.runs import erasure_counts, erasure_preview, erasure_request, erasure_run
from grading.models import AuditEvent, Correction, ErasureScope
from tests.builders.corrections import draft_correction, expected_reply
from tests.builders.queue_items import conversation_item, draft_item

pytestmark = pytest.mark.django_db

SECRET = "the-customer-said-this"


def _erase(org, scope: str, target: str):
    return erasure_run(erasure_id=erasure_request(org=org, scope=scope, target=target).pk)


def test_erasing_a_conversation_takes_its_expected_replies_and_counts_them(org, operator):
    review = conversation_item(org, "cv-1")
    expected_reply(review, author=operator, reply=f"{SECRET}: refunded.")
    expected_reply(review, author=operator, reply=f"{SECRET}: calling the tool.", message_id="m2")
    kept = expected_reply(conversation_item(org, "cv-2"), author=operator, reply="Another item's reply.")

    preview = erasure_preview(org=org, scope=ErasureScope.CONVERSATION, target="cv-1")
    erasure = _erase(org, ErasureScope.CONVERSATION, "cv-1")

    assert preview["correction"] == 2 and erasure_counts(erasure) == preview
    assert list(Correction.objects.values_list("pk", flat=True)) == [kept.pk]
    everything_kept = json.dumps([list(AuditEvent.objects.values_list("detail", flat=True)), erasure.erased])
    assert SECRET not in everything_kept


def test_erasing_a_draft_takes_its_corrected_body_with_the_regrade_and_counts_it(org, operator):
    correction = draft_correction(draft_item(org, "d-1"), author=operator, corrected=f"{SECRET}.", regrade_findings=[])

    preview = erasure_preview(org=org, scope=ErasureScope.DRAFT, target="d-1")
    erasure = _erase(org, ErasureScope.DRAFT, "d-1")

    assert (preview["correction"], preview["review"], preview["decision"]) == (1, 2, 1)
    assert erasure_counts(erasure) == preview
    assert not Correction.objects.filter(pk=correction.pk).exists()

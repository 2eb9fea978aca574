"""The quality number, the staleness audit and the fixed-rule sample."""

import hashlib
import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from grading.conversations.grader import conversation_grade
from grading.dashboard.sampling import sample_conversations
from grading.judge.backends import HeuristicJudge
from grading.models import Feedback, Review
from grading.reviews.reads import staleness_audit
from tests.builders.conversations import message, support_conversation, upsert
from tests.builders.quality import conversation_quality

pytestmark = pytest.mark.django_db


def conversation_with_reply(org, external_id: str, reply: str, *, application: str = "billing", started=None):
    started = started or timezone.now() - timedelta(days=1)
    payload = {
        "external_id": external_id,
        "application": application,
        "closed": True,
        "messages": [
            message("u1", "user", "What is the status of order 1182?", None, 0),
            message("a1", "assistant", reply, "u1", 1),
        ],
    }
    for m in payload["messages"]:
        m["created_at"] = started.isoformat()
    conversation = upsert(org, payload).conversation
    return conversation_grade(conversation_id=conversation.pk, judge=HeuristicJudge())


def test_the_quality_number_is_passes_over_resolved_with_unknowns_beside_it_and_thumbs_apart(org):
    conversation_with_reply(org, "ok-1", "Order 1182 has shipped and will arrive soon, tracking is in your email.")
    conversation_with_reply(org, "ok-2", "Order 1182 has shipped; the courier has it now, delivery this week.")
    conversation_with_reply(org, "bad-1", "Order 1182 shipped on the 14th with 3 parcels.")  # invented figures
    conversation_with_reply(org, "unsure-1", "Shipped.")  # too short: unknown
    Feedback.objects.create(
        conversation=Review.objects.get(conversation__external_id="bad-1").conversation,
        message_external_id="a1",
        value="down",
    )
    [row] = conversation_quality(org)
    assert (row.passed, row.resolved, row.with_unknown) == (2, 3, 1)
    assert row.quality == pytest.approx(2 / 3)
    assert (row.thumbs_up, row.thumbs_down) == (0, 1)


def test_a_changed_conversation_leaves_the_quality_number_until_it_is_graded_again(org):
    conversation_with_reply(org, "ok-1", "Order 1182 has shipped and will arrive soon, tracking is in your email.")
    upsert(org, {**support_conversation("ok-1"), "application": "billing"})  # new content under the same id
    assert conversation_quality(org) == []
    assert staleness_audit(org).stale["conversation"] == 1


def test_the_sample_takes_the_k_smallest_hashes_per_application_and_week(org):
    now = timezone.now()
    for i in range(6):
        conversation_with_reply(
            org, f"s-{i}", "Order 1182 has shipped and will arrive this week, tracking sent.", started=now
        )
    conversation_with_reply(
        org,
        "other-app",
        "Order 1182 has shipped and will arrive this week, tracking sent.",
        application="onboarding",
        started=now,
    )
    cells = sample_conversations(org=org, per_week=2, weeks=8, salt="pepper", now=now)
    by_app = {cell.application: cell.external_ids for cell in cells}
    expected = sorted((f"s-{i}" for i in range(6)), key=lambda x: hashlib.sha256(("pepper" + x).encode()).hexdigest())[
        :2
    ]
    assert by_app == {"billing": expected, "onboarding": ["other-app"]}

    out = StringIO()
    call_command("sample_cycle", "--org", org.slug, "--per-week", "2", "--salt", "pepper", "--json", stdout=out)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert {line["application"]: line["external_ids"] for line in lines} == by_app

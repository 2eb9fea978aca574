"""Service-level targets give an item routed to people its due time: when graded so, when marked for the audit
sample, and again for every waiting item when the targets change; the first matching target decides."""

from datetime import timedelta
from itertools import product

import pytest
from django.utils import timezone

from grading.conversations.grader import conversation_grade
from grading.models import Review, ServiceTarget
from grading.reviews.services import review_audit_mark
from grading.reviews.targets import due_time, due_times_refresh, targets_of
from tests.builders.conversations import llm_judge, upsert, verdicts_reply
from tests.builders.queue_items import conversation_item, draft_item
from tests.builders.world import conversation_payload

pytestmark = pytest.mark.django_db


def targets(org, *rows: tuple[str, str, str, int]) -> None:
    for position, (kind, application, reason, minutes) in enumerate(rows, start=1):
        ServiceTarget.objects.create(
            org=org, position=position, kind=kind, application=application, reason=reason, minutes=minutes
        )


def test_a_review_routed_to_people_is_due_its_targets_minutes_after_routing_and_others_are_not(org, fake_llm):
    targets(org, ("conversation", "billing", "unknown_check", 30), ("conversation", "", "", 24 * 60))
    judge = llm_judge(fake_llm)
    graded = {}
    for external_id, application, usable in (("b", "billing", "unknown"), ("o", "onboarding", "unknown"),
                                             ("p", "billing", "pass")):  # fmt: skip
        conversation = upsert(org, conversation_payload(external_id, application, timezone.now())).conversation
        fake_llm.script(verdicts_reply(["m1", "m2"], usable=usable))
        graded[external_id] = conversation_grade(conversation_id=conversation.pk, judge=judge)
    b, o, p = graded["b"], graded["o"], graded["p"]
    assert b.routed_at == b.finished_at and b.due_at == b.routed_at + timedelta(minutes=30)
    assert o.due_at == o.routed_at + timedelta(hours=24)  # the first target names billing only
    assert p.route == "pass" and p.routed_at is None and p.due_at is None


def test_an_audit_item_is_due_from_its_marking(org):
    targets(org, ("", "", "audit", 60), ("draft", "", "", 10))
    review = draft_item(org, "sampled", reason="")
    Review.objects.filter(pk=review.pk).update(route="pass", state="current", routed_at=None)
    before = timezone.now()
    assert review_audit_mark(review_ids=[review.pk]) == [review.pk]
    review.refresh_from_db()
    assert review.routed_at >= before and review.due_at == review.routed_at + timedelta(minutes=60)


def test_when_the_targets_change_every_waiting_item_is_dated_again_as_the_python_rule_says(org):
    """`due_times_refresh` dates every waiting item by `due_time`, as routing does, over both kinds, two applications,
    two reasons, the audit sample and targets of every shape and order."""
    items = [conversation_item(org, f"cv-{n}", application=app, minutes_ago=10 + n)
             for n, app in enumerate(("billing", "onboarding", "billing"))]  # fmt: skip
    items += [draft_item(org, f"d-{n}", reason=reason, minutes_ago=30 + n)
              for n, reason in enumerate(("band", "spread", "band"))]  # fmt: skip
    Review.objects.filter(pk__in=[items[2].pk, items[5].pk]).update(audit=True)
    shapes = [
        [("", "", "audit", 15), ("draft", "", "band", 45), ("conversation", "onboarding", "", 90), ("", "", "", 600)],
        [("conversation", "", "", 20), ("", "billing", "", 5)],
        [("draft", "", "", 60)],
        [],
    ]
    for shape in shapes:
        ServiceTarget.objects.filter(org=org).delete()
        targets(org, *shape)
        due_times_refresh(org.pk)
        rules = targets_of(org.pk)
        for review in Review.objects.filter(pk__in=[item.pk for item in items]):
            expected = due_time(rules, kind=review.kind, application=review.application, reason=review.reason,
                                audit=review.audit, routed_at=review.routed_at)  # fmt: skip
            assert review.due_at == expected, (shape, review.kind, review.application, review.reason, review.audit)
    assert {
        due_time(targets_of(org.pk), kind=kind, application=app, reason=r, audit=a, routed_at=timezone.now())
        for kind, app, r, a in product(("draft",), ("",), ("band",), (False,))
    } == {None}  # the last shape names nothing

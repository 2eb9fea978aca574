"""A review's INSERT (grading/reviews/sql.py `review_insert`) writes the row the ORM's `Review.objects.create` writes
from the same values, and hands back the review as the ORM would read it: it prepares no model instance field by
field, so this holds it to the ORM's rules (defaults, JSON, a foreign key by instance or by id)."""

from datetime import date, timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from grading.models import ItemKind, Review, ReviewState, Route
from grading.reviews.rollups import rollups_tracking
from grading.reviews.sql import review_insert
from grading.reviews.versions import criteria_active
from tests.builders.conversations import support_conversation, upsert

pytestmark = pytest.mark.django_db


def _written(write) -> tuple[dict, Review]:
    """The row `write()` inserts (but its id), read back, and what `write()` returned; rolled back after."""
    with transaction.atomic():
        review = write()
        row = Review.objects.filter(pk=review.pk).values().get()
        transaction.set_rollback(True)
    del row["id"]
    return row, review


def _inserted(values: dict) -> tuple[dict, Review]:
    def write() -> Review:
        with rollups_tracking() as tracked:
            return review_insert(tracked, **values)

    return _written(write)


def _values(org, *, every_field: bool) -> dict:
    conversation = upsert(org, support_conversation()).conversation
    finished = timezone.now()
    values = {
        "org": org,
        "kind": ItemKind.CONVERSATION,
        "conversation": conversation,
        "fingerprint": conversation.fingerprint,
        "criteria_version": criteria_active(org=org, kind=ItemKind.CONVERSATION),
        "judge": {"name": "judge", "sampling": {"temperature": 0}},
        "judge_key": "judge-key",
        "started_at": finished - timedelta(seconds=3),
        "finished_at": finished,
        "route": Route.PASS,
        "state": ReviewState.CURRENT,
        "week": date(2026, 11, 30),
    }
    if every_field:
        values |= {
            "org_id": org.pk,  # a foreign key by its id
            "criteria_fingerprint": "criteria",
            "stages": 2,
            "route": Route.HUMAN,
            "reason": "unknown_check",
            "detail": 'a "quoted" detail',
            "checks": {"grounded": {"verdict": "unknown", "message_ids": ["m1"], "rationale": "<b>none</b>"}},
            "score": 0.5,
            "judge_score": 0.25,
            "judge_passed": False,
            "spread": 1.0,
            "sub_scores": {"aeo": 3},
            "findings": [{"code": "x", "text": "ü"}],
            "judge_issues": ["one"],
            "repairs": {"applied": []},
            "memory_used": {"facts": 2},
            "usage": {"prompt_tokens": 1000, "completion_tokens": 60},
            "confidences": {"grounded": 0.75},
            "confidence_source": "logprobs",
            "state": ReviewState.WAITING,
            "audit": True,
            "sent": "rule-1",
            "application": "billing",
            "submitted_at": finished - timedelta(minutes=1),
            "slice": {"release": "2.4"},
            "routed_at": finished,
            "due_at": finished + timedelta(hours=4),
        }
        del values["org"]
    return values


@pytest.mark.parametrize("every_field", [False, True], ids=["defaults", "every field"])
def test_the_review_insert_writes_the_row_the_orm_writes(org, every_field):
    values = _values(org, every_field=every_field)
    inserted, review = _inserted(values)
    created, _ = _written(lambda: Review.objects.create(**values))
    assert inserted == created
    # Handed back as read: every column as stored (but the id, given by the INSERT).
    assert {f.attname: getattr(review, f.attname) for f in Review._meta.concrete_fields if f.attname != "id"} == created
    assert review.pk is not None and not review._state.adding


def test_the_review_handed_back_keeps_the_related_rows_it_was_given(org, django_assert_num_queries):
    values = _values(org, every_field=False)
    _, review = _inserted(values)
    with django_assert_num_queries(0):
        assert (review.org, review.conversation) == (values["org"], values["conversation"])
        assert review.criteria_version == values["criteria_version"]


def test_a_value_for_no_field_of_a_review_is_refused(org):
    values = _values(org, every_field=False) | {"verdict": "pass"}
    with pytest.raises(TypeError, match="verdict"):
        _inserted(values)

"""Grading tasks carry a batch of items: a pass sends GRADING_BATCH_SIZE items to a task, and the task grades them
one after another. While it works, every item it has not finished counts as in flight (its lock is held), and
each item is let go, with its ticket handed back, as soon as it is done."""

from collections.abc import Iterator

import pytest
from django.db import OperationalError

from grading.inflight import grade_each, items_being_graded, lock_session_close
from grading.models import Conversation, ItemKind
from grading.planner import grading_pass
from tests.grading.conversations import support_conversation, upsert

pytestmark = pytest.mark.django_db

TASK = "task-batch"


@pytest.fixture(autouse=True)
def _lock_session() -> Iterator[None]:
    yield
    lock_session_close()  # this test process's session: the test database is dropped at the end of the run


def owed(org, count: int) -> list[int]:
    """Conversations owed a grading by the task TASK."""
    ids = [upsert(org, support_conversation(f"cv-{n}")).conversation.pk for n in range(count)]
    Conversation.objects.filter(pk__in=ids).update(grading_task_id=TASK)
    return ids


def tickets(ids: list[int]) -> list[str]:
    by_id = dict(Conversation.objects.filter(pk__in=ids).values_list("pk", "grading_task_id"))
    return [by_id[pk] for pk in ids]


def held() -> set[int]:
    return {item_id for kind, item_id in items_being_graded() if kind == ItemKind.CONVERSATION}


def test_a_pass_gives_each_batch_of_items_one_task(org, settings):
    settings.GRADING_BATCH_SIZE = 3
    for n in range(7):
        upsert(org, support_conversation(f"cv-{n}"))
    enqueued = grading_pass().enqueued_ids
    task_ids = tickets(enqueued)
    assert len(enqueued) == 7 and all(task_ids)
    assert [task_ids.count(task_id) for task_id in dict.fromkeys(task_ids)] == [3, 3, 1]


def test_a_batch_holds_every_item_it_has_not_finished_and_lets_each_go_when_done(org):
    ids = owed(org, 3)
    seen = []

    def grade(item_id: int) -> int:
        seen.append((held(), tickets(ids)))
        return item_id

    assert grade_each(ItemKind.CONVERSATION, ids, grade, task_id=TASK) == ids
    assert seen == [
        (set(ids), [TASK, TASK, TASK]),
        (set(ids[1:]), ["", TASK, TASK]),
        ({ids[2]}, ["", "", TASK]),
    ]
    assert held() == set() and tickets(ids) == ["", "", ""]


def test_one_items_failure_ends_that_item_alone_and_is_raised_after_the_rest(org):
    ids = owed(org, 3)
    graded = []

    def grade(item_id: int) -> int:
        if item_id == ids[1]:
            raise ValueError("this item cannot be graded")
        graded.append(item_id)
        return item_id

    with pytest.raises(ValueError, match="cannot be graded"):
        grade_each(ItemKind.CONVERSATION, ids, grade, task_id=TASK)
    assert graded == [ids[0], ids[2]]
    # The failed item's ticket is handed back too: the next pass tries it again, the recovery does not resend it.
    assert held() == set() and tickets(ids) == ["", "", ""]


def test_a_database_error_stops_the_batch_and_keeps_the_tickets_of_the_items_not_done(org):
    ids = owed(org, 3)

    def grade(item_id: int) -> int:
        if item_id == ids[1]:
            raise OperationalError("the connection dropped")
        return item_id

    with pytest.raises(OperationalError):
        grade_each(ItemKind.CONVERSATION, ids, grade, task_id=TASK)
    # Celery retries the task under the same id (the first item finds its review); until then they stay owed.
    assert held() == set() and tickets(ids) == ["", TASK, TASK]

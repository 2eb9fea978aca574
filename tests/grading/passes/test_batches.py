"""Grading tasks carry a batch of items: a pass sends GRADING_BATCH_SIZE items to a task, and the task grades them
one after another. While it works, every item it has not finished counts as in flight (its lock is held), and
each item is let go, with its ticket handed back, as soon as it is done."""

import threading
import time
from collections.abc import Iterator

import psycopg
import pytest
from django.db import OperationalError, connection
from django.test.utils import CaptureQueriesContext

from grading.conversations.grader import conversation_grade
from grading.models import Conversation, Draft, ItemKind
from grading.passes.planner import grading_pass, task_size
from grading.reviews.inflight import grade_each, items_being_graded, lock_key, lock_session_close
from tests.builders.conversations import PATH_IDS, llm_judge, support_conversation, upsert, verdicts_reply
from tests.builders.drafts import save_draft

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


def batch_sizes(task_ids: list[str]) -> list[int]:
    return [task_ids.count(task_id) for task_id in dict.fromkeys(task_ids)]


def test_a_pass_gives_each_batch_of_items_one_task(org, settings):
    settings.GRADING_BATCH_SIZE, settings.GRADING_CONCURRENCY = 3, 1
    for n in range(7):
        upsert(org, support_conversation(f"cv-{n}"))
    enqueued = grading_pass().enqueued_ids
    task_ids = tickets(enqueued)
    assert len(enqueued) == 7 and all(task_ids)
    assert batch_sizes(task_ids) == [3, 3, 1]


def test_a_pass_s_last_tasks_shrink_to_one_item_and_never_mix_kinds(org, settings):
    """Towards the end each task carries a share of what is left for each grader (two here), so no grader waits
    for another's long last batch; conversations are sent first, then drafts."""
    settings.GRADING_BATCH_SIZE, settings.GRADING_CONCURRENCY = 4, 2
    for n in range(7):
        upsert(org, support_conversation(f"cv-{n}"))
    drafts = [save_draft(org, external_id=f"d-{n}").pk for n in range(5)]
    result = grading_pass()
    assert batch_sizes(tickets(result.enqueued_ids)) == [4, 3]  # 12 left, then 8 (of which 3 conversations)
    draft_tasks = dict(Draft.objects.filter(pk__in=drafts).values_list("pk", "grading_task_id"))
    assert batch_sizes([draft_tasks[pk] for pk in result.enqueued_draft_ids]) == [2, 1, 1, 1]  # 5 left, 3, 2, 1
    assert set(draft_tasks.values()).isdisjoint(tickets(result.enqueued_ids))


def test_a_large_pass_ends_in_single_item_tasks_and_sends_every_item_once(settings):
    settings.GRADING_BATCH_SIZE, settings.GRADING_CONCURRENCY = 8, 64
    sizes, left = [], 2_500
    while left:
        sizes.append(task_size(left))
        left -= sizes[-1]
    assert sizes[0] == 8 and sizes == sorted(sizes, reverse=True)
    assert sizes[-127:] == [1] * 127 and sizes[-128] == 2  # fewer than two per grader left: one item a task
    assert len(sizes) < 2_500 / 5  # the batches still share Celery's cost per task


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


def test_the_review_s_own_transaction_hands_the_ticket_back_and_the_task_sends_nothing_more(org, fake_llm):
    """A written review and an item still owed one never coexist, and a review costs no statement for its ticket."""
    ids = owed(org, 2)
    fake_llm.set_default(verdicts_reply(PATH_IDS))
    judge = llm_judge(fake_llm)

    def grade(item_id: int):
        review = conversation_grade(conversation_id=item_id, judge=judge, ticket=TASK)
        assert tickets([item_id]) == [""]  # in the same commit as the review
        return review

    with CaptureQueriesContext(connection) as queries:
        graded = grade_each(ItemKind.CONVERSATION, ids, grade, task_id=TASK)
    assert [review.conversation_id for review in graded] == ids and all(r.ticket_returned for r in graded)
    assert tickets(ids) == ["", ""] and held() == set()
    assert not [q["sql"] for q in queries if q["sql"].startswith("UPDATE grading_conversation")]


def test_a_review_leaves_a_ticket_issued_since_its_task_began_to_the_newer_task(org, fake_llm):
    [item_id] = owed(org, 1)
    Conversation.objects.filter(pk=item_id).update(grading_task_id="newer-task")
    fake_llm.set_default(verdicts_reply(PATH_IDS))

    [review] = grade_each(
        ItemKind.CONVERSATION,
        [item_id],
        lambda pk: conversation_grade(conversation_id=pk, judge=llm_judge(fake_llm), ticket=TASK),
        task_id=TASK,
    )
    assert review.state == "current" and not review.ticket_returned
    assert tickets([item_id]) == ["newer-task"]


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


def test_a_batch_waits_for_a_lock_another_task_holds_holding_only_the_locks_before_it(org):
    """The free locks are taken in one statement, but only up to the first one another task holds: a later one is
    not kept while that one is waited for, so two tasks sharing items never wait for each other."""
    ids = owed(org, 3)
    first, middle, last = sorted(ids, key=lambda pk: lock_key(ItemKind.CONVERSATION, pk))
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    other_task = psycopg.connect(**params, autocommit=True)
    other_task.execute("SELECT pg_advisory_lock(%s)", [lock_key(ItemKind.CONVERSATION, middle)])
    graded: list[int] = []

    def run() -> None:
        grade_each(ItemKind.CONVERSATION, ids, graded.append, task_id=TASK)
        connection.close()

    worker = threading.Thread(target=run)
    worker.start()
    try:
        deadline = time.monotonic() + 10
        while held() != {first, middle} and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.2)  # a few of the waiting task's polls
        assert (held(), graded) == ({first, middle}, [])
    finally:
        other_task.close()
        worker.join(timeout=10)
    assert sorted(graded) == sorted(ids) and held() == set()

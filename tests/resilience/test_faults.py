"""A bad day in production, on real processes: workers killed mid-grade, Redis restarted under a pass, the
database connection cut during grading, two beats, two workers. Whatever happens, every item ends with exactly
one review that counts, none lost, none doubled, and no judge call is made twice for one piece of work."""

import dataclasses
import itertools
import json
import os
import signal
import threading
import uuid
from urllib.parse import urlsplit

import psutil
import pytest
import redis
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from django_celery_beat.models import IntervalSchedule, PeriodicTask
from kombu.transport.redis import Channel

from grading.delivery import enqueue
from grading.models import AuditEvent, Conversation, GradingRun, ItemKind, Review
from grading.passes.planner import SEND_GRACE, grading_pass, grading_recover
from grading.reviews.inflight import broker_tasks, grade_each, lock_key, lock_session_close
from reviewer import embedded
from tests.builders.conversations import PATH_IDS, support_conversation, upsert, verdicts_reply
from tests.builders.processes import broker, forget_delivered, pool_processes, task_census, wait_until
from tests.fakes.canary_tasks import canary_write
from tests.fakes.openai_server import hang_reply

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def conversations(org, count: int) -> list[int]:
    return [upsert(org, support_conversation(f"cv-{n}")).conversation.pk for n in range(count)]


def slow_verdicts(seconds: float):
    return dataclasses.replace(verdicts_reply(PATH_IDS), latency=seconds)


def all_done(ids: list[int]) -> bool:
    """Every item has a review and no task owes it one any more (a redelivered task has finished too)."""
    graded = Review.objects.filter(conversation__in=ids).values("conversation").distinct().count()
    return graded == len(ids) and not Conversation.objects.filter(pk__in=ids, queued_at__isnull=False).exists()


def assert_one_counting_review_each(ids: list[int]) -> None:
    reviews = list(Review.objects.filter(conversation__in=ids).values_list("conversation", "route"))
    assert sorted(conversation for conversation, _ in reviews) == sorted(ids)  # one each: none lost, none doubled
    assert {route for _, route in reviews} == {"pass"}
    assert Review.objects.counting().filter(conversation__in=ids).count() == len(ids)


def judging_process(app, node: str, judge_port: int) -> int | None:
    """A pool process of `node` that is inside a judge call right now (it holds a connection to the judge)."""
    for pid in pool_processes(app, node):
        try:
            sockets = psutil.Process(pid).net_connections(kind="tcp")
        except psutil.Error:
            continue
        if any(s.raddr and s.raddr.port == judge_port and s.status == psutil.CONN_ESTABLISHED for s in sockets):
            return pid
    return None


def test_three_workers_killed_mid_grade_over_200_items_leave_exactly_one_review_each(celery_worker, fake_llm, org):
    from reviewer.celery import app

    ids = conversations(org, 200)
    fake_llm.set_default(slow_verdicts(0.05))
    judge_port = urlsplit(fake_llm.base_url).port
    assert len(grading_pass().enqueued_ids) == 200
    tickets = tickets_of(ids)
    killed = []
    try:
        for reviews_before_kill in (40, 90, 140):
            wait_until(
                lambda n=reviews_before_kill: Review.objects.filter(conversation__in=ids).count() >= n,
                timeout=120,
                message=f"{reviews_before_kill} reviews",
            )
            victim = wait_until(lambda: judging_process(app, celery_worker, judge_port), message="a process mid-grade")
            os.kill(victim, signal.SIGKILL)
            killed.append(victim)
        wait_until(lambda: all_done(ids), timeout=180, message="every item graded")
    finally:
        forget_delivered(tickets)
    assert len(set(killed)) == 3
    assert_one_counting_review_each(ids)
    # Each killed process was inside a judge call: that call is made again, and nothing else is.
    assert len(fake_llm.chat_requests()) <= 200 + len(killed)


def test_a_pass_that_meets_redis_down_completes_when_it_is_back_and_a_restart_mid_grading_loses_nothing(
    celery_worker, celery_worker_log, celery_worker_logs, fake_llm, org, embedded_redis
):
    """Redis stops under a pass, then restarts mid-grading. A task the worker had taken but not started when the
    connection dropped is dropped by the worker and left delivered in Redis until the visibility timeout: beat's
    `grading_recover` (every minute, once the send grace has passed) sends it again, as it is run here."""
    from reviewer.celery import app

    ids = conversations(org, 20)
    fake_llm.set_default(slow_verdicts(0.1))
    embedded_redis.stop()
    outcome = {}

    def run_pass() -> None:
        try:
            outcome["result"] = grading_pass()
        finally:
            connection.close()

    planning = threading.Thread(target=run_pass)
    planning.start()
    try:
        # The pass has committed its run and tickets: it is sending, and waiting for the broker.
        wait_until(GradingRun.objects.exists, timeout=60, message="the pass to commit its plan")
    finally:
        embedded_redis.start()
    planning.join(timeout=90)
    run = outcome["result"].run
    assert (run.enqueued, run.backlog, run.recovered) == (20, 0, 0)
    tickets = tickets_of(ids)

    def graded_with_beats_recovery() -> bool:
        if all_done(ids):
            return True
        if not _grading_waiting():
            recovered = grading_recover(now=timezone.now() + SEND_GRACE)
            tickets.update(tickets_of(recovered[ItemKind.CONVERSATION]))
        return False

    try:
        wait_until(lambda: Review.objects.filter(conversation__in=ids).count() >= 5, timeout=60, message="5 reviews")
        embedded_redis.stop()  # mid-grading: the waiting tasks are in the append-only file
        embedded_redis.start()
        wait_until(
            graded_with_beats_recovery,
            timeout=120,
            interval=0.5,
            message="every item graded after the restart",
            explain=lambda: task_census(app, celery_worker, tickets_of(ids), celery_worker_log),
        )
    finally:
        forget_delivered(tickets)  # the acknowledgements the restart cut off would redeliver them much later
    assert_one_counting_review_each(ids)

    marker = uuid.uuid4().hex
    canary_write.apply_async((org.pk, marker), ignore_result=True)
    canary = wait_until(
        lambda: AuditEvent.objects.filter(action="test.canary", detail__marker=marker).first(),
        timeout=60,
        message="the canary task: the workers took new work after the restart",
        explain=lambda: task_census(app, celery_worker, set(), celery_worker_log),
    )
    assert canary.detail["pid"] != os.getpid()
    # Each reconnection restarts the workers' consumers, step by step: no step fails doing it, and Celery does not
    # warn of a setting chosen on purpose.
    for log_path in celery_worker_logs:
        log = log_path.read_text()
        assert "Error on restarting" not in log
        assert "worker_cancel_long_running_tasks_on_connection_loss" not in log


def _grading_waiting() -> bool:
    """Whether a grading task still waits in a queue: while one does the workers are still taking them, and a task
    taken and not started yet is not lost."""
    tasks = broker_tasks(enqueue.queue_names())
    return tasks is None or bool(tasks.waiting)


def test_a_task_that_ends_after_its_broker_connection_was_lost_is_not_acknowledged_and_the_worker_goes_on(caplog):
    """A task that ends after its worker lost the connection to Redis acknowledges on the lost connection's
    channel. kombu's Redis transport answers that with AttributeError when the channel's close did not finish (its
    pool dropped, its connection gone), not with a connection error, and a prefork worker's event loop let it out:
    the worker stopped (seen in CI after a Redis restart, its log ending in that AttributeError). The worker's
    request logs it as an acknowledgement it could not make, and the message is delivered again."""
    from celery.utils.imports import symbol_by_name
    from kombu import Connection, Queue

    from grading.tasks import grade_conversation
    from reviewer.celery import app

    queue = f"ack-probe-{uuid.uuid4().hex[:8]}"
    app.send_task(grade_conversation.name, args=(0, ""), queue=queue)
    with Connection(settings.REDIS_URL) as lost:
        channel = lost.channel()
        message = wait_until(lambda: Queue(queue)(channel).get(no_ack=False), message="the task's message")
        request = symbol_by_name(grade_conversation.Request)(
            message, on_ack=message.ack_log_error, app=app, task=grade_conversation,
            connection_errors=lost.connection_errors,
        )  # fmt: skip
        lost.collect()  # the worker's consumer drops the connection it lost
        channel._disconnect_pools()  # its pool gone, as a close cut short leaves it
        with caplog.at_level("CRITICAL"):
            request.acknowledge()
    assert request.acknowledged
    assert "Couldn't ack" in caplog.text
    assert "AttributeError" in caplog.text
    broker().delete(queue)


def test_a_worker_that_loses_redis_mid_poll_holding_an_unacknowledged_task_closes_its_connection(tmp_path):
    """A worker waits for work with a BRPOP in flight on its tasks' channel, holds a task that runs unacknowledged,
    and listens for remote control on a channel of its own (a fanout queue deleted with its consumer). When Redis
    goes, its consumer drops the connection (`collect`) and then closes it (Celery's
    `Consumer.on_connection_error_after_connected`; both steps below as it calls them). In the drop, the tasks'
    channel's close is cut short by the dead BRPOP, and the remote-control channel's by the dead Redis, before the
    tasks' channel is closed again; the drop then leaves the transport without a client. The close that follows
    restores the held task's message through that transport, and kombu's Redis transport raises AttributeError, not
    a connection error: the worker stopped ("Unrecoverable error", seen in a full run of the suite). The close now
    ignores it, as kombu ignores it when closing the connection itself; the message is delivered again when its
    visibility timeout passes. A Redis of its own, so the suite's connections never meet its stop."""
    from kombu import Consumer, Exchange, Producer, Queue
    from kombu.common import ignore_errors

    from reviewer.celery import app

    url = embedded.redis_url(tmp_path)
    try:
        queue, held = Queue("tasks"), []
        # The BRPOP waits 30 s, not kombu's 1 s, so Redis stops while it is in flight, as under a waiting worker.
        connection = app.connection_for_read(url, transport_options={"polling_interval": 30})
        Producer(connection.default_channel).publish({"task": 1}, routing_key=queue.name, declare=[queue])
        hold = Consumer(connection.default_channel, queues=[queue], callbacks=[lambda _, message: held.append(message)])
        hold.consume()
        control = Queue("control", Exchange("control", type="fanout"), auto_delete=True)
        Consumer(connection.channel(), queues=[control], callbacks=[lambda body, message: None]).consume()
        wait_until(lambda: _waiting(connection) and held, message="the task held unacknowledged, the next waited for")
        embedded.redis_stop(tmp_path)
        connection.collect(socket_timeout=1.0)
        ignore_errors(connection, connection.close)

        embedded.redis_url(tmp_path)  # back, from its append-only file
        assert redis.Redis.from_url(url).hexists("unacked", held[0].delivery_tag)  # kept for its redelivery
    finally:
        embedded.redis_stop(tmp_path)


def _waiting(connection) -> bool:
    """Take what has arrived; True once a wait for more times out, its BRPOP left in flight."""
    try:
        connection.drain_events(timeout=0.2)
    except TimeoutError:
        return True
    return False


def test_a_send_whose_connection_drops_twice_is_still_taken(monkeypatch):
    """A failover, a flaky network: the connection drops as the send pushes its task, and again as the send, on
    its new connection, writes its queue's binding (the first thing a new connection writes). The send tries
    again and Redis takes its task once; before, kombu's retry closed the channel the publish then used and the
    send raised AttributeError, an error no sender handles."""
    pushed: list[bytes] = []
    monkeypatch.setattr(redis.Redis, "lpush", dropping_once(redis.Redis.lpush, taken=pushed))
    monkeypatch.setattr(redis.Redis, "sadd", dropping_once(redis.Redis.sadd, taken=[]))
    # An org id no org has: the session's worker may take the task, which then ends at once, so it holds no
    # snapshot of the database while the teardown empties it (a real rebuild did, and the two deadlocked).
    no_org = 0
    enqueue.rollups_rebuild([no_org])
    tasks = [json.loads(message) for _queue, message in pushed]
    assert [(task["headers"]["task"], task["headers"]["argsrepr"]) for task in tasks] == [
        (enqueue.REBUILD_ROLLUPS, f"({no_org},)")
    ]


def dropping_once(command, *, taken: list):
    """A Redis command whose first call finds its connection closed; the arguments of the calls Redis took are
    appended to `taken`."""
    calls = itertools.count()

    def call(client, *args):
        if next(calls) == 0:
            raise redis.ConnectionError("Connection closed by server.")
        answer = command(client, *args)
        taken.append(args)
        return answer

    return call


def grading_lock_holder(kind: str, item_id: int) -> int | None:
    """The backend pid whose session holds the item's grading lock, if one does."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND granted"
            " AND ((classid::bigint << 32) | objid::bigint) = %s",
            [lock_key(kind, item_id)],
        )
        row = cursor.fetchone()
    return row and row[0]


def test_a_database_failover_while_the_judge_thinks_loses_no_answer_and_leaves_one_whole_review(
    celery_worker, fake_llm, org
):
    """Every connection of the workers drops while the judge thinks, as in a failover: the pooled connection the
    grader handed back and the process's lock session. The pool's health check replaces the dead connection
    when the grader takes one again, so the judge's answer is written, not asked for twice; the lock session
    is opened again for the next task."""
    [conversation_id] = conversations(org, 1)
    fake_llm.script(hang_reply(2, then=verdicts_reply(PATH_IDS)))
    fake_llm.set_default(verdicts_reply(PATH_IDS))
    grading_pass()

    wait_until(lambda: grading_lock_holder(ItemKind.CONVERSATION, conversation_id), message="the worker to hold it")
    wait_until(fake_llm.chat_requests, message="the worker to ask the judge")
    with connection.cursor() as cursor:  # while the judge thinks
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )

    wait_until(lambda: all_done([conversation_id]), timeout=60, message="the retried grading")
    [review] = Review.objects.filter(conversation=conversation_id)
    assert (review.route, review.state) == ("pass", "current")
    assert set(review.checks) == {"grounded", "complete", "usable"}
    assert review.usage["total_tokens"] == 120
    assert len(fake_llm.chat_requests()) == 1
    assert grading_lock_holder(ItemKind.CONVERSATION, conversation_id) is None
    second = upsert(org, support_conversation("cv-after")).conversation.pk
    grading_pass()
    wait_until(lambda: all_done([second]), timeout=30, message="the next grading, in a new lock session")


def test_a_database_connection_dropped_mid_write_is_retried_and_leaves_one_whole_review(
    celery_worker, celery_worker_log, fake_llm, org
):
    """The grader's connection dies inside the transaction that writes the review: nothing of it is kept, the
    task is retried, and the retry asks the judge again and writes one whole review."""
    from reviewer.celery import app

    [conversation_id] = conversations(org, 1)
    fake_llm.script(slow_verdicts(1.0))
    fake_llm.set_default(verdicts_reply(PATH_IDS))
    grading_pass()
    wait_until(
        fake_llm.chat_requests,
        message="the worker to ask the judge",
        explain=lambda: task_census(app, celery_worker, tickets_of([conversation_id]), celery_worker_log),
    )

    def waiting_writer() -> int | None:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            row = cursor.fetchone()
        return row and row[0]

    with transaction.atomic():  # the conversation's row, held so the grader's write waits inside its transaction
        Conversation.objects.select_for_update().get(pk=conversation_id)
        writer = wait_until(waiting_writer, message="the grader to wait in its write")
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [writer])

    wait_until(lambda: all_done([conversation_id]), timeout=60, message="the retried grading")
    [review] = Review.objects.filter(conversation=conversation_id)
    assert (review.route, review.state) == ("pass", "current")
    assert set(review.checks) == {"grounded", "complete", "usable"}
    assert len(fake_llm.chat_requests()) == 2  # the first answer died with the write; the retry asked again


def test_the_grading_lock_stays_with_the_task_when_its_thread_hands_its_connection_to_the_pool():
    """A grader hands its pooled connection back while the judge thinks (so a threaded worker needs fewer
    connections than threads). The lock must not go with it: another thread that takes that connection would
    run in a session holding an item it is not grading, and the task's unlock would miss the lock."""
    assert connection.settings_dict["OPTIONS"].get("pool"), "the suite runs with the connection pool"

    def grade(draft_id: int) -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            thread_backend = cursor.fetchone()[0]
        holder = grading_lock_holder(ItemKind.DRAFT, draft_id)
        assert holder is not None and holder != thread_backend

    grade_each(ItemKind.DRAFT, [41], grade, task_id="task-41")
    assert grading_lock_holder(ItemKind.DRAFT, 41) is None
    lock_session_close()  # this test process's session: the test database is dropped at the end of the run


def test_two_workers_given_every_task_twice_grade_each_item_once(celery_worker, celery_processes, fake_llm, org):
    """Duplicates arrive as a redelivery or two overlapping passes would send them, side by side, to two worker
    processes on two nodes. The second copy waits for the first, finds its review, and calls no judge."""
    from reviewer.celery import app

    celery_processes("worker", "-Q", "judge", "-c", "2")
    ids = conversations(org, 12)
    fake_llm.set_default(slow_verdicts(0.3))
    sent = {
        app.signature(enqueue.GRADE_CONVERSATION, args=([conversation_id],)).apply_async(ignore_result=True).id
        for conversation_id in ids
        for _ in range(2)
    }
    wait_until(lambda: not sent & _broker_task_ids(enqueue.GRADE_CONVERSATION), timeout=90, message="every copy done")
    assert_one_counting_review_each(ids)
    assert len(fake_llm.chat_requests()) == len(ids)


def test_two_beats_run_one_grading_pass_per_hour(celery_worker, celery_processes, org, tmp_path):
    every_second = IntervalSchedule.objects.create(every=1, period=IntervalSchedule.SECONDS)
    PeriodicTask.objects.create(name="grading pass, every second", task=enqueue.GRADING_PASS, interval=every_second)
    earlier = _broker_task_ids(enqueue.GRADING_PASS)  # left delivered by an earlier run's worker, if any
    started = timezone.now()
    beats = [celery_processes("beat", "--pidfile", str(tmp_path / f"beat-{n}.pid")) for n in range(2)]

    def sent_by(beat) -> int:
        return sum(1 for line in beat.log().splitlines() if "Sending due task" in line and enqueue.GRADING_PASS in line)

    wait_until(lambda: all(sent_by(beat) >= 3 for beat in beats), timeout=90, message="both beats to send passes")
    for beat in beats:
        beat.stop()
    finished = timezone.now()
    wait_until(
        lambda: not _broker_task_ids(enqueue.GRADING_PASS) - earlier, timeout=60, message="the worker to run them all"
    )
    hours = {moment.replace(minute=0, second=0, microsecond=0) for moment in (started, finished)}
    assert GradingRun.objects.filter(trigger="beat").count() == len(hours)


def _broker_task_ids(name: str) -> set[str]:
    """Ids of the task `name`'s messages waiting in a queue or delivered and not acknowledged."""
    client = broker()
    messages = [json.loads(raw) for queue in enqueue.queue_names() for raw in client.lrange(queue, 0, -1)]
    messages += [json.loads(raw)[0] for raw in client.hvals(Channel.unacked_key)]
    return {message["headers"]["id"] for message in messages if message["headers"].get("task") == name}


def tickets_of(ids: list[int]) -> set[str]:
    return set(Conversation.objects.filter(pk__in=ids).values_list("grading_task_id", flat=True)) - {""}

"""The embedded services are real servers, found or started idempotently under a data directory."""

import multiprocessing
import os
import signal
from pathlib import Path

import psutil
import psycopg
import pytest
import redis
from django.db import connection

from reviewer import embedded


@pytest.fixture
def data_dir(tmp_path: Path):
    yield tmp_path
    embedded.stop(tmp_path)


def test_the_database_is_a_real_postgresql_16_with_vector_usable(db):
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version_num")
        assert int(cursor.fetchone()[0]) >= 160000
        cursor.execute("SELECT '[1,0,0]'::vector <=> '[0,1,0]'::vector, '[1,1,0]'::vector <=> '[2,2,0]'::vector")
        orthogonal, parallel = cursor.fetchone()
    assert orthogonal == pytest.approx(1.0)
    assert parallel == pytest.approx(0.0)


def _start_both(data_dir: str, queue) -> None:
    queue.put((embedded.postgres_url(Path(data_dir)), embedded.redis_url(Path(data_dir))))


@pytest.mark.slow
def test_two_processes_starting_at_once_share_one_server_of_each(data_dir):
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    starters = [context.Process(target=_start_both, args=(str(data_dir), queue)) for _ in range(2)]
    for starter in starters:
        starter.start()
    urls = {queue.get(timeout=120) for _ in starters}
    for starter in starters:
        starter.join(timeout=60)
    assert len(urls) == 1
    database, broker = urls.pop()
    with psycopg.connect(database) as conn:
        assert conn.execute("SELECT current_database()").fetchone() == ("tollgate",)
    assert redis.Redis.from_url(broker).ping()


@pytest.mark.slow
def test_a_dead_redis_is_started_again(data_dir):
    first = embedded.redis_url(data_dir)
    pid = int((data_dir / "redis" / "redis.pid").read_text())
    os.kill(pid, signal.SIGKILL)
    second = embedded.redis_url(data_dir)
    assert redis.Redis.from_url(second).ping()
    assert int((data_dir / "redis" / "redis.pid").read_text()) != pid
    assert first.startswith("redis://127.0.0.1:")


@pytest.mark.slow
def test_a_stopped_postgres_is_started_again_and_stop_reports_what_it_stopped(data_dir):
    embedded.postgres_url(data_dir)
    embedded.redis_url(data_dir)
    stopped = embedded.stop(data_dir)
    assert [name.split()[0] for name in stopped] == ["postgres", "redis"]
    url = embedded.postgres_url(data_dir)
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


@pytest.mark.slow
def test_redis_keeps_its_queue_and_its_address_across_a_restart(data_dir):
    url = embedded.redis_url(data_dir)
    redis.Redis.from_url(url).lpush("judge", b"a waiting task")
    assert embedded.redis_stop(data_dir)
    assert embedded.redis_url(data_dir) == url  # processes started earlier reach it at the address they know
    assert redis.Redis.from_url(url).lrange("judge", 0, -1) == [b"a waiting task"]


@pytest.mark.slow
def test_a_running_redis_that_keeps_nothing_on_disk_is_switched_to_its_append_only_file(data_dir):
    client = redis.Redis.from_url(embedded.redis_url(data_dir))
    client.config_set("appendonly", "no")  # as a server started by an older Tollgate runs
    embedded.redis_url(data_dir)
    assert client.config_get("appendonly") == {"appendonly": "yes"}
    pid = int((data_dir / "redis" / "redis.pid").read_text())
    embedded.redis_stop(data_dir)  # Redis ignores a stop while it writes its first append-only file
    assert not psutil.pid_exists(pid)

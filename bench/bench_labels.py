"""POST /api/v1/labels: what a label costs, how long one transaction holds its items' locks, and how many labels a
request can hold behind a 30 s worker timeout (MAX_LABELS_PER_REQUEST).

Requests go through Django's test client in process (every middleware, an org key, real PostgreSQL), against
conversations that each have a live review, so every label's rollups are booked. Two shapes: labels spread over many
items (the three checks and pass_fail by a few labellers each), and every label on one item (many labellers: the
batch locks that one row, and each rollups booking reads all of the item's labels). The yardstick, measured in the
same run on fresh labels: labels recorded one at a time (label_record) in one transaction, a savepoint each, as every
request recorded them before batches. Reported: wall time and CPU (this process's, and the PostgreSQL backend's, read
from /proc) per label, as ratios to the yardstick; the time one batch of LABELS_PER_TRANSACTION holds its locks; a
retry of the largest request (every label unchanged); and how soon a request over the limit is refused.

BENCH_LABELS_ITEMS (default 500) and BENCH_LABELS_MAX (default: the MAX_LABELS_PER_REQUEST setting) scale it.
"""

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.test import Client

from bench.common import backend_cpu, fresh_org
from grading.api.keys import api_key_create
from grading.conversations.grader import conversation_grade
from grading.conversations.ingest import conversation_upsert
from grading.core.schemas import ConversationIn
from grading.dashboard.labels import LABELS_PER_TRANSACTION, LabelIn, label_record, labels_record
from grading.judge.backends import HeuristicJudge
from grading.models import Label, Org

CHECKS = ("grounded", "complete", "usable", "pass_fail")
YARDSTICK_LABELS = 300


@dataclass
class Cost:
    wall: float = 0.0
    cpu: float = 0.0
    db_cpu: float = 0.0

    def per_label(self, n: int) -> str:
        return (
            f"{self.wall / n * 1000:6.2f} ms wall, {self.cpu / n * 1000:5.2f} ms CPU here, "
            f"{self.db_cpu / n * 1000:5.2f} ms CPU in PostgreSQL per label"
        )


@contextmanager
def _clock(cost: Cost):
    wall, cpu, db = time.perf_counter(), time.process_time(), backend_cpu()
    yield
    cost.wall += time.perf_counter() - wall
    cost.cpu += time.process_time() - cpu
    cost.db_cpu += backend_cpu() - db


def main() -> None:
    items = int(os.environ.get("BENCH_LABELS_ITEMS", "500"))
    largest = int(os.environ.get("BENCH_LABELS_MAX", str(settings.MAX_LABELS_PER_REQUEST)))
    org = fresh_org()
    started = time.perf_counter()
    for i in range(items):
        _conversation(org, f"c{i}")
    print(f"world: {items:,} conversations, each with a live review, in {time.perf_counter() - started:.1f} s")
    client = Client(
        SERVER_NAME="localhost", HTTP_AUTHORIZATION=f"Bearer {api_key_create(org=org, name='bench').plaintext}"
    )
    fresh = _labellers()
    _post(client, json.dumps({"labels": _labels(4, next(fresh), items, spread=True)}), expect=201, created=4)

    for shape, spread in (("spread over items", True), ("all on one item", False)):
        print(f"-- labels {shape}")
        yardstick = Cost()
        labels = [LabelIn.model_validate(label) for label in _labels(YARDSTICK_LABELS, next(fresh), items, spread)]
        with _clock(yardstick), transaction.atomic():
            for label in labels:
                label_record(org=org, label=label, source="bench")
        print(f"one label at a time (the yardstick), {YARDSTICK_LABELS}: {yardstick.per_label(YARDSTICK_LABELS)}")

        batch = [LabelIn.model_validate(label) for label in _labels(LABELS_PER_TRANSACTION, next(fresh), items, spread)]
        held = Cost()
        with _clock(held):
            labels_record(org=org, labels=batch, source="bench")
        print(
            f"one batch of {LABELS_PER_TRANSACTION} in one transaction: its locks held {held.wall * 1000:.0f} ms "
            f"({(held.cpu + held.db_cpu) * 1000:.0f} ms CPU)"
        )

        for n in sorted({10, 100, 1_000, largest}):
            body = json.dumps({"labels": _labels(n, next(fresh), items, spread)})
            cost = Cost()
            with _clock(cost):
                _post(client, body, expect=201, created=n)
            ratio = (cost.wall / n) / (yardstick.wall / YARDSTICK_LABELS)
            cpu_ratio = (cost.cpu + cost.db_cpu) / n / ((yardstick.cpu + yardstick.db_cpu) / YARDSTICK_LABELS)
            print(
                f"a request of {n:>5,}: {cost.wall:6.2f} s, {cost.per_label(n)} "
                f"({ratio:.2f}x the yardstick's wall, {cpu_ratio:.2f}x its CPU)"
            )
        retry = Cost()
        with _clock(retry):
            _post(client, body, expect=201, created=0)
        print(f"the same {n:,} again (all unchanged): {retry.wall:6.2f} s, {retry.per_label(n)}")

    over = settings.MAX_LABELS_PER_REQUEST * 10
    body = json.dumps({"labels": _labels(over, "over", items, spread=True)})
    refused = Cost()
    with _clock(refused):
        response = client.post("/api/v1/labels", body, content_type="application/json")
    assert response.status_code == 413, response.content[:300]
    print(
        f"a request of {over:,} ({len(body) / 1e6:.1f} MB, ten times MAX_LABELS_PER_REQUEST) refused with 413 in "
        f"{refused.wall * 1000:.0f} ms"
    )
    assert Label.objects.filter(org=org, labeller__startswith="over").count() == 0


def _conversation(org: Org, external_id: str) -> None:
    messages = [
        {"id": "m1", "role": "user", "content": "Where is my order 1182?"},
        {"id": "m2", "parent_id": "m1", "role": "assistant", "content": "It left the warehouse on Monday."},
    ]
    payload = {"external_id": external_id, "application": "bench", "closed": True, "messages": messages}
    written = conversation_upsert(org=org, payload=ConversationIn.model_validate(payload))
    conversation_grade(conversation_id=written.conversation.pk, judge=HeuristicJudge())


def _labellers() -> Iterator[str]:
    count = 0
    while True:
        count += 1
        yield f"run{count}"


def _labels(n: int, run: str, items: int, spread: bool) -> list[dict]:
    """`n` distinct labels: spread, four checks by each labeller over consecutive items; else all on item c0."""
    out = []
    for k in range(n):
        item, labeller = (f"c{(k // 4) % items}", f"{run}-{k // (4 * items)}") if spread else ("c0", f"{run}-{k // 4}")
        out.append({"item": item, "check": CHECKS[k % 4], "verdict": ("pass", "fail")[k % 2], "labeller": labeller})
    return out


def _post(client: Client, body: str, *, expect: int, created: int) -> None:
    response = client.post("/api/v1/labels", body, content_type="application/json")
    assert response.status_code == expect, response.content[:300]
    assert response.json()["created"] == created, response.content[:300]

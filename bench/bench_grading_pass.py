"""Grading-pass planning over 100,000 conversations (about 20 messages each) after 5% of them changed.

The tasks enqueued must equal the changed set exactly: zero redundant, zero missed. Reports planning
time, the SQL query count, and judge calls against re-grading everything. BENCH_CONVERSATIONS scales it.
"""

import os
import random
import time

from django.db import connection, reset_queries
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from bench.common import fresh_org, purge_queues
from grading.conversations.ingest import conversation_append
from grading.core.evidence import EvidenceMessage, fingerprint
from grading.core.schemas import MessagesIn
from grading.judge.backends import HeuristicJudge
from grading.models import Conversation, ItemKind, Message, Review, ReviewState, Route
from grading.passes.planner import conversations_needing_grading, grading_pass
from grading.reviews.versions import criteria_active

MESSAGES_PER_CONVERSATION = 20
BATCH = 2_000


def main() -> None:
    total = int(os.environ.get("BENCH_CONVERSATIONS", "100000"))
    org = fresh_org()
    criteria = criteria_active(org=org, kind=ItemKind.CONVERSATION)
    judge = HeuristicJudge().identity
    started = time.perf_counter()
    _populate(org, criteria, judge, total)
    print(
        f"populated {total:,} conversations, {total * MESSAGES_PER_CONVERSATION:,} messages, {total:,} reviews "
        f"in {time.perf_counter() - started:.0f} s"
    )

    changed = _change_five_percent(org, total)

    now = timezone.now()
    reset_queries()  # the query log is a bounded deque: once full, a capture would count nothing
    with CaptureQueriesContext(connection) as planning_queries:
        started = time.perf_counter()
        needing = list(conversations_needing_grading(now).values_list("pk", flat=True))
        planning_seconds = time.perf_counter() - started
    reset_queries()
    with CaptureQueriesContext(connection) as pass_queries:
        started = time.perf_counter()
        result = grading_pass(now=now, cap=total)
        pass_seconds = time.perf_counter() - started
    purge_queues()

    enqueued = set(result.enqueued_ids)
    redundant, missed = len(enqueued - changed), len(changed - enqueued)
    print(
        f"changed {len(changed):,}; needing (planner query) {len(needing):,}; enqueued {len(enqueued):,}; "
        f"redundant {redundant}; missed {missed}"
    )
    print(f"planning query: {planning_seconds * 1000:.0f} ms, {len(planning_queries)} SQL query")
    print(
        f"whole pass (plan, mark queued, record run, enqueue {len(enqueued):,} tasks): {pass_seconds:.2f} s, "
        f"{len(pass_queries)} SQL queries"
    )
    print(
        f"judge calls vs re-grading everything: {len(enqueued):,} / {total:,} = {len(enqueued) / total:.3f} "
        f"({total / max(len(enqueued), 1):.0f}x fewer)"
    )
    assert redundant == 0 and missed == 0, "the pass must enqueue exactly the changed conversations"


def _populate(org, criteria, judge, total: int) -> None:
    """Bulk rows: each conversation's fingerprint is computed from its real messages, and each has a
    current review of that exact identity (as after an earlier pass)."""
    rng = random.Random(1)
    now = timezone.now()
    for start in range(0, total, BATCH):
        conversations, paths = [], []
        for i in range(start, min(start + BATCH, total)):
            path = _messages(rng, i)
            paths.append(path)
            conversations.append(
                Conversation(
                    org=org,
                    external_id=f"bench-{i}",
                    application=f"app-{i % 3}",
                    closed=True,
                    started_at=now,
                    last_activity_at=now,
                    fingerprint=fingerprint(path),
                    active_path_ids=[m.id for m in path],
                    branch_count=1,
                    message_count=len(path),
                )
            )
        Conversation.objects.bulk_create(conversations)
        Message.objects.bulk_create(
            [
                Message(
                    conversation=c,
                    external_id=m.id,
                    parent_external_id=m.parent_id,
                    role=m.role,
                    content=m.content,
                    created_at=now,
                )
                for c, path in zip(conversations, paths, strict=True)
                for m in path
            ]
        )
        Review.objects.bulk_create(
            [
                Review(
                    org=org, kind=ItemKind.CONVERSATION, conversation=c, fingerprint=c.fingerprint,
                    criteria_version=criteria, judge=judge.as_json(), judge_key=judge.key, started_at=now,
                    finished_at=now, stages=1, route=Route.PASS, state=ReviewState.CURRENT,
                )
                for c in conversations
            ]
        )  # fmt: skip


def _messages(rng: random.Random, i: int) -> list[EvidenceMessage]:
    path, parent = [], None
    for n in range(MESSAGES_PER_CONVERSATION):
        role = "user" if n % 2 == 0 else "assistant"
        text = f"conversation {i} message {n}: " + " ".join(
            rng.choice(("refund", "order", "plan", "seat", "ok")) for _ in range(12)
        )
        path.append(EvidenceMessage(id=f"m{n}", parent_id=parent, role=role, content=text))
        parent = f"m{n}"
    return path


def _change_five_percent(org, total: int) -> set[int]:
    """Append a user follow-up to 5% of the conversations through the real service."""
    rng = random.Random(2)
    picked = rng.sample(range(total), total // 20)
    changed = set()
    started = time.perf_counter()
    for i in picked:
        payload = MessagesIn.model_validate(
            {
                "messages": [
                    {
                        "id": "m-follow-up",
                        "parent_id": f"m{MESSAGES_PER_CONVERSATION - 1}",
                        "role": "user",
                        "content": "And one more thing?",
                    }
                ]
            }
        )
        changed.add(conversation_append(org=org, external_id=f"bench-{i}", payload=payload).conversation.pk)
    seconds = time.perf_counter() - started
    print(
        f"appended to {len(picked):,} conversations of {MESSAGES_PER_CONVERSATION} messages through the service: "
        f"{len(picked) / seconds:,.0f} appends/s"
    )
    return changed

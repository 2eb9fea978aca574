"""Ingestion through the HTTP API (Django's test client in process, real PostgreSQL): messages per
second for new conversations and for appends, with the fingerprint kept current on every write; then
appends to conversations of 20, 200 and 2,000 messages, which must cost the same (an append that extends
the active path reads none of the earlier messages)."""

import json
import os
import time

from django.test import Client

from bench.common import fresh_org
from grading.api.keys import api_key_create
from grading.models import Conversation

MESSAGES_PER_CONVERSATION = 20


def main() -> None:
    conversations = int(os.environ.get("BENCH_INGEST_CONVERSATIONS", "500"))
    appends = int(os.environ.get("BENCH_INGEST_APPENDS", "2000"))
    org = fresh_org()
    client = Client(
        SERVER_NAME="localhost", HTTP_AUTHORIZATION=f"Bearer {api_key_create(org=org, name='bench').plaintext}"
    )

    started = time.perf_counter()
    for i in range(conversations):
        _post(client, "/api/v1/conversations", _conversation(i), expect=201)
    seconds = time.perf_counter() - started
    sent = conversations * MESSAGES_PER_CONVERSATION
    print(
        f"new conversations: {conversations:,} x {MESSAGES_PER_CONVERSATION} messages in {seconds:.1f} s = "
        f"{sent / seconds:,.0f} messages/s ({conversations / seconds:,.0f} conversations/s)"
    )

    started = time.perf_counter()
    for n in range(appends):
        i = n % conversations
        parent = f"m{MESSAGES_PER_CONVERSATION - 1}" if n < conversations else f"x{n - conversations}"
        message = {
            "id": f"x{n}",
            "parent_id": parent,
            "role": "user" if n % 2 else "assistant",
            "content": f"append {n}",
        }
        _post(client, f"/api/v1/conversations/c-{i}/messages", {"messages": [message]}, expect=200)
    seconds = time.perf_counter() - started
    print(
        f"appends: {appends:,} single-message appends in {seconds:.1f} s = {appends / seconds:,.0f} messages/s "
        f"(conversations grow to {MESSAGES_PER_CONVERSATION + appends // conversations} messages)"
    )

    _appends_by_length(client, org)

    stale = sum(
        1
        for c in Conversation.objects.filter(org=org).only("fingerprint", "active_path_ids")[:50]
        if _api_fingerprint(client, c.external_id) != c.fingerprint
    )
    print(f"fingerprints checked against GET after the run: 50, mismatched: {stale}")
    assert stale == 0


def _appends_by_length(client: Client, org) -> None:
    """Single-message appends through the API to conversations of 20, 200 and 2,000 messages: wall and CPU
    time per append, as ratios to the 20-message case measured in the same run."""
    appends = int(os.environ.get("BENCH_INGEST_LENGTH_APPENDS", "600"))
    baseline = None
    for length in (20, 200, 2_000):
        conversations = 4
        for c in range(conversations):
            body = _conversation(c, length=length) | {"external_id": f"len{length}-{c}"}
            _post(client, "/api/v1/conversations", body, expect=201)
        started, cpu = time.perf_counter(), time.process_time()
        for n in range(appends):
            c = n % conversations
            parent = f"m{length - 1}" if n < conversations else f"y{n - conversations}"
            message = {"id": f"y{n}", "parent_id": parent, "role": "user" if n % 2 else "assistant", "content": "ok"}
            _post(client, f"/api/v1/conversations/len{length}-{c}/messages", {"messages": [message]}, expect=200)
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        rate = appends / seconds
        baseline = baseline or rate
        print(
            f"appends to {length:>5,}-message conversations: {rate:7,.0f} appends/s "
            f"({rate / baseline:4.2f}x the 20-message rate), {cpu / appends * 1000:5.2f} ms CPU per append here"
        )
        expected = Conversation.objects.get(org=org, external_id=f"len{length}-0").fingerprint
        assert _api_fingerprint(client, f"len{length}-0") == expected


def _conversation(i: int, length: int = MESSAGES_PER_CONVERSATION) -> dict:
    messages, parent = [], None
    for n in range(length):
        messages.append(
            {
                "id": f"m{n}",
                "parent_id": parent,
                "role": "user" if n % 2 == 0 else "assistant",
                "content": f"conversation {i}, message {n}: " + "words of a realistic length " * 6,
            }
        )
        parent = f"m{n}"
    return {"external_id": f"c-{i}", "application": "bench", "messages": messages}


def _post(client: Client, path: str, body: dict, *, expect: int) -> None:
    response = client.post(path, json.dumps(body), content_type="application/json")
    assert response.status_code == expect, response.content[:300]


def _api_fingerprint(client: Client, external_id: str) -> str:
    return client.get(f"/api/v1/conversations/{external_id}").json()["fingerprint"]

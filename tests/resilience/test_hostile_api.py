"""Hostile input over the HTTP API, generated (issue 11, Build 6).

Whatever a pipeline sends: no 5xx; a rejection writes nothing (row counts before and after) and names what it
refuses (a 400 lists the fields, a 413 names the limit); what is accepted can be read back and appended to at the
URL its id gives. Trees with cycles, orphans, twins and no root are stored and say why they cannot be scored.
"""

import json
import uuid
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from grading.core.evidence import NotScorable
from grading.models import Conversation, Message, Org
from tests.builders.api_calls import api_caller, row_counts
from tests.builders.hostile_values import (
    any_character,
    hostile_ids,
    hostile_text,
    in_storable_range,
    json_values,
    time_values,
)

pytestmark = pytest.mark.django_db
FUZZ = settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
LIMITS = {"MAX_MESSAGE_BYTES", "MAX_MESSAGES_PER_CONVERSATION", "MAX_REQUEST_BYTES", "MAX_DRAFT_BYTES"}
REASONS = {str(reason) for reason in NotScorable}


def fresh_api(client):
    """An org of its own for each example: conversation ids are per org, so examples never merge into each other."""
    org = Org.objects.create(name="Hostile", slug=f"hostile-{uuid.uuid4().hex[:12]}")
    return api_caller(client, org)


def send(api, method: str, path: str, payload) -> object:
    # json.dumps writes NaN and Infinity as the bare tokens, which is what a careless client sends.
    return api(method, path, raw=payload if isinstance(payload, bytes | str) else json.dumps(payload))


def assert_refusal_is_clear_and_wrote_nothing(response, before: dict) -> None:
    event(f"answered {response.status_code}")  # --hypothesis-show-statistics: the mix of refusals and acceptances
    assert response.status_code < 500, response.content[:500]
    if response.status_code >= 400:
        assert row_counts() == before, response.content[:300]
        body = response.json()
        assert isinstance(body.get("detail"), str) and body["detail"]
        if response.status_code == 400:
            assert body["errors"] and all(error["field"] and error["message"] for error in body["errors"])
        if response.status_code == 413:
            assert body["limit"] in LIMITS


# --- conversations -------------------------------------------------------------------------------------------------
ID_POOL = ["m1", "m2", "m3", "m4", "m5"]  # few ids, so twins, cycles and links between messages come up often


def message_strategy(ids, text, times, junk=None):
    """Messages whose ids come from `ids`, text from `text` and times from `times`; with `junk`, any field may
    also be anything."""

    def maybe(strategy):
        return strategy if junk is None else st.one_of(strategy, junk)

    calls = st.lists(
        st.fixed_dictionaries(
            {
                "id": ids,
                "type": st.just("function"),
                "function": st.fixed_dictionaries({"name": text, "arguments": text}),
            }
        ),
        max_size=2,
    )
    parts = st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": text}), max_size=2)
    return st.fixed_dictionaries(
        {"id": ids, "role": st.sampled_from(["system", "user", "assistant", "tool"])},
        optional={
            "parent_id": st.one_of(st.none(), ids),
            "content": maybe(st.one_of(st.none(), text, parts)),
            "tool_calls": maybe(st.one_of(st.none(), calls)),
            "tool_call_id": st.one_of(st.none(), ids),
            "name": st.one_of(st.none(), text),
            "created_at": times,
            "hidden": maybe(st.booleans()),
            "truncated": maybe(st.booleans()),
        },
    )


def conversation_strategy(ids, text, times, external_ids, junk=None):
    return st.fixed_dictionaries(
        {
            "external_id": external_ids,
            "application": st.one_of(st.just("support"), text),
            "messages": st.lists(message_strategy(ids, text, times, junk), max_size=8),
        },
        optional={
            "closed": st.booleans() if junk is None else st.one_of(st.booleans(), junk),
            "active_message_id": st.one_of(st.none(), ids),
        },
    )


# Well formed, but with everything a stored record must survive: bidi and zero-width text in content and ids, twins,
# cycles, orphans, trees without a root, and times at the very edges of the storable range.
readable_text = st.text(st.characters(exclude_categories=("Cs", "Cc")), min_size=1, max_size=30)
readable_ids = st.one_of(
    st.sampled_from(ID_POOL), st.sampled_from(["\u202eevil", "zero\u200bwidth", "ש\u200fלום", "m1 ", "ид"])
)
edge_times = st.one_of(
    st.none(),
    st.sampled_from(["0001-01-01T00:00:00+00:00", "9999-12-31T23:59:59.999999+00:00", "0001-01-01T05:30:00+05:30"]),
    st.sampled_from(["2026-11-02T09:00:00Z", "2026-11-02T09:00:00"]),
)
well_formed = conversation_strategy(
    readable_ids,
    readable_text,
    edge_times,
    st.one_of(
        readable_ids,
        st.text(st.characters(exclude_categories=("Cs", "Cc"), exclude_characters="/"), min_size=3, max_size=20),
    ),
)
pooled_hostile_ids = st.one_of(st.sampled_from(ID_POOL), hostile_ids)
hostile = conversation_strategy(pooled_hostile_ids, hostile_text, time_values, hostile_ids, junk=json_values)
conversations = st.one_of(well_formed, well_formed, hostile)
messages = st.one_of(
    message_strategy(readable_ids, readable_text, edge_times),
    message_strategy(pooled_hostile_ids, hostile_text, time_values, junk=json_values),
)


def expected_problem(payload: dict) -> str | None:
    """What the record alone says about scoring (closed, so never in progress), when ids are unique or not."""
    ids = [m["id"] for m in payload["messages"]]
    if not ids:
        return NotScorable.EMPTY
    if len(set(ids)) != len(ids):
        return NotScorable.DUPLICATE_ID
    return None


@FUZZ
@given(payload=conversations)
def test_a_hostile_conversation_is_refused_cleanly_or_stored_readable_and_appendable(client, payload):
    api = fresh_api(client)
    before = row_counts()
    response = send(api, "post", "/conversations", payload)
    assert_refusal_is_clear_and_wrote_nothing(response, before)
    if response.status_code >= 400:
        return
    body = response.json()
    assert body["not_scorable_reason"] in REASONS | {None}
    if payload.get("closed") is True and expected_problem(payload) is not None:
        assert body["not_scorable_reason"] == expected_problem(payload)
    for message in payload["messages"]:
        if isinstance(message.get("created_at"), str) and message["created_at"]:
            assert in_storable_range(message["created_at"])
    path = f"/conversations/{quote(payload['external_id'], safe='')}"
    read = api("get", path)
    assert read.status_code == 200 and read.json()["fingerprint"] == body["fingerprint"]
    appended = send(api, "post", f"{path}/messages", {"messages": [{"id": "appended", "role": "user", "content": "?"}]})
    assert appended.status_code == 200, appended.content[:300]
    assert Message.objects.filter(conversation__external_id=payload["external_id"], external_id="appended").exists()


@FUZZ
@given(
    batch=st.lists(messages, min_size=1, max_size=6),
    extra=st.one_of(
        st.just({}), st.fixed_dictionaries({}, optional={"closed": json_values, "active_message_id": hostile_ids})
    ),
)
def test_a_hostile_append_is_refused_cleanly_or_merged_and_a_refusal_leaves_the_evidence_as_it_was(
    client, batch, extra
):
    api = fresh_api(client)
    start = {
        "external_id": "cv-1",
        "application": "support",
        "closed": True,
        "messages": [{"id": "m1", "role": "user", "content": "Hi"}],
    }
    fingerprint = send(api, "post", "/conversations", start).json()["fingerprint"]
    before = row_counts()
    response = send(api, "post", "/conversations/cv-1/messages", {"messages": batch, **extra})
    assert_refusal_is_clear_and_wrote_nothing(response, before)
    if response.status_code >= 400:
        assert api("get", "/conversations/cv-1").json()["fingerprint"] == fingerprint


@FUZZ
@given(conversation=hostile_ids, message_id=hostile_ids, value=st.one_of(st.sampled_from(["up", "down"]), json_values))
def test_hostile_feedback_is_refused_cleanly(client, conversation, message_id, value):
    api = fresh_api(client)
    send(
        api,
        "post",
        "/conversations",
        {"external_id": "cv-1", "application": "a", "messages": [{"id": "m1", "role": "user"}]},
    )
    before = row_counts()
    response = send(api, "post", "/feedback", {"conversation": conversation, "message_id": message_id, "value": value})
    assert_refusal_is_clear_and_wrote_nothing(response, before)


@FUZZ
@given(raw=st.one_of(st.binary(max_size=64), st.text(any_character, max_size=64), st.just("[" * 100_000)))
def test_a_body_that_is_not_a_conversation_is_a_400_naming_the_body(client, raw):
    api = fresh_api(client)
    before = row_counts()
    # Invalid UTF-8 as bytes; text with lone surrogates encoded as they would be by a broken client.
    response = send(
        api, "post", "/conversations", raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    )
    assert response.status_code == 400
    assert_refusal_is_clear_and_wrote_nothing(response, before)


# --- drafts ----------------------------------------------------------------------------------------------------------
def draft_strategy(ids, text, slugs, urls, junk=None):
    return st.fixed_dictionaries(
        {"external_id": ids, "title": text, "slug": slugs, "body": text},
        optional={
            "source_urls": st.lists(urls, max_size=3) if junk is None else st.one_of(st.lists(urls, max_size=3), junk),
            "callback_url": st.one_of(st.none(), urls),
            "run_id": st.one_of(st.none(), text),
        },
    )


good_urls = st.sampled_from(["https://example.com/a", "https://hooks.example.com/x?y=1#z", "http://bücher.example/ü"])
bad_urls = st.sampled_from(
    ["javascript:alert(1)", "http://[::1]/", "https://exa mple.com", "http://127.0.0.1/", "http://user:pw@example.com/",
     "http://2130706433/", "http://0x7f.1/", "ftp://example.com/", "http://169.254.169.254/latest/"]
)  # fmt: skip
drafts = st.one_of(
    draft_strategy(readable_ids, readable_text, st.sampled_from(["a-slug", "how-to-2"]), good_urls),
    draft_strategy(readable_ids, readable_text, st.sampled_from(["a-slug", "how-to-2"]), good_urls),
    draft_strategy(
        hostile_ids,
        hostile_text,
        st.one_of(st.just("a-slug"), hostile_text),
        st.one_of(good_urls, bad_urls, hostile_text),
        junk=json_values,
    ),
)


@FUZZ
@given(payload=drafts)
def test_a_hostile_draft_is_refused_cleanly_or_accepted_and_readable(
    client, payload, django_capture_on_commit_callbacks
):
    api = fresh_api(client)
    before = row_counts()
    with django_capture_on_commit_callbacks():  # the grading task is not sent: no broker is needed to submit
        response = send(api, "post", "/drafts", payload)
    assert_refusal_is_clear_and_wrote_nothing(response, before)
    if response.status_code == 202:
        status = api("get", f"/drafts/{response.json()['id']}")
        assert status.status_code == 200 and status.json()["external_id"] == payload["external_id"]


# --- the sizes: ten megabytes, a hundred thousand deep ------------------------------------------------------------
def test_a_ten_megabyte_message_is_413_naming_the_limit_and_writes_nothing(client):
    api = fresh_api(client)
    before = row_counts()
    payload = {
        "external_id": "big",
        "application": "a",
        "messages": [{"id": "m1", "role": "user", "content": "x" * 10_000_000}],
    }
    response = send(api, "post", "/conversations", payload)
    assert (response.status_code, response.json()["limit"]) == (413, "MAX_MESSAGE_BYTES")
    assert row_counts() == before


def chain(length: int, *, cycle: bool = False) -> dict:
    """A conversation of `length` messages each answering the one before; with `cycle`, the first answers the last,
    so there is no root at all."""
    roles = ("user", "assistant")
    messages = [
        {
            "id": f"m{i}",
            "parent_id": f"m{i - 1}" if i else (f"m{length - 1}" if cycle else None),
            "role": roles[i % 2],
            "content": "ok",
        }
        for i in range(length)
    ]
    return {
        "external_id": "deep",
        "application": "a",
        "closed": True,
        "active_message_id": f"m{length - 1}",
        "messages": messages,
    }


@pytest.mark.slow
def test_a_hundred_thousand_deep_chain_is_over_the_default_limit_and_writes_nothing(client):
    api = fresh_api(client)
    before = row_counts()
    response = send(api, "post", "/conversations", chain(100_000))
    assert (response.status_code, response.json()["limit"]) == (413, "MAX_MESSAGES_PER_CONVERSATION")
    assert row_counts() == before


@pytest.mark.slow
def test_a_hundred_thousand_deep_chain_under_a_raised_limit_is_stored_read_and_appended(client, settings):
    settings.MAX_MESSAGES_PER_CONVERSATION = 100_001
    api = fresh_api(client)
    body = send(api, "post", "/conversations", chain(100_000)).json()
    assert (len(body["active_path"]), body["not_scorable_reason"]) == (100_000, None)
    assert len(api("get", "/conversations/deep").json()["messages"]) == 100_000
    appended = send(
        api,
        "post",
        "/conversations/deep/messages",
        {"messages": [{"id": "end", "parent_id": "m99999", "role": "user", "content": "?"}]},
    )
    assert appended.json()["active_path"][-1] == "end" and len(appended.json()["active_path"]) == 100_001


@pytest.mark.parametrize(
    ("shape", "reason"),
    [
        (lambda p: p["messages"][0].update(parent_id="gone"), "unresolved_parent"),  # an orphan at the root
        (lambda p: p.update(chain(500, cycle=True)), "cycle"),  # no root at all
        (lambda p: p["messages"].append(dict(p["messages"][3], content="twin")), "duplicate_id"),
        (lambda p: p.update(active_message_id="nowhere"), "unknown_active_message"),
    ],
)
def test_a_broken_tree_is_stored_and_says_why_it_cannot_be_scored(client, shape, reason):
    api = fresh_api(client)
    payload = chain(10)
    shape(payload)
    response = send(api, "post", "/conversations", payload)
    assert (response.status_code, response.json()["not_scorable_reason"]) == (201, reason)
    assert Conversation.objects.get(external_id="deep").message_count == len(payload["messages"])

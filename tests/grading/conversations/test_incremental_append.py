"""An append that extends the active path updates the evidence columns without reading the conversation, and the
result is exactly what recomputing from every message gives."""

import uuid
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grading.conversations.ingest import conversation_append, conversation_upsert
from grading.core import evidence
from grading.core.schemas import ConversationIn, MessagesIn
from grading.models import Conversation, Org
from grading.reviews.conversation_reads import quiet_period
from tests.builders.conversations import T0
from tests.builders.message_trees import message_trees, tool_call

CALLS = ["c1", "c2", "c3"]
# What the API accepts: no NUL characters.
text = st.text(alphabet=st.characters(blacklist_characters="\x00", blacklist_categories=["Cs"]), max_size=30)
parts = st.lists(
    st.one_of(
        st.fixed_dictionaries({"type": st.just("text"), "text": text}),
        st.fixed_dictionaries({"type": st.just("refusal"), "refusal": text}),
        st.fixed_dictionaries({"type": st.just("image_url"), "image_url": st.just({"url": "https://x.test/a.png"})}),
    ),
    max_size=2,
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(message_trees(), st.integers(0, 400))
def test_extending_a_digest_equals_fingerprinting_the_whole_path(tree, cut):
    messages, active = tree
    path = evidence.active_path(messages, active).path
    cut = min(cut, len(path))
    whole, _ = evidence.path_digest(path)
    _, state = evidence.path_digest(path[:cut])
    extended, _ = evidence.extend_digest(state, path[cut:], path_was_empty=cut == 0)
    assert whole == extended == evidence.fingerprint(path)
    opened = evidence.unanswered_tool_call_ids(path[:cut])
    assert evidence.extend_open_tool_calls(opened, path[cut:]) == evidence.unanswered_tool_call_ids(path)


# --- through the service, against the database ----------------------------------------------------------------

message_in = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "assistant", "tool", "system"]),
        "content": st.none() | text | parts,
        "calls": st.lists(st.sampled_from(CALLS), max_size=2),
        "tool_call_id": st.sampled_from(CALLS),
        "minute": st.none() | st.integers(0, 40),
        "truncated": st.integers(0, 15).map(lambda n: n == 0),
    }
)
step = st.fixed_dictionaries(
    {
        # "leaf": continue the active path; "branch": under an earlier message; "edit": new content, known id
        "kind": st.sampled_from(["leaf", "leaf", "leaf", "leaf", "branch", "edit"]),
        "messages": st.lists(message_in, min_size=1, max_size=3),
        "active": st.sampled_from(["none", "none", "none", "last", "first"]),
        "closed": st.none() | st.booleans(),
        "pick": st.integers(0, 10_000),
    }
)


def _payload_message(spec: dict, mid: str, parent: str | None) -> dict:
    body = {"id": mid, "parent_id": parent, "role": spec["role"], "content": spec["content"]}
    if spec["role"] == "assistant" and spec["calls"]:
        body["tool_calls"] = [tool_call(c) for c in spec["calls"]]
    if spec["role"] == "tool":
        body["tool_call_id"] = spec["tool_call_id"]
    if spec["minute"] is not None:
        body["created_at"] = (T0 + timedelta(minutes=spec["minute"])).isoformat()
    body["truncated"] = spec["truncated"]
    return body


def _recomputed(conversation: Conversation, now) -> dict:
    """Every evidence column from every message, the way a full read computes them."""
    messages = [m.as_evidence() for m in conversation.messages.all()]
    result = evidence.active_path(messages, conversation.active_message_id)
    reason = evidence.not_scorable_reason(
        result.path,
        closed=conversation.closed,
        last_activity=conversation.last_activity_at,
        now=now,
        quiet_period=quiet_period(),
        path_problem=result.problem,
    )
    times = [m.created_at for m in messages if m.created_at]
    return {
        "fingerprint": evidence.fingerprint(result.path),
        "active_path_ids": [m.id for m in result.path],
        "branch_count": evidence.branch_count(messages),
        "message_count": len(messages),
        "reason": reason,
        "last_activity_at": max(times) if conversation.closed and times else None,
    }


@pytest.mark.django_db
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=st.lists(message_in, min_size=1, max_size=4), steps=st.lists(step, min_size=1, max_size=8))
def test_every_append_leaves_the_columns_a_full_recomputation_gives(first, steps):
    org = Org.objects.create(name="Prop", slug=f"p-{uuid.uuid4().hex[:12]}")
    now = T0 + timedelta(hours=1)
    ids = []
    chain = []
    for spec in first:
        chain.append(_payload_message(spec, f"m{len(ids)}", ids[-1] if ids else None))
        ids.append(chain[-1]["id"])
    conversation_upsert(
        org=org,
        payload=ConversationIn.model_validate({"external_id": "c", "application": "a", "messages": chain}),
        now=now,
    )
    for n, change in enumerate(steps):
        conversation = Conversation.objects.get(org=org, external_id="c")
        leaf = conversation.active_path_ids[-1] if conversation.active_path_ids else ids[-1]
        if change["kind"] == "edit":
            known = ids[change["pick"] % len(ids)]
            messages = [
                _payload_message(change["messages"][0], known, None) | {"content": f"edited {n}", "parent_id": None}
            ]
            original = conversation.messages.get(external_id=known)
            messages[0]["parent_id"] = original.parent_external_id
        else:
            parent = leaf if change["kind"] == "leaf" else ids[change["pick"] % len(ids)]
            messages = []
            for spec in change["messages"]:
                messages.append(_payload_message(spec, f"s{n}-{len(messages)}", parent))
                parent = messages[-1]["id"]
                ids.append(parent)
        body: dict = {"messages": messages}
        if change["active"] == "last":
            body["active_message_id"] = messages[-1]["id"]
        elif change["active"] == "first":
            body["active_message_id"] = ids[0]
        if change["closed"] is not None:
            body["closed"] = change["closed"]
        write = conversation_append(org=org, external_id="c", payload=MessagesIn.model_validate(body), now=now)

        stored = Conversation.objects.get(pk=write.conversation.pk)
        expected = _recomputed(stored, now)
        assert stored.fingerprint == expected["fingerprint"]
        assert stored.active_path_ids == expected["active_path_ids"]
        assert stored.branch_count == expected["branch_count"]
        assert stored.message_count == expected["message_count"]
        assert write.not_scorable_reason == expected["reason"]
        if stored.closed:
            assert stored.last_activity_at == expected["last_activity_at"]


@pytest.mark.django_db
def test_an_append_to_the_active_leaf_reads_no_earlier_message(org, django_assert_max_num_queries):
    chain, parent = [], None
    for n in range(200):
        chain.append(
            {"id": f"m{n}", "parent_id": parent, "role": "user" if n % 2 == 0 else "assistant", "content": "x"}
        )
        parent = f"m{n}"
    payload = ConversationIn.model_validate({"external_id": "long", "application": "a", "messages": chain})
    conversation_upsert(org=org, payload=payload)
    append = MessagesIn.model_validate(
        {"messages": [{"id": "m200", "parent_id": "m199", "role": "user", "content": "y"}]}
    )
    # Lock the row, ask whether the id is known, insert, save the row (and the test's savepoint around them),
    # and keep the review state true (the live review, a review of the new evidence: two indexed reads): the
    # same queries at 20 or 2,000 messages.
    with django_assert_max_num_queries(8) as queries:
        write = conversation_append(org=org, external_id="long", payload=append)
    assert write.messages is None
    assert not any('"grading_message"."content"' in q["sql"] for q in queries.captured_queries)
    assert write.conversation.fingerprint == evidence.fingerprint(
        [m.as_evidence() for m in write.conversation.messages.order_by("id")]
    )

"""Conversations written together (`conversations_write`, how the OTLP receiver writes a transaction's conversations)
store what the API's upsert and append store one conversation at a time, in statements that do not grow with the
number of conversations."""

from datetime import timedelta

import pytest

from grading.conversations.ingest import (
    StoredConversation,
    conversation_append,
    conversation_upsert,
    conversations_write,
)
from grading.core.schemas import ConversationIn, MessagesIn
from grading.models import Conversation, Message, Org, Review, ReviewState
from tests.builders.conversations import T0, message, support_conversation
from tests.builders.queue_items import conversation_item

NOW = T0 + timedelta(hours=2)
CONVERSATION_COLUMNS = [
    "external_id",
    "application",
    "closed",
    "active_message_id",
    "started_at",
    "last_activity_at",
    "fingerprint",
    "active_path_ids",
    "branch_count",
    "message_count",
    "evidence_state",
    "end_user",
    "metadata",
]
MESSAGE_COLUMNS = [
    "conversation__external_id",
    "external_id",
    "parent_external_id",
    "role",
    "content",
    "tool_calls",
    "tool_call_id",
    "name",
    "created_at",
    "hidden",
    "truncated",
    "twin",
]

# Continues the active path (m4), naming the end user and metadata.
CONTINUED = {
    "messages": [message("m5", "user", "And the shipping?", "m4", 5)],
    "end_user": "u-7",
    "metadata": {"release": "r2"},
}
# An edit of a known id: the general merge, reading every message.
EDITED = {"messages": [message("m4b", "assistant", "I could not do that, sorry.", "m3", 3)]}


def _stored(org: Org) -> tuple[list, list]:
    conversations = Conversation.objects.filter(org=org).order_by("external_id").values(*CONVERSATION_COLUMNS)
    messages = Message.objects.filter(conversation__org=org).order_by(*MESSAGE_COLUMNS[:2], "twin")
    return list(conversations), list(messages.values(*MESSAGE_COLUMNS))


def _upserted(org: Org, external_id: str) -> None:
    payload = ConversationIn.model_validate(support_conversation(external_id))
    conversation_upsert(org=org, payload=payload, now=NOW)


def _stored_conversation(org: Org, external_id: str) -> StoredConversation:
    conversation = Conversation.objects.select_for_update().get(org=org, external_id=external_id)
    return StoredConversation(conversation, list(conversation.messages.all()))


@pytest.fixture
def two_orgs(db) -> tuple[Org, Org]:
    return Org.objects.create(name="One by one", slug="one"), Org.objects.create(name="Together", slug="together")


def test_it_stores_what_upserts_and_appends_one_at_a_time_store(two_orgs):
    one, together = two_orgs
    for org in two_orgs:
        _upserted(org, "a")
        _upserted(org, "b")
    conversation_append(org=one, external_id="a", payload=MessagesIn.model_validate(CONTINUED), now=NOW)
    conversation_append(org=one, external_id="b", payload=MessagesIn.model_validate(EDITED), now=NOW)
    conversation_upsert(org=one, payload=ConversationIn.model_validate(support_conversation("c")), now=NOW)

    writes = conversations_write(
        org=together,
        writes=[
            (_stored_conversation(together, "a"), MessagesIn.model_validate(CONTINUED)),
            (_stored_conversation(together, "b"), MessagesIn.model_validate(EDITED)),
            (None, ConversationIn.model_validate(support_conversation("c"))),
        ],
        now=NOW,
    )

    assert _stored(together) == _stored(one)
    assert [write.created for write in writes] == [False, False, True]
    assert writes[0].messages is None  # a continuation reads no earlier message
    assert {m.id for m in writes[1].messages} == {"m1", "m2", "m3", "m4b", "m4"}  # every message, after an edit


def test_it_writes_a_batch_in_the_same_statements_whatever_its_size(db, django_assert_max_num_queries):
    org = Org.objects.create(name="Batch", slug="batch")
    for n in range(5):
        _upserted(org, f"old-{n}")
    writes = [(_stored_conversation(org, f"old-{n}"), MessagesIn.model_validate(CONTINUED)) for n in range(5)]
    writes += [(None, ConversationIn.model_validate(support_conversation(f"new-{n}"))) for n in range(5)]
    # The savepoint around the insert of new conversations, the new conversations, the messages, the stored
    # conversations' rows, and which of them have reviews: ten conversations, as one would take.
    with django_assert_max_num_queries(6):
        conversations_write(org=org, writes=writes, now=NOW)
    assert Message.objects.filter(conversation__org=org).count() == 10 * 5 + 5


def test_an_append_written_together_turns_the_review_of_what_changed_stale(db, org):
    reviewed = conversation_item(org, "reviewed").pk  # a conversation waiting for people
    _upserted(org, "unreviewed")
    conversations_write(
        org=org,
        writes=[
            (_stored_conversation(org, "reviewed"), MessagesIn.model_validate(CONTINUED)),
            (_stored_conversation(org, "unreviewed"), MessagesIn.model_validate(CONTINUED)),
        ],
        now=NOW,
    )
    assert Review.objects.get(pk=reviewed).state == ReviewState.STALE


def test_a_new_conversation_another_writer_created_first_is_merged_into_as_an_upsert_merges(two_orgs):
    one, together = two_orgs
    first_messages = support_conversation("c") | {"messages": support_conversation("c")["messages"][:2]}
    for org in two_orgs:
        conversation_upsert(org=org, payload=ConversationIn.model_validate(first_messages), now=NOW)
    conversation_upsert(org=one, payload=ConversationIn.model_validate(support_conversation("c")), now=NOW)

    # Planned as new (None) before the other writer's conversation was committed.
    [write] = conversations_write(
        org=together, writes=[(None, ConversationIn.model_validate(support_conversation("c")))], now=NOW
    )

    assert _stored(together) == _stored(one)
    assert not write.created

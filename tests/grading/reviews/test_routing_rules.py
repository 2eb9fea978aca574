"""Routing rules on a criteria version: items go to people whatever the machine decided when a user's thumbs is down
on the graded path or the item's metadata matches; the routed review names the rule's kind (`Review.sent`). The
rules are part of the version: validated when saved, copied to a new version, frozen when published."""

from datetime import UTC, datetime

import pytest

from grading.checks.routing import (
    METADATA,
    SAMPLE,
    THUMBS_DOWN,
    in_sample,
    routing_match,
    routing_validate,
    sample_rank,
)
from grading.conversations.grader import conversation_grade
from grading.conversations.ingest import feedback_record
from grading.core.schemas import FeedbackIn
from grading.criteria.impact import criteria_diff
from grading.models import Conversation, ItemKind, Review, ReviewState, Route
from grading.reviews.rollups import live_counters, stored_counters
from grading.reviews.versions import (
    CriteriaImmutable,
    CriteriaInvalid,
    criteria_active,
    criteria_new_version,
    criteria_publish,
    criteria_update,
)
from tests.builders.conversations import llm_judge, upsert, verdicts_reply
from tests.builders.world import conversation_payload

STARTED = datetime(2026, 11, 18, tzinfo=UTC)


def _publish_routing(org, rules: list) -> None:
    criteria_active(org=org, kind=ItemKind.CONVERSATION)  # v1, seeded
    version = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    criteria_update(version=version, routing=rules)
    criteria_publish(version=version)


def _graded(org, fake_llm, external_id: str = "c1", *, metadata: dict | None = None, thumbs: str = "") -> Review:
    conversation = upsert(org, conversation_payload(external_id, "billing", STARTED)).conversation
    if metadata:
        Conversation.objects.filter(pk=conversation.pk).update(metadata=metadata)
    if thumbs:
        feedback_record(org=org, payload=FeedbackIn(conversation=external_id, message_id="m2", value=thumbs))
    fake_llm.script(verdicts_reply(["m1", "m2"]))
    return conversation_grade(conversation_id=conversation.pk, judge=llm_judge(fake_llm))


def test_it_matches_the_first_rule_an_item_meets_and_nothing_else():
    rules = routing_validate(
        [{"when": "metadata", "match": {"tier": "enterprise"}}, {"when": "thumbs_down"}], drafts=False
    )
    item = {"external_id": "c1", "salt": "s"}
    assert routing_match(rules, metadata={"tier": "enterprise", "release": "2.4"}, thumbs_down=True, **item) == METADATA
    assert routing_match(rules, metadata={"tier": "free"}, thumbs_down=True, **item) == THUMBS_DOWN
    assert routing_match(rules, metadata={"tier": "free"}, thumbs_down=False, **item) == ""
    assert routing_match([], metadata={"tier": "enterprise"}, thumbs_down=True, **item) == ""


def test_a_10_percent_sample_is_a_strict_subset_of_the_20_percent_one_by_the_fixed_hash_rule():
    ids = [f"conversation-{n}" for n in range(2_000)]
    ten = {i for i in ids if in_sample("salt:", i, percent=10)}
    twenty = {i for i in ids if in_sample("salt:", i, percent=20)}
    assert ten < twenty
    assert 150 <= len(ten) <= 250 and 320 <= len(twenty) <= 480  # about a tenth and a fifth of 2,000
    # The audit sample's rank: the items a rate picks are the ones with the smallest hashes.
    assert max(sample_rank("salt:", i) for i in ten) < min(sample_rank("salt:", i) for i in set(ids) - ten)


def test_a_sample_rule_sends_the_share_of_its_slice_the_hash_picks_and_nothing_outside_it():
    rules = routing_validate([{"when": "sample", "percent": 30, "match": {"release": "2.4"}}], drafts=False)
    for n in range(200):
        external_id = f"c{n}"
        picked = in_sample("s", external_id, percent=30)
        in_slice = routing_match(
            rules, metadata={"release": "2.4"}, thumbs_down=False, external_id=external_id, salt="s"
        )
        outside = routing_match(
            rules, metadata={"release": "2.3"}, thumbs_down=False, external_id=external_id, salt="s"
        )
        assert (in_slice, outside) == (SAMPLE if picked else "", "")


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ({"when": "thumbs_down"}, "routing"),
        ([{"when": "sometimes"}], "routing.0.when"),
        ([{"when": "thumbs_down"}, {"when": "metadata", "match": {}}], "routing.1.match"),
        ([{"when": "metadata", "match": {"tier": ""}}], "routing.0.match"),
        ([{"when": "metadata", "match": {"tier": 3}}], "routing.0.match"),
        ([{"when": "thumbs_down", "match": {"tier": "x"}}], "routing.0"),
        ([{"when": "sample"}], "routing.0.percent"),
        ([{"when": "sample", "percent": 0}], "routing.0.percent"),
        ([{"when": "sample", "percent": 101}], "routing.0.percent"),
        ([{"when": "sample", "percent": "10"}], "routing.0.percent"),
        ([{"when": "sample", "percent": 10, "match": {"tier": 1}}], "routing.0.match"),
        ([{"when": "sample", "percent": 10, "salt": "mine"}], "routing.0"),
    ],
)
@pytest.mark.django_db
def test_a_version_refuses_bad_rules_naming_the_field_and_keeps_what_it_had(org, document, field):
    version = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    with pytest.raises(CriteriaInvalid) as refused:
        criteria_update(version=version, routing=document)
    assert field in refused.value.errors
    version.refresh_from_db()
    assert version.routing == []


@pytest.mark.django_db
def test_a_draft_version_takes_metadata_rules_and_refuses_thumbs(org):
    version = criteria_new_version(org=org, kind=ItemKind.DRAFT)
    with pytest.raises(CriteriaInvalid) as refused:
        criteria_update(version=version, routing=[{"when": "thumbs_down"}])
    assert "routing.0.when" in refused.value.errors
    rules = [{"when": "metadata", "match": {"release": "2.4"}}]
    assert criteria_update(version=version, routing=rules).routing == rules


@pytest.mark.django_db
def test_the_rules_are_copied_to_the_next_version_and_frozen_once_published(org):
    _publish_routing(org, [{"when": "thumbs_down"}])
    published = criteria_active(org=org, kind=ItemKind.CONVERSATION)
    assert published.routing == [{"when": "thumbs_down"}]
    with pytest.raises(CriteriaImmutable):
        criteria_update(version=published, routing=[])
    assert criteria_new_version(org=org, kind=ItemKind.CONVERSATION).routing == [{"when": "thumbs_down"}]


@pytest.mark.django_db
def test_a_thumbs_down_on_the_graded_path_sends_a_passed_conversation_to_people(org, fake_llm):
    _publish_routing(org, [{"when": "thumbs_down"}])
    down = _graded(org, fake_llm, "c-down", thumbs="down")
    up = _graded(org, fake_llm, "c-up", thumbs="up")

    assert (down.route, down.state, down.sent) == (Route.PASS, ReviewState.WAITING, THUMBS_DOWN)
    assert down.routed_at is not None
    assert (up.state, up.sent) == (ReviewState.CURRENT, "")
    assert stored_counters(org_ids=[org.pk]) == live_counters(org_ids=[org.pk])


@pytest.mark.django_db
def test_a_metadata_match_sends_an_enterprise_conversation_to_people_and_no_other(org, fake_llm):
    _publish_routing(org, [{"when": "metadata", "match": {"tier": "enterprise"}}])
    enterprise = _graded(org, fake_llm, "c-ent", metadata={"tier": "enterprise"})
    free = _graded(org, fake_llm, "c-free", metadata={"tier": "free"})

    assert (enterprise.state, enterprise.sent) == (ReviewState.WAITING, METADATA)
    assert (free.state, free.sent) == (ReviewState.CURRENT, "")


@pytest.mark.django_db
def test_without_rules_a_thumbs_down_changes_nothing_of_the_route(org, fake_llm):
    review = _graded(org, fake_llm, "c-plain", thumbs="down")
    assert (review.state, review.sent) == (ReviewState.CURRENT, "")


@pytest.mark.django_db
def test_a_thumbs_down_after_grading_sends_the_counting_review_to_people_once(org, fake_llm):
    _publish_routing(org, [{"when": "thumbs_down"}])
    review = _graded(org, fake_llm, "c-late")
    assert review.state == ReviewState.CURRENT

    feedback_record(org=org, payload=FeedbackIn(conversation="c-late", message_id="m2", value="down"))
    review.refresh_from_db()
    assert (review.state, review.sent, review.route) == (ReviewState.WAITING, THUMBS_DOWN, Route.PASS)
    routed_at = review.routed_at
    feedback_record(org=org, payload=FeedbackIn(conversation="c-late", message_id="m1", value="down"))
    review.refresh_from_db()
    assert review.routed_at == routed_at  # sent once
    assert stored_counters(org_ids=[org.pk]) == live_counters(org_ids=[org.pk])


@pytest.mark.django_db
def test_the_diff_of_two_versions_lists_the_routing_rules_added_and_removed_and_a_new_order(org):
    old = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    old = criteria_update(
        version=old, routing=[{"when": "thumbs_down"}, {"when": "metadata", "match": {"tier": "free"}}]
    )
    new = criteria_new_version(org=org, kind=ItemKind.CONVERSATION, source=old)
    new = criteria_update(
        version=new, routing=[{"when": "metadata", "match": {"tier": "enterprise"}}, {"when": "thumbs_down"}]
    )
    reordered = criteria_new_version(org=org, kind=ItemKind.CONVERSATION, source=old)
    reordered = criteria_update(version=reordered, routing=list(reversed(old.routing)))

    [change] = [c for c in criteria_diff(old=old, new=new).lists if c.label == "Routing rules"]
    assert (change.added, change.removed) == (["metadata tier = enterprise"], ["metadata tier = free"])
    [order] = [v for v in criteria_diff(old=old, new=reordered).values if v.label == "Order of the routing rules"]
    assert order.new.startswith("metadata tier = free")


@pytest.mark.django_db
def test_a_whole_slice_sample_sends_every_enterprise_conversation_and_names_the_sample(org, fake_llm):
    _publish_routing(org, [{"when": "sample", "percent": 100, "match": {"tier": "enterprise"}}])
    enterprise = _graded(org, fake_llm, "c-ent", metadata={"tier": "enterprise"})
    free = _graded(org, fake_llm, "c-free", metadata={"tier": "free"})
    assert (enterprise.state, enterprise.sent) == (ReviewState.WAITING, SAMPLE)
    assert (free.state, free.sent) == (ReviewState.CURRENT, "")

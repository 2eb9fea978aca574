"""The preview of a conversation version: the rules of its checks over recent conversations against their current
reviews, with no judge call and nothing written: what each rule found, and the route it forces whatever the judge
says."""

import pytest

from grading.conversations.grader import conversation_grade
from grading.criteria.rule_preview import rules_preview
from grading.models import AuditEvent, CriteriaVersion, ItemKind, Review
from grading.reviews.versions import criteria_new_version, criteria_update
from tests.builders.check_documents import CITES_POLICY, INTENT, with_checks
from tests.builders.conversations import llm_judge, support_conversation, upsert, verdicts_reply

pytestmark = pytest.mark.django_db

ON_ITS_WAY = {
    "kind": "phrases",
    "phrases": ["on its way"],
    "scopes": ["assistant"],
    "sets": "fail",
    "note": "promise",
}


@pytest.fixture
def conversations(org, fake_llm):
    """cv-1 promises the refund is "on its way"; cv-2 says it plainly; cv-3 is still going on (not scorable yet)."""
    promise = upsert(org, support_conversation("cv-1")).conversation
    plain = support_conversation("cv-2")
    plain["messages"][-1]["content"] = "Done: order 1182 was refunded."
    upsert(org, plain)
    upsert(org, support_conversation("cv-3", closed=False))
    fake_llm.set_default(verdicts_reply(promise.active_path_ids))
    conversation_grade(conversation_id=promise.pk, judge=llm_judge(fake_llm))
    return promise


def version_with(org, *checks: dict) -> CriteriaVersion:
    version = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    return criteria_update(version=version, checks=with_checks(version, *checks))


def test_it_lists_what_each_rule_found_and_the_route_it_forces(org, conversations):
    version = version_with(org, CITES_POLICY | {"rules": [ON_ITS_WAY]})
    events, reviews = AuditEvent.objects.count(), Review.objects.count()
    preview = rules_preview(version=version, limit=10)
    assert (preview.read, preview.checked, preview.unchecked) == (3, 2, 0)
    (row,) = preview.rows
    assert (row.conversation, row.route_before, row.route_after) == (conversations, "pass", "fail")
    (match,) = row.matches
    assert (match.key, match.sets, match.notes, match.answer_now) == ("cites_policy", "fail", ["promise"], None)
    assert match.findings == [{"rule": 0, "message_id": "m4", "text": "on its way"}]
    assert (AuditEvent.objects.count(), Review.objects.count()) == (events, reviews)  # nothing written


def test_a_rule_that_makes_a_check_unknown_sends_the_conversation_to_people_at_best(org, conversations):
    version = version_with(org, CITES_POLICY | {"rules": [ON_ITS_WAY | {"sets": "unknown"}]})
    (row,) = rules_preview(version=version, limit=10).rows
    assert (row.matches[0].sets, row.route_after) == ("unknown", "human")


def test_a_rule_s_unknown_beside_another_rule_s_fail_sends_the_conversation_to_people_as_the_grader_does(
    org, conversations
):
    names_policy = CITES_POLICY | {"key": "names_policy", "name": "Names the policy"}
    version = version_with(
        org, CITES_POLICY | {"rules": [ON_ITS_WAY]}, names_policy | {"rules": [ON_ITS_WAY | {"sets": "unknown"}]}
    )
    (row,) = rules_preview(version=version, limit=10).rows
    assert row.route_after == "human"


def test_a_rule_on_a_check_that_is_not_required_leaves_the_route_to_the_judge(org, conversations):
    version = version_with(org, INTENT | {"rules": [ON_ITS_WAY]})
    (row,) = rules_preview(version=version, limit=10).rows
    assert (row.matches[0].key, row.route_after) == ("intent", "")


def test_a_tool_that_must_be_called_and_was_not_is_found_on_every_conversation_without_a_message(org, conversations):
    must_call = {"kind": "tool_called", "tool": "lookup_policy", "must": True, "sets": "fail"}
    version = version_with(org, CITES_POLICY | {"rules": [must_call]})
    rows = rules_preview(version=version, limit=10).rows
    assert [row.conversation.external_id for row in rows] == ["cv-2", "cv-1"]  # newest first
    assert rows[0].matches[0].findings == [{"rule": 0, "message_id": None, "text": "lookup_policy (never called)"}]


def test_it_reads_only_the_last_n_conversations(org, conversations):
    version = version_with(org, CITES_POLICY | {"rules": [ON_ITS_WAY]})
    preview = rules_preview(version=version, limit=1)
    assert (preview.read, preview.rows) == (1, [])  # cv-3 is the newest: not scorable yet


def test_a_version_without_rules_has_nothing_to_preview(org, conversations):
    version = version_with(org, INTENT)
    preview = rules_preview(version=version, limit=10)
    assert (preview.rules, preview.read, preview.rows) == (0, 0, [])

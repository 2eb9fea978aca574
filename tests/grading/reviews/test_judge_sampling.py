"""Judge sampling: a conversation version may have its judge grade only a share of a slice, to hold spend. The share is
picked by the fixed hash rule the routing samples use (with their salt), so a smaller routing sample of the slice falls
inside it; a conversation outside it gets a not-scorable review that says why and calls no judge; and the figures say
the share of the graded conversations they cover."""

from collections import Counter

import pytest

from grading.checks.routing import in_sample, judge_sampled, routing_salt
from grading.conversations.grader import conversation_grade
from grading.core.evidence import NotScorable
from grading.criteria.impact import criteria_diff
from grading.dashboard.compare import comparison, slices_checked
from grading.dashboard.figures import dashboard_figures, scope_for
from grading.models import NO_JUDGE, Conversation, ItemKind, Route
from grading.passes.planner import conversations_needing_grading
from grading.reviews.versions import (
    CriteriaInvalid,
    criteria_active,
    criteria_new_version,
    criteria_publish,
    criteria_update,
)
from tests.builders.conversations import llm_judge, upsert, verdicts_reply
from tests.builders.world import W48, conversation_payload

SHARE = [{"percent": 50, "match": {"release": "2.4"}}]


def _publish_share(org, shares: list) -> None:
    criteria_active(org=org, kind=ItemKind.CONVERSATION)  # v1, seeded
    version = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    criteria_update(version=version, judge_sample=shares)
    criteria_publish(version=version)


def _grade_releases(org, fake_llm, count: int = 12) -> dict[str, Route]:
    """`count` conversations of release 2.4 and as many of 2.3, each graded once; the judge's reply is scripted only
    for the ones its share holds, so a judge call for any other would find no reply."""
    org.dimensions = ["release"]
    org.save(update_fields=["dimensions"])
    judge = llm_judge(fake_llm)
    reviews = {}
    for n in range(count * 2):
        release = "2.4" if n % 2 else "2.3"
        external_id = f"c{n}"
        payload = conversation_payload(external_id, "billing", W48) | {"metadata": {"release": release}}
        conversation = upsert(org, payload).conversation
        if release == "2.3" or in_sample(routing_salt(org.pk), external_id, percent=50):
            fake_llm.script(verdicts_reply(["m1", "m2"], grounded="fail" if n % 3 == 0 else "pass"))
        reviews[external_id] = conversation_grade(conversation_id=conversation.pk, judge=judge)
    return reviews


def test_the_judge_grades_the_shares_slice_by_the_hash_rule_and_every_other_conversation():
    shares = [{"percent": 20, "match": {"release": "2.4"}}]
    for n in range(300):
        external_id = f"c{n}"
        assert judge_sampled(shares, metadata={"release": "2.4"}, external_id=external_id, salt="s") == in_sample(
            "s", external_id, percent=20
        )
        assert judge_sampled(shares, metadata={"release": "2.3"}, external_id=external_id, salt="s")
        assert judge_sampled([], metadata={"release": "2.4"}, external_id=external_id, salt="s")


def test_a_routing_sample_of_10_percent_falls_inside_a_judge_sample_of_20_so_people_see_only_judged_items():
    ids = [f"conversation-{n}" for n in range(2_000)]
    salt = routing_salt(7)
    judged = {i for i in ids if judge_sampled([{"percent": 20, "match": {}}], metadata={}, external_id=i, salt=salt)}
    sent = {i for i in ids if in_sample(salt, i, percent=10)}
    assert sent < judged


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ({"percent": 20}, "judge_sample"),
        ([{"percent": 0}], "judge_sample.0.percent"),
        ([{"percent": 100}], "judge_sample.0.percent"),
        ([{"percent": "20"}], "judge_sample.0.percent"),
        ([{"percent": 20, "match": {"release": 2}}], "judge_sample.0.match"),
        ([{"percent": 20, "salt": "mine"}], "judge_sample.0"),
    ],
)
@pytest.mark.django_db
def test_a_version_refuses_a_bad_share_naming_the_field_and_keeps_what_it_had(org, document, field):
    version = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    with pytest.raises(CriteriaInvalid) as refused:
        criteria_update(version=version, judge_sample=document)
    assert field in refused.value.errors
    version.refresh_from_db()
    assert version.judge_sample == []


@pytest.mark.django_db
def test_a_draft_version_refuses_any_share_because_every_draft_waits_for_its_verdict(org):
    version = criteria_new_version(org=org, kind=ItemKind.DRAFT)
    with pytest.raises(CriteriaInvalid) as refused:
        criteria_update(version=version, judge_sample=SHARE)
    assert "judge_sample" in refused.value.errors


@pytest.mark.django_db
def test_the_share_is_copied_to_the_next_version_and_its_change_is_in_the_diff(org):
    old = criteria_update(version=criteria_new_version(org=org, kind=ItemKind.CONVERSATION), judge_sample=SHARE)
    new = criteria_new_version(org=org, kind=ItemKind.CONVERSATION, source=old)
    assert new.judge_sample == SHARE
    new = criteria_update(version=new, judge_sample=[])
    [change] = [v for v in criteria_diff(old=old, new=new).values if v.label == "Judge sampling"]
    assert (change.old, change.new) == ("50% of metadata release = 2.4", "every conversation")


@pytest.mark.django_db
def test_a_conversation_outside_the_share_is_counted_not_scored_and_no_judge_is_called(org, fake_llm):
    _publish_share(org, SHARE)
    reviews = _grade_releases(org, fake_llm)
    salt = routing_salt(org.pk)
    outside = {i for i, r in reviews.items() if int(i[1:]) % 2 and not in_sample(salt, i, percent=50)}
    assert outside  # the hash leaves some of the twelve out

    for external_id, review in reviews.items():
        if external_id in outside:
            assert (review.route, review.reason, review.judge_key) == (
                Route.NOT_SCORABLE,
                NotScorable.OUTSIDE_JUDGE_SAMPLE,
                NO_JUDGE,
            )
        else:
            assert review.route in (Route.PASS, Route.FAIL, Route.HUMAN)
    assert len(fake_llm.chat_requests()) == len(reviews) - len(outside)
    # Settled until the evidence or the version changes: a pass does not grade them again.
    assert not conversations_needing_grading(reviews["c1"].finished_at).filter(org=org).exists()


@pytest.mark.django_db
def test_the_dashboard_and_the_comparison_say_the_share_of_graded_conversations_they_cover(org, fake_llm):
    _publish_share(org, SHARE)
    reviews = _grade_releases(org, fake_llm)
    routes = Counter(
        (Conversation.objects.get(pk=r.conversation_id).metadata["release"], r.route, r.reason)
        for r in reviews.values()
    )
    not_sampled = routes["2.4", Route.NOT_SCORABLE, NotScorable.OUTSIDE_JUDGE_SAMPLE]
    scope = scope_for(org, since="2026-W48", until="2026-W48")

    total = dashboard_figures(scope, sections=("quality",))["quality"]["total"]
    assert total["not_sampled"] == not_sampled
    assert total["judged_share"] == pytest.approx((len(reviews) - not_sampled) / len(reviews))
    passed = sum(n for (_, route, _), n in routes.items() if route == Route.PASS)
    failed = sum(n for (_, route, _), n in routes.items() if route == Route.FAIL)
    assert (total["passed"], total["failed"]) == (passed, failed)  # the not sampled are in neither

    compared = comparison(scope, slices_checked(scope, dimension="release", a="2.3", b="2.4"))
    assert (compared["a"]["not_sampled"], compared["a"]["judged_share"]) == (0, 1.0)
    assert compared["b"]["not_sampled"] == not_sampled
    assert compared["b"]["judged_share"] == pytest.approx((12 - not_sampled) / 12)

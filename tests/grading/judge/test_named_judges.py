"""A judge per criteria version: judges are configured by name, a version names the one that grades under it, and
trials, grading and publishing use it. Each judge here is its own loopback server, counting the requests it gets."""

import hashlib
import json
from collections.abc import Iterator

import pytest

from grading.conversations.grader import conversation_grade
from grading.core.outcomes import JUDGE_UNKNOWN
from grading.criteria.impact import publish_plan
from grading.criteria.trials import criteria_trial_start, trial_count, trial_item_grade
from grading.drafts.gate import draft_grade
from grading.judge.backends import (
    HeuristicJudge,
    JudgeIdentity,
    UnknownJudge,
    judge_from_settings,
    judge_named,
)
from grading.models import ItemKind, Review, ReviewState
from grading.reviews.versions import criteria_active, criteria_new_version, criteria_publish, criteria_update
from tests.builders.conversations import support_conversation, upsert, verdicts_reply
from tests.builders.drafts import draft_reply, save_draft, setup_org_memory
from tests.builders.judges import configure_judges, judge_config
from tests.fakes.openai_server import FakeLLM

pytestmark = pytest.mark.django_db


@pytest.fixture
def cheap_server() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


@pytest.fixture
def judges(settings, fake_llm, cheap_server) -> None:
    """`default` answers at fake_llm, `cheap` (another model) at its own server."""
    configure_judges(settings, default=judge_config(fake_llm), cheap=judge_config(cheap_server, model="cheap-model"))


def graded_conversation(org, fake_llm):
    """A conversation graded under the active version (the default judge); the default server forgets the call."""
    conversation = upsert(org, support_conversation("cv-1")).conversation
    fake_llm.set_default(verdicts_reply(conversation.active_path_ids))
    review = conversation_grade(conversation_id=conversation.pk)
    assert review.judge["name"] == "default" and len(fake_llm.chat_requests()) == 1
    fake_llm.requests.clear()
    return conversation, review


def version_judged_by(org, kind: str, judge: str):
    version = criteria_new_version(org=org, kind=kind)
    return criteria_update(version=version, judge=judge)


def test_a_trial_under_a_second_named_judge_calls_that_judges_server_only(org, fake_llm, cheap_server, judges):
    conversation, _ = graded_conversation(org, fake_llm)
    version = version_judged_by(org, ItemKind.CONVERSATION, "cheap")
    cheap_server.set_default(verdicts_reply(conversation.active_path_ids))

    count = trial_count(version=version, size=5)
    trial = criteria_trial_start(version=version, size=5, counted_calls=count.judge_calls)
    reviews = [trial_item_grade(trial_id=trial.pk, index=index) for index in range(len(trial.sample))]

    assert len(cheap_server.chat_requests()) == count.judge_calls == 1
    assert {r.body["model"] for r in cheap_server.chat_requests()} == {"cheap-model"}
    assert fake_llm.chat_requests() == []
    [review] = reviews
    assert (review.state, review.judge["name"], review.judge["model"]) == (ReviewState.TRIAL, "cheap", "cheap-model")


def test_grading_under_a_version_whose_judge_is_cheap_calls_only_the_cheap_server(org, fake_llm, cheap_server, judges):
    setup_org_memory(org)
    conversation = upsert(org, support_conversation("cv-1")).conversation
    draft = save_draft(org, external_id="draft-1")
    for kind in (ItemKind.CONVERSATION, ItemKind.DRAFT):
        criteria_active(org=org, kind=kind)
        criteria_publish(version=version_judged_by(org, kind, "cheap"))
    cheap_server.script(verdicts_reply(conversation.active_path_ids), draft_reply(8))

    reviews = [conversation_grade(conversation_id=conversation.pk), draft_grade(draft_id=draft.pk)]

    assert fake_llm.chat_requests() == [] and len(cheap_server.chat_requests()) == 2
    for review in reviews:
        assert review.state == ReviewState.CURRENT and review.criteria_version.judge == "cheap"
        assert (review.judge["name"], review.judge["model"]) == ("cheap", "cheap-model")


def test_publishing_a_version_with_another_judge_makes_the_old_reviews_stale_and_regrades_them(
    org, fake_llm, cheap_server, judges
):
    conversation, old = graded_conversation(org, fake_llm)
    version = version_judged_by(org, ItemKind.CONVERSATION, "cheap")
    plan = publish_plan(version=version)
    assert (plan.judge_changes, plan.stale) == (True, 1)

    criteria_publish(version=version)

    assert not Review.objects.counting().filter(pk=old.pk).exists()  # it stopped counting: its item is owed a grading
    cheap_server.set_default(verdicts_reply(conversation.active_path_ids))
    new = conversation_grade(conversation_id=conversation.pk)
    assert (new.pk != old.pk, new.criteria_version, new.judge["name"]) == (True, version, "cheap")
    assert list(Review.objects.counting().filter(conversation=conversation)) == [new]
    assert fake_llm.chat_requests() == [] and len(cheap_server.chat_requests()) == 1


def test_a_version_naming_a_judge_no_longer_configured_grades_to_an_error_and_is_never_published(
    org, fake_llm, cheap_server, judges, settings
):
    conversation, _ = graded_conversation(org, fake_llm)
    version = version_judged_by(org, ItemKind.CONVERSATION, "cheap")
    criteria_publish(version=version)
    draft_version = version_judged_by(org, ItemKind.DRAFT, "cheap")
    # Removed from JUDGES_FILE, and the processes restarted.
    settings.JUDGES = {name: judge for name, judge in settings.JUDGES.items() if name != "cheap"}

    review = conversation_grade(conversation_id=conversation.pk)
    assert (review.route, review.reason, review.stages) == ("error", JUDGE_UNKNOWN, 0)
    assert "No judge named 'cheap' is configured" in review.detail and review.judge["name"] == "cheap"
    assert fake_llm.chat_requests() == [] and cheap_server.chat_requests() == []
    with pytest.raises(UnknownJudge, match="'cheap'"):
        criteria_publish(version=draft_version)
    with pytest.raises(UnknownJudge):
        criteria_trial_start(version=draft_version, size=1, counted_calls=1)
    draft_version.refresh_from_db()
    assert draft_version.published_at is None


def test_the_name_is_recorded_and_names_another_judge_in_the_identity_key():
    unnamed = JudgeIdentity("openai", "judge-test", "5be0c2d1", 0.0)
    cheap = JudgeIdentity("openai", "judge-test", "5be0c2d1", 0.0, name="cheap")
    assert cheap.as_json()["name"] == "cheap" and unnamed.as_json()["name"] == "default"
    assert cheap.key != unnamed.key  # two named judges of one model: a review by one is not the other's
    before_names = hashlib.sha256(
        json.dumps({"backend": "openai", "model": "judge-test", "prompt_hash": "5be0c2d1", "temperature": 0.0},
                   sort_keys=True).encode()
    ).hexdigest()[:32]  # fmt: skip
    assert unnamed.key == before_names  # a review graded before judges had names keeps its identity


def test_each_named_judge_is_built_once_per_process_and_an_unknown_name_is_refused(
    fake_llm, cheap_server, judges, settings
):
    assert judge_named("cheap") is judge_named("cheap")
    assert judge_named("cheap") is not judge_named("default") is judge_from_settings()
    with pytest.raises(
        UnknownJudge, match=r"No judge named 'nope' is configured; the configured ones are default, cheap"
    ):
        judge_named("nope")
    configure_judges(settings, default=judge_config(fake_llm, base_url=""))
    assert isinstance(judge_from_settings(), HeuristicJudge)  # no JUDGE_BASE_URL: the offline judge, as before

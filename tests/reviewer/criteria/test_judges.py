"""A criteria admin picks the judge of an unpublished version in the editor, reads it in the publish plan, and
cannot publish (or trial) a version whose judge is not configured."""

import html
import re

import pytest
from django.urls import reverse

from grading.conversations.grader import conversation_grade
from grading.models import AuditEvent, CriteriaVersion, ItemKind
from grading.reviews.versions import criteria_new_version, criteria_publish, criteria_update
from reviewer.queue.item_reads import judge_label
from tests.builders.conversations import verdicts_reply
from tests.builders.criteria import editor_data, graded_org
from tests.builders.judges import configure_judges, judge_config

pytestmark = pytest.mark.django_db


@pytest.fixture
def criteria(org, fake_llm, criteria_admin, settings):
    configure_judges(settings, cheap=judge_config(fake_llm, model="cheap-model"))
    return graded_org(org, fake_llm, criteria_admin)


@pytest.fixture
def admin_client(client_for, criteria_admin):
    return client_for(criteria_admin)


def text(response) -> str:
    """The page's words as read: tags gone, entities read, spaces collapsed, none before punctuation."""
    words = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", response.content.decode())))
    return re.sub(r" ([:;,.)])", r"\1", words)


def test_choosing_a_judge_in_the_editor_saves_it_with_the_edit_and_audits_it(admin_client, criteria, criteria_admin):
    version = criteria.draft_version
    url = reverse("criteria_version", args=[version.pk])
    page = admin_client.get(url).content.decode()
    assert '<option value="default" selected>' in page and '<option value="cheap">cheap: cheap-model at' in page

    earlier = list(AuditEvent.objects.values_list("pk", flat=True))
    assert admin_client.post(url, editor_data(version, judge="cheap")).status_code == 302

    saved = CriteriaVersion.objects.get(pk=version.pk)
    assert (saved.judge, saved.revision) == ("cheap", version.revision + 1)
    [event] = AuditEvent.objects.exclude(pk__in=earlier)
    assert (event.action, event.object_id) == ("criteria.update", str(version.pk))
    assert event.actor == criteria_admin
    assert event.detail == {
        "revision": saved.revision,
        "changed": ["judge"],
        "judge": {"from": "default", "to": "cheap"},
    }


def test_an_unknown_judge_is_refused_beside_the_field_and_nothing_is_saved(admin_client, criteria):
    version = criteria.draft_version
    events = AuditEvent.objects.count()
    response = admin_client.post(
        reverse("criteria_version", args=[version.pk]), editor_data(version, judge="gpt-9", rubric="changed")
    )
    assert response.status_code == 400
    assert response.context["form"].errors == {"judge": ["No judge named gpt-9 is configured: choose one of the list."]}
    saved = CriteriaVersion.objects.get(pk=version.pk)
    assert (saved.judge, saved.rubric, saved.revision) == ("default", version.rubric, version.revision)
    assert AuditEvent.objects.count() == events


def test_the_publish_plan_names_the_judge_and_says_when_it_is_another_than_the_active_ones(admin_client, criteria):
    url = reverse("criteria_publish", args=[criteria.draft_version.pk])
    assert "Judge: default, the same as v1's." in text(admin_client.get(url))
    CriteriaVersion.objects.filter(pk=criteria.draft_version.pk).update(judge="cheap")
    assert "Judge: cheap, not the judge of v1 (default): every item is graded again by cheap." in text(
        admin_client.get(url)
    )


def test_a_version_whose_judge_is_no_longer_configured_is_neither_published_nor_trialled(
    admin_client, criteria, settings
):
    version = criteria.draft_version
    CriteriaVersion.objects.filter(pk=version.pk).update(judge="retired")
    publish = reverse("criteria_publish", args=[version.pk])
    assert "not configured: publishing is refused" in text(admin_client.get(publish))

    refused = admin_client.post(publish, {"plan_active": criteria.active.pk})
    assert refused.status_code == 409 and "No judge named 'retired' is configured" in text(refused)
    assert CriteriaVersion.objects.get(pk=version.pk).published_at is None
    trial = admin_client.get(reverse("criteria_trial", args=[version.pk]), {"k": 1})
    assert trial.status_code == 409 and "Choose a configured judge in the editor first." in text(trial)
    # The editor shows it as it is, so saving asks for a configured judge rather than switching silently.
    editor = admin_client.get(reverse("criteria_version", args=[version.pk])).content.decode()
    assert '<option value="retired" selected>retired (not configured)</option>' in editor


def test_a_review_shows_the_name_of_the_judge_that_graded_it(admin_client, criteria, fake_llm):
    version = criteria_update(version=criteria_new_version(org=criteria.org, kind=ItemKind.CONVERSATION), judge="cheap")
    criteria_publish(version=version)
    fake_llm.set_default(verdicts_reply(criteria.conversation.active_path_ids))
    review = conversation_grade(conversation_id=criteria.conversation.pk)

    assert judge_label(review.judge).startswith("cheap · openai · cheap-model · prompt ")
    page = admin_client.get(reverse("criteria_item", args=["conversation", criteria.conversation.pk]))
    assert "conversation v2 · judge cheap" in text(page)

"""A criteria admin edits an unpublished version's routing rules and its judge's sample in the editor, beside its
judge; a bad rule is refused at the field with nothing saved; a published version shows its rules."""

import pytest
from django.urls import reverse

from grading.models import AuditEvent, CriteriaVersion, ItemKind
from grading.reviews.versions import criteria_new_version
from tests.builders.criteria import editor_data, graded_org

pytestmark = pytest.mark.django_db


@pytest.fixture
def criteria(org, fake_llm, criteria_admin):
    return graded_org(org, fake_llm, criteria_admin)


def test_a_criteria_admin_saves_routing_rules_in_the_editor_and_they_are_audited(client_for, criteria_admin, criteria):
    version = criteria.draft_version
    url = reverse("criteria_version", args=[version.pk])
    rules = '[{"when": "metadata", "match": {"tier": "enterprise"}}, {"when": "metadata", "match": {"model": "m2"}}]'

    assert client_for(criteria_admin).post(url, editor_data(version, routing=rules)).status_code == 302

    saved = CriteriaVersion.objects.get(pk=version.pk)
    assert [rule["match"] for rule in saved.routing] == [{"tier": "enterprise"}, {"model": "m2"}]
    assert "tier" in client_for(criteria_admin).get(url).content.decode()


@pytest.mark.parametrize(
    ("typed", "said"),
    [('[{"when": "sometimes"}]', "One of thumbs_down, metadata, sample."), ("[{", "Not JSON")],
)
def test_a_bad_rule_is_refused_beside_the_field_and_nothing_is_saved(client_for, criteria_admin, criteria, typed, said):
    version = criteria.draft_version
    url = reverse("criteria_version", args=[version.pk])
    response = client_for(criteria_admin).post(url, editor_data(version, routing=typed, rubric="changed"))
    assert response.status_code == 400
    assert said in " ".join(response.context["form"].errors["routing"])
    saved = CriteriaVersion.objects.get(pk=version.pk)
    assert (saved.routing, saved.rubric, saved.revision) == ([], version.rubric, version.revision)


def test_a_criteria_admin_sets_the_judges_share_of_a_slice_on_a_conversation_version(
    org, client_for, criteria_admin, criteria
):
    version = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    url = reverse("criteria_version", args=[version.pk])
    share = '[{"percent": 20, "match": {"release": "2.4"}}]'
    client = client_for(criteria_admin)

    refused = client.post(url, editor_data(version, judge_sample='[{"percent": 100}]'))
    assert refused.status_code == 400
    assert "below 100" in " ".join(refused.context["form"].errors["judge_sample"])
    assert client.post(url, editor_data(version, judge_sample=share)).status_code == 302

    assert CriteriaVersion.objects.get(pk=version.pk).judge_sample == [{"percent": 20, "match": {"release": "2.4"}}]
    event = AuditEvent.objects.filter(action="criteria.update").latest("pk")
    assert "judge_sample" in event.detail["changed"]
    assert (
        "judge_sample"
        not in client.get(reverse("criteria_version", args=[criteria.draft_version.pk])).context["form"].fields
    )

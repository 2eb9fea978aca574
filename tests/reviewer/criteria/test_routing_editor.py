"""A criteria admin edits an unpublished version's routing rules in the editor, beside its judge; a bad rule is
refused at the field with nothing saved; a published version shows its rules."""

import pytest
from django.urls import reverse

from grading.models import CriteriaVersion
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

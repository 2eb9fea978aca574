"""The Django admin shows criteria versions; a published one is read-only there as everywhere, an unpublished one
is saved through the service (validated, its revision moved on)."""

import json

import pytest
from django.contrib.admin.sites import site
from django.contrib.auth import get_user_model
from django.urls import reverse

from grading.models import CriteriaVersion, ItemKind
from grading.reviews.versions import criteria_active, criteria_new_version

pytestmark = pytest.mark.django_db


@pytest.fixture
def superuser_client(client):
    user = get_user_model().objects.create_superuser(username="root", password="unused-admin-password")
    client.force_login(user)
    return client, user


def change_url(version: CriteriaVersion) -> str:
    return reverse("admin:grading_criteriaversion_change", args=[version.pk])


def admin_form(version: CriteriaVersion, **changes) -> dict:
    return {"rubric": version.rubric, "rules": json.dumps(version.rules)} | changes


def test_a_published_version_is_read_only_in_the_admin(superuser_client, org):
    client, user = superuser_client
    published = criteria_active(org=org, kind=ItemKind.DRAFT)
    model_admin = site._registry[CriteriaVersion]
    request = type("Request", (), {"user": user})()
    assert model_admin.has_change_permission(request, published) is False
    assert model_admin.has_delete_permission(request, published) is False
    page = client.get(change_url(published))
    assert page.status_code == 200 and 'name="_save"' not in page.content.decode()
    before = CriteriaVersion.objects.filter(pk=published.pk).values().get()
    response = client.post(change_url(published), admin_form(published, rubric="rewritten in the admin"))
    assert response.status_code == 403
    assert CriteriaVersion.objects.filter(pk=published.pk).values().get() == before


def test_an_unpublished_version_is_changed_in_the_admin_through_the_service(superuser_client, org):
    client, user = superuser_client
    version = criteria_new_version(org=org, kind=ItemKind.DRAFT)
    rules = dict(version.rules, threshold=8.0)
    response = client.post(change_url(version), admin_form(version, rubric="new rubric", rules=json.dumps(rules)))
    assert response.status_code == 302
    version.refresh_from_db()
    assert (version.rubric, version.draft_rules().threshold, version.revision, version.updated_by) == (
        "new rubric", 8.0, 2, user
    )  # fmt: skip


def test_invalid_rules_are_refused_in_the_admin_naming_the_field(superuser_client, org):
    client, _ = superuser_client
    version = criteria_new_version(org=org, kind=ItemKind.DRAFT)
    rules = dict(version.rules, band=-1)
    response = client.post(change_url(version), admin_form(version, rules=json.dumps(rules)))
    assert response.status_code == 200 and "band: must be at least 0" in response.content.decode()
    version.refresh_from_db()
    assert version.revision == 1


def test_checks_edited_in_the_admin_are_validated_by_the_service(superuser_client, org):
    client, _ = superuser_client
    version = criteria_new_version(org=org, kind=ItemKind.CONVERSATION)
    checks = dict(version.checks, checks=[*version.checks["checks"], {"key": "Bad Key", "name": "x", "question": "?"}])
    response = client.post(change_url(version), admin_form(version, checks=json.dumps(checks)))
    assert response.status_code == 200
    assert "checks.3.key: a key is 1 to 32 lower-case letters" in response.content.decode()
    checks["checks"][3]["key"] = "tone"
    assert client.post(change_url(version), admin_form(version, checks=json.dumps(checks))).status_code == 302
    version.refresh_from_db()
    assert (version.check_set().keys[-1], version.revision) == ("tone", 2)

"""Org admins declare which metadata names the figures are sliced by: at most three, audited, bad input refused
with nothing changed; nobody else may."""

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from grading.models import AuditEvent, Org

pytestmark = pytest.mark.django_db


def test_an_org_admin_declares_the_dimensions_and_the_change_is_audited(client_for, org_admin, org):
    client = client_for(org_admin)
    assert "Dimensions" in client.get("/org/dimensions/").content.decode()
    response = client.post("/org/dimensions/", {"org": org.pk, "dimensions": "release, environment"})
    assert response.status_code == 302
    org.refresh_from_db()
    assert org.dimensions == ["release", "environment"]
    event = AuditEvent.objects.get(action="org.dimensions")
    assert event.actor == org_admin and event.detail == {"dimensions": ["release", "environment"], "was": []}


@pytest.mark.parametrize(
    ("given", "why"),
    [
        ("release, environment, model, tier", "at most 3"),
        ("release, release", "named twice"),
        ("2release", "not a metadata name"),
        ("<script>", "not a metadata name"),
    ],
)
def test_bad_dimensions_are_refused_naming_the_field_and_change_nothing(client_for, org_admin, org, given, why):
    response = client_for(org_admin).post("/org/dimensions/", {"org": org.pk, "dimensions": given})
    page = response.content.decode()
    assert response.status_code == 400 and "dimensions:" in page and why in page and "<script>" not in page
    assert Org.objects.get(pk=org.pk).dimensions == [] and not AuditEvent.objects.filter(action="org.dimensions")


def test_nobody_but_an_org_admin_of_that_org_may_declare_them(client_for, stakeholder, other_org_admin, org):
    assert client_for(stakeholder).post("/org/dimensions/", {"org": org.pk, "dimensions": "release"}).status_code == 403
    assert (
        client_for(other_org_admin).post("/org/dimensions/", {"org": org.pk, "dimensions": "release"}).status_code
        == 404
    )
    assert Org.objects.get(pk=org.pk).dimensions == []


def test_the_org_command_declares_them_from_the_shell(org, capsys):
    call_command("org", "dimensions", "--slug", org.slug, "release", "model")
    assert Org.objects.get(pk=org.pk).dimensions == ["release", "model"]
    with pytest.raises(CommandError, match="at most 3"):
        call_command("org", "dimensions", "--slug", org.slug, "a", "b", "c", "d")
    call_command("org", "dimensions", "--slug", org.slug)
    assert "release, model" in capsys.readouterr().out

"""`manage.py org`: how a deployment gets its orgs (the commands that need one point here when there is none)."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from grading.models import AuditEvent, Org

pytestmark = pytest.mark.django_db


def org_command(*args: str) -> str:
    out = StringIO()
    call_command("org", *args, stdout=out)
    return out.getvalue()


def test_a_command_needing_an_org_where_there_is_none_names_the_command_that_makes_one():
    with pytest.raises(CommandError) as refused:
        call_command("apikey", "create", "--org", "acme", "--name", "pipeline")
    assert "manage.py org add" in str(refused.value)
    assert "Django admin" not in str(refused.value)


def test_it_adds_an_org_audited_and_lists_the_orgs():
    assert org_command("add", "--slug", "acme", "--name", "Acme Corp") == "added: acme  Acme Corp\n"
    org = Org.objects.get(slug="acme")
    event = AuditEvent.objects.get(action="org.create")
    assert (event.org, event.detail) == (org, {"slug": "acme", "name": "Acme Corp"})
    org_command("add", "--slug", "globex", "--name", "Globex")
    assert org_command("list") == "acme  Acme Corp\nglobex  Globex\n"


@pytest.mark.parametrize(
    ("slug", "name", "refusal"),
    [
        ("acme", "Again", "already"),
        ("Not A Slug", "Acme", "slug"),
        ("x" * 65, "Acme", "slug"),
        ("other", " ", "name"),
        ("other", "n" * 201, "name"),
    ],
)
def test_a_bad_or_taken_slug_or_name_is_refused_and_nothing_is_written(slug, name, refusal):
    org_command("add", "--slug", "acme", "--name", "Acme Corp")
    with pytest.raises(CommandError, match=refusal):
        org_command("add", "--slug", slug, "--name", name)
    assert Org.objects.count() == 1 and AuditEvent.objects.count() == 1

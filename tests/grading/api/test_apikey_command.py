"""`manage.py apikey`, as docs/org-admins.md documents it: `list` and `revoke --prefix` work without `--org`."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from grading.api.keys import api_key_create
from grading.models import ApiKey

pytestmark = pytest.mark.django_db


def apikey(*args: str) -> str:
    out = StringIO()
    call_command("apikey", *args, stdout=out)
    return out.getvalue()


def test_list_without_an_org_shows_every_orgs_keys_with_their_org_and_never_a_secret(org, other_org):
    ours = api_key_create(org=org, name="writer pipeline")
    theirs = api_key_create(org=other_org, name="their pipeline")
    listing = apikey("list")
    assert f"northwind  {ours.api_key.prefix}…  writer pipeline  live" in listing
    assert f"globex  {theirs.api_key.prefix}…  their pipeline  live" in listing
    assert ours.plaintext not in listing and theirs.plaintext not in listing
    assert "globex" not in apikey("list", "--org", "northwind")


def test_revoke_by_prefix_alone_revokes_that_key_and_no_other(org, other_org):
    doomed = api_key_create(org=org, name="leaked")
    kept = api_key_create(org=other_org, name="fine")
    assert "revoked" in apikey("revoke", "--prefix", doomed.api_key.prefix + "…")  # pasted from `list`
    assert ApiKey.objects.get(pk=doomed.api_key.pk).revoked_at is not None
    assert ApiKey.objects.get(pk=kept.api_key.pk).revoked_at is None


def test_a_prefix_shared_by_two_orgs_needs_the_org_and_revokes_nothing_without_it(org, other_org):
    ours = api_key_create(org=org, name="ours").api_key
    theirs = api_key_create(org=other_org, name="theirs").api_key
    ApiKey.objects.filter(pk=theirs.pk).update(prefix=ours.prefix)
    with pytest.raises(CommandError, match="--org"):
        apikey("revoke", "--prefix", ours.prefix)
    assert not ApiKey.objects.filter(revoked_at__isnull=False).exists()
    apikey("revoke", "--prefix", ours.prefix, "--org", "globex")
    assert list(ApiKey.objects.filter(revoked_at__isnull=False)) == [ApiKey.objects.get(pk=theirs.pk)]


def test_an_unknown_prefix_or_org_is_an_error_naming_it(org):
    with pytest.raises(CommandError, match="tg_nothing"):
        apikey("revoke", "--prefix", "tg_nothing")
    with pytest.raises(CommandError, match="nowhere"):
        apikey("list", "--org", "nowhere")

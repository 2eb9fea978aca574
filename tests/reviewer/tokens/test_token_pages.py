"""/account/tokens/: a person makes a token in one of their orgs, sees it once, and revokes it; an org admin sees and
revokes their org's people's tokens, never reads them. Both audited with who did it."""

import pytest

from grading.models import AuditEvent
from reviewer.models import PersonalToken, Role
from tests.builders.people import make_person
from tests.builders.tokens import api, token_of

pytestmark = pytest.mark.django_db


def test_it_shows_a_new_token_once_and_the_api_takes_it_as_the_person(client_for, org, operator):
    page = client_for(operator).post("/account/tokens/", {"org": org.pk, "name": "ci", "expires": "30"})
    plaintext = page.context["issued"].plaintext
    assert plaintext.startswith("tg_pat_") and plaintext in page.content.decode()
    token = PersonalToken.objects.get()
    assert plaintext not in str(list(PersonalToken.objects.values())) and token.expires_at is not None
    assert plaintext not in client_for(operator).get("/account/tokens/").content.decode()
    assert api(client_for(operator), plaintext, "GET", "/whoami").json()["person"] == "dana"
    event = AuditEvent.objects.get(action="personal_token.create")
    assert event.actor == operator and plaintext not in str(event.detail)


def test_it_refuses_a_token_in_an_org_the_person_is_not_a_member_of(client_for, org, other_org, operator):
    page = client_for(operator).post("/account/tokens/", {"org": other_org.pk, "name": "ci", "expires": ""})
    assert page.status_code == 404 and not PersonalToken.objects.exists()


def test_it_refuses_a_revoked_token_at_once_and_records_who_revoked_it(client, client_for, org, operator):
    plaintext = token_of(operator, org)
    assert api(client, plaintext, "GET", "/whoami").status_code == 200
    token = PersonalToken.objects.get()
    client_for(operator).post(f"/account/tokens/{token.pk}/revoke/")
    assert api(client, plaintext, "GET", "/whoami").status_code == 401
    assert AuditEvent.objects.get(action="personal_token.revoke").actor == operator


def test_it_refuses_an_expired_token(client, org, operator):
    plaintext = token_of(operator, org)
    PersonalToken.objects.update(expires_at="2020-01-01T00:00:00Z")
    assert api(client, plaintext, "GET", "/whoami").status_code == 401


def test_it_lets_no_one_else_revoke_a_persons_token(client_for, org, operator):
    token_of(operator, org)
    token = PersonalToken.objects.get()
    other = make_person("olga", org, Role.OPERATOR)
    assert client_for(other).post(f"/account/tokens/{token.pk}/revoke/").status_code == 404
    assert PersonalToken.objects.get().revoked_at is None


def test_an_org_admin_sees_and_revokes_their_orgs_tokens_and_not_anothers(client, client_for, org, other_org, operator):
    plaintext = token_of(operator, org)
    outsider = make_person("mo", other_org, Role.OPERATOR)
    token_of(outsider, other_org, "theirs")
    admin = make_person("ada", org, Role.ORG_ADMIN)
    page = client_for(admin).get("/org/tokens/").content.decode()
    assert "laptop" in page and "theirs" not in page and plaintext not in page
    theirs = PersonalToken.objects.get(name="theirs")
    assert client_for(admin).post(f"/org/tokens/{theirs.pk}/revoke/").status_code == 404
    ours = PersonalToken.objects.get(name="laptop")
    client_for(admin).post(f"/org/tokens/{ours.pk}/revoke/")
    assert api(client, plaintext, "GET", "/whoami").status_code == 401
    assert AuditEvent.objects.get(action="personal_token.revoke").actor == admin
    assert client_for(operator).get("/org/tokens/").status_code == 403

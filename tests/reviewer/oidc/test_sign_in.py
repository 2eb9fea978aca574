"""Single sign-on with a real OpenID provider on loopback: the sign-in, the roles its groups grant and take away,
a rotated signing key, accounts made or refused, and signing out at the provider too."""

from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from joserfc import jws

from grading.models import AuditEvent
from grading.reviews.audit_reads import audit_events
from reviewer.models import Invitation, Membership, Role, SignInIdentity
from reviewer.oidc.provider import ID_TOKEN_SESSION_KEY
from tests.builders.people import invitation_link, make_person, make_unused_account
from tests.builders.sign_in import sign_in
from tests.fakes.oidc_provider import POST_LOGOUT_REDIRECT_URI

ADA = "ada-0001"  # her `sub` at the provider


def roles_of(user, org) -> set[str]:
    return set(Membership.objects.filter(user=user, org=org).values_list("role", flat=True))


def test_a_person_signs_in_with_the_provider_and_gets_the_roles_their_groups_grant(client, single_sign_on, org):
    single_sign_on.set_account(ADA, email="ada@example.com", email_verified=True, groups=["tollgate-ops", "other"])

    response = sign_in(client, single_sign_on, ADA, next_url="/queue/")

    assert response.status_code == 302 and response["Location"] == "/queue/"
    identity = SignInIdentity.objects.select_related("user").get(issuer=single_sign_on.issuer, subject=ADA)
    ada = identity.user
    assert (ada.username, ada.email, ada.has_usable_password()) == ("ada@example.com", "ada@example.com", False)
    assert roles_of(ada, org) == {Role.OPERATOR}
    assert client.get("/queue/").status_code == 200
    actions = list(AuditEvent.objects.order_by("pk").values_list("action", flat=True))
    # The account and identity are recorded once the groups made ada a member: under the org that then has her.
    assert actions == ["membership.create", "person.create", "sign_in_identity.create", "user.login"]
    granted = AuditEvent.objects.get(action="membership.create")
    assert (granted.org, granted.detail["role"], granted.detail["group"]) == (org, "operator", "tollgate-ops")


def test_groups_changed_at_the_provider_change_the_memberships_they_govern_at_the_next_sign_in(
    client, single_sign_on, org
):
    make_person("root", org, Role.ORG_ADMIN)  # so that ada is not the org's last org admin when she loses it
    single_sign_on.set_account(ADA, groups=["tollgate-ops"])
    sign_in(client, single_sign_on, ADA)
    ada = SignInIdentity.objects.get(subject=ADA).user
    Membership.objects.create(user=ada, org=org, role=Role.STAKEHOLDER)  # by an org admin: no rule governs it
    client.logout()

    single_sign_on.set_account(ADA, groups=["tollgate-admins"])
    assert sign_in(client, single_sign_on, ADA).status_code == 302

    assert roles_of(ada, org) == {Role.ORG_ADMIN, Role.CRITERIA_ADMIN, Role.STAKEHOLDER}
    removed = AuditEvent.objects.get(action="membership.delete")
    assert (removed.org, removed.detail["user"], removed.detail["role"]) == (org, ada.username, "operator")
    assert AuditEvent.objects.filter(action="membership.create").count() == 3
    assert AuditEvent.objects.filter(action="user.login", actor=ada).count() == 2

    client.logout()
    single_sign_on.set_account(ADA)  # in no group at all
    sign_in(client, single_sign_on, ADA)
    assert roles_of(ada, org) == {Role.STAKEHOLDER}


def test_groups_that_no_longer_grant_org_admin_leave_the_orgs_last_org_admin_in_place(client, single_sign_on, org):
    single_sign_on.set_account(ADA, groups=["tollgate-admins"])
    sign_in(client, single_sign_on, ADA)
    ada = SignInIdentity.objects.get(subject=ADA).user
    client.logout()

    single_sign_on.set_account(ADA, groups=["tollgate-ops"])
    assert sign_in(client, single_sign_on, ADA).status_code == 302

    assert roles_of(ada, org) == {Role.ORG_ADMIN, Role.OPERATOR}  # criteria admin went; the last org admin stays
    removed = AuditEvent.objects.filter(action="membership.delete").values_list("detail__role", flat=True)
    assert list(removed) == ["criteria_admin"]


def test_a_rotated_signing_key_is_picked_up_without_a_restart(client, single_sign_on):
    single_sign_on.set_account(ADA, groups=["tollgate-ops"])
    assert sign_in(client, single_sign_on, ADA).status_code == 302  # Tollgate now holds the provider's keys
    old_key = single_sign_on.key
    client.logout()

    new_key = single_sign_on.rotate_key()
    response = sign_in(client, single_sign_on, ADA)

    assert response.status_code == 302
    header = jws.extract_compact(client.session[ID_TOKEN_SESSION_KEY].encode()).protected
    assert header["kid"] == new_key.kid != old_key.kid


def test_a_first_sign_in_never_takes_over_an_account_another_orgs_admin_made_for_the_address(
    client, single_sign_on, org, other_org
):
    """An account nobody has used, made for ada's address by another org's admin (who may hold its set-password
    link): her first sign-in makes an account of her own and leaves that one, and its role, alone."""
    planted = make_unused_account("ada", other_org, Role.OPERATOR, email="Ada@Example.com")
    single_sign_on.set_account(ADA, email="ada@example.com", email_verified=True)

    assert sign_in(client, single_sign_on, ADA).status_code == 302

    ada = SignInIdentity.objects.get(subject=ADA).user
    assert ada != planted and ada.email == "ada@example.com"
    assert not Membership.objects.filter(user=ada).exists()
    planted.refresh_from_db()
    assert planted.last_login is None and not planted.has_usable_password()


def test_an_invitation_is_accepted_by_signing_in_with_the_provider_from_its_page(
    client, client_for, single_sign_on, org, settings, mailoutbox
):
    settings.OIDC_CREATE_USERS = False  # an invitation is how a newcomer gets in
    admin = make_person("olive", org, Role.ORG_ADMIN)
    client_for(admin).post(
        "/org/", {"org": org.pk, "person": "ada@example.com", "role": "stakeholder", "reach": "whole"}
    )
    client.logout()
    page = client.get(invitation_link(mailoutbox, "ada@example.com"), follow=True)
    assert b"Sign in with Loopback ID" in page.content
    single_sign_on.set_account(ADA, email="ada@example.com", email_verified=True)

    response = sign_in(client, single_sign_on, ADA, accept_invitation=True)

    assert response.status_code == 302
    ada = SignInIdentity.objects.get(subject=ADA).user
    assert roles_of(ada, org) == {Role.STAKEHOLDER}
    assert not Invitation.objects.exists()
    accepted = AuditEvent.objects.get(action="invitation.accept")
    assert (accepted.org, accepted.actor, accepted.detail["via"]) == (org, ada, "oidc")
    client.logout()
    assert b"does not work" in client.get(invitation_link(mailoutbox, "ada@example.com"), follow=True).content


def test_a_plain_sign_in_accepts_no_invitation_not_even_one_to_the_verified_address(client, single_sign_on, org):
    """Joining an org is the invitee's choice, made on the invitation's page: another org's admin cannot make
    someone their member by inviting the address they sign in with."""
    Invitation.objects.create(org=org, email="ada@example.com", role=Role.OPERATOR)
    single_sign_on.set_account(ADA, email="ada@example.com", email_verified=True)

    assert sign_in(client, single_sign_on, ADA).status_code == 302

    assert not Membership.objects.exists() and Invitation.objects.exists()


def test_a_first_sign_on_is_in_the_trail_of_the_org_its_groups_made_the_person_a_member_of(
    client, single_sign_on, org, other_org
):
    single_sign_on.set_account(ADA, email="ada@example.com", email_verified=True, groups=["tollgate-ops"])

    assert sign_in(client, single_sign_on, ADA).status_code == 302

    ada = SignInIdentity.objects.get(subject=ADA).user
    trail = audit_events(org.pk)  # what the org's audit page, its CSV and the API read
    assert {(event.action, event.actor) for event in trail} == {
        ("membership.create", None),
        ("person.create", None),
        ("sign_in_identity.create", ada),
        ("user.login", ada),
    }
    assert trail.get(action="user.login").detail == {"via": "oidc"}
    assert not audit_events(other_org.pk).exists() and not AuditEvent.objects.filter(org=None).exists()


def test_a_first_sign_on_into_two_orgs_is_in_the_trail_of_both(client, single_sign_on, org, other_org, settings):
    settings.OIDC_GROUP_ROLES = (*settings.OIDC_GROUP_ROLES, ("tollgate-ops", other_org.slug, "stakeholder"))
    single_sign_on.set_account(ADA, email="ada@example.com", email_verified=True, groups=["tollgate-ops"])

    assert sign_in(client, single_sign_on, ADA).status_code == 302

    for each in (org, other_org):
        actions = sorted(audit_events(each.pk).values_list("action", flat=True))
        assert actions == ["membership.create", "person.create", "sign_in_identity.create", "user.login"], each
    assert not AuditEvent.objects.filter(org=None).exists()


@pytest.mark.parametrize(
    ("account", "verified"),
    [("waiting", False), ("with_password", True), ("signed_in_before", True)],
    ids=["address-not-verified", "owner-set-a-password", "account-already-used"],
)
def test_an_address_alone_never_hands_over_an_account(client, single_sign_on, account, verified):
    existing = make_person("ada") if account == "with_password" else get_user_model().objects.create_user("ada")
    existing.email = "ada@example.com"
    existing.save()
    if account == "signed_in_before":
        SignInIdentity.objects.create(user=existing, issuer="https://elsewhere.example", subject="x")
    single_sign_on.set_account(ADA, email="ada@example.com", email_verified=verified, preferred_username="ada")

    assert sign_in(client, single_sign_on, ADA).status_code == 302

    ada = SignInIdentity.objects.get(subject=ADA).user
    assert ada != existing and ada.username != "ada"
    assert ada.email == ("ada@example.com" if verified else "")


def test_with_account_making_off_a_stranger_is_refused_and_nothing_is_written(client, single_sign_on, settings):
    settings.OIDC_CREATE_USERS = False
    single_sign_on.set_account(ADA, email="ada@example.com", email_verified=True, groups=["tollgate-admins"])

    response = sign_in(client, single_sign_on, ADA)

    assert response.status_code == 403
    assert b"ask an org admin to add you" in response.content
    assert get_user_model().objects.count() == 0
    assert (SignInIdentity.objects.count(), Membership.objects.count(), AuditEvent.objects.count()) == (0, 0, 0)
    assert "_auth_user_id" not in client.session


def test_signing_out_signs_out_at_the_provider_too(client, single_sign_on):
    single_sign_on.set_account(ADA)
    sign_in(client, single_sign_on, ADA)
    id_token = client.session[ID_TOKEN_SESSION_KEY]

    response = client.post(reverse("logout"))

    assert response.status_code == 302
    end_session = response["Location"]
    assert end_session.startswith(f"{single_sign_on.issuer}/session/end")
    query = parse_qs(urlsplit(end_session).query)
    assert query["id_token_hint"] == [id_token]
    assert query["post_logout_redirect_uri"] == [POST_LOGOUT_REDIRECT_URI]
    assert "_auth_user_id" not in client.session
    # The provider accepts it: its page asking to confirm the sign-out, not an error about the hint or the return.
    confirm = httpx.get(end_session)
    assert confirm.status_code == 200 and "logout" in confirm.text.lower()


def test_signing_out_after_a_password_sign_in_stays_with_tollgate(client, single_sign_on, operator):
    client.force_login(operator)
    response = client.post(reverse("logout"))
    assert response.status_code == 302 and response["Location"] == reverse("login")


def test_the_sign_in_page_offers_the_provider_only_when_it_is_configured(client, single_sign_on, settings):
    page = client.get(reverse("login")).content.decode()
    assert "Sign in with Loopback ID" in page and 'name="password"' in page
    settings.OIDC_ISSUER = ""
    page = client.get(reverse("login")).content.decode()
    assert "Sign in with" not in page and 'name="password"' in page
    assert client.post(reverse("oidc_start")).status_code == 302
    assert client.get(reverse("oidc_callback") + "?code=x&state=y")["Location"] == reverse("login")


def test_a_provider_that_does_not_answer_gets_a_page_saying_so(client, single_sign_on, settings):
    settings.OIDC_ISSUER = "http://127.0.0.1:9"  # discard: nothing listens
    response = client.post(reverse("oidc_start"))
    assert response.status_code == 502
    assert b"could not be reached" in response.content


def test_the_provider_saying_no_is_a_page_not_an_error(client, single_sign_on):
    single_sign_on.set_account(ADA)
    client.post(reverse("oidc_start"))
    state = next(key for key, _ in client.session.items() if key.startswith("_state_oidc_")).removeprefix(
        "_state_oidc_"
    )

    response = client.get(reverse("oidc_callback"), {"error": "access_denied", "state": state})

    assert response.status_code == 403
    assert get_user_model().objects.count() == 0


def test_sign_in_keeps_the_next_page_only_on_this_site(client, single_sign_on):
    single_sign_on.set_account(ADA)
    response = sign_in(client, single_sign_on, ADA, next_url="https://evil.example/")
    assert response["Location"] == "/"


def test_a_provider_whose_discovery_names_another_issuer_is_not_used(client, single_sign_on, settings):
    settings.OIDC_ISSUER = single_sign_on.issuer.replace("127.0.0.1", "localhost")  # the same server, another name
    response = client.post(reverse("oidc_start"))
    assert response.status_code == 502


def test_a_turned_off_account_is_refused_and_its_sign_in_not_recorded(client, single_sign_on, org):
    single_sign_on.set_account(ADA, groups=["tollgate-ops"])
    sign_in(client, single_sign_on, ADA)
    client.logout()
    ada = SignInIdentity.objects.get(subject=ADA).user
    ada.is_active = False
    ada.save()
    single_sign_on.set_account(ADA, groups=["tollgate-admins"])
    written = AuditEvent.objects.count()

    response = sign_in(client, single_sign_on, ADA)

    assert response.status_code == 403 and b"turned off" in response.content
    assert roles_of(ada, org) == {Role.OPERATOR}
    assert AuditEvent.objects.count() == written

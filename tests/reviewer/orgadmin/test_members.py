"""Members and roles from the browser: an org admin lists the org's people, gives a role (to an account that
exists, or a new one with a one-time set-password link), changes what a membership covers and revokes it; each
change audited, bad input refused with nothing changed, and the org's last org admin kept."""

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from grading.models import AuditEvent
from reviewer.models import Membership, Pool, Role
from tests.builders.people import make_person

pytestmark = pytest.mark.django_db

PAGES = ["/org/", "/org/keys/", "/org/webhook/", "/org/retention/"]


def add(client, org, person: str, role: str = "operator", **fields):
    return client.post("/org/", {"org": org.pk, "person": person, "role": role, "reach": "whole", **fields})


def actions() -> list[str]:
    return list(AuditEvent.objects.order_by("pk").values_list("action", flat=True))


# --- access -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", PAGES)
def test_anonymous_is_sent_to_sign_in_and_other_roles_get_403(client, client_for, operator, criteria_admin, path):
    response = client.get(path)
    assert response.status_code == 302 and response["Location"].startswith("/login/")
    for person in (operator, criteria_admin):
        assert client_for(person).get(path).status_code == 403


@pytest.mark.parametrize("path", PAGES)
def test_an_org_admin_sees_their_org_and_not_another(client_for, org_admin, other_org_admin, path):
    page = client_for(org_admin).get(path).content.decode()
    assert "Northwind" in page and "Globex" not in page


def test_another_orgs_memberships_and_org_are_404_to_an_org_admin(client_for, org_admin, other_org_operator, other_org):
    theirs = Membership.objects.get(user=other_org_operator)
    client = client_for(org_admin)
    assert client.post(f"/org/members/{theirs.pk}/revoke/").status_code == 404
    assert client.post(f"/org/members/{theirs.pk}/scope/", {"reach": "part", "drafts": "on"}).status_code == 404
    assert add(client, other_org, "olive", "stakeholder").status_code == 404
    assert Membership.objects.filter(org=other_org).count() == 1
    assert not AuditEvent.objects.filter(action__startswith="membership.").exists()


# --- the list, and granting -----------------------------------------------------------------------------------------


def test_it_lists_the_orgs_people_with_their_roles_and_reach(client_for, org_admin, operator, org):
    Membership.objects.create(user=operator, org=org, role=Role.STAKEHOLDER, applications=["billing"], drafts=False)
    page = client_for(org_admin).get("/org/").content.decode()
    assert "dana" in page and "olive" in page
    assert "billing" in page and "always the whole org" in page
    assert 'class="on">Org</a>' in page  # the nav link, for org admins only


def test_it_gives_an_existing_person_a_role_limited_to_applications_audited(client_for, org_admin, roleless, org):
    response = add(client_for(org_admin), org, "riley", reach="part", applications=" support, billing ,support")
    assert response.status_code == 302
    membership = Membership.objects.get(user=roleless, org=org)
    assert (membership.role, membership.applications, membership.drafts) == ("operator", ["billing", "support"], False)
    event = AuditEvent.objects.get(action="membership.create")
    assert event.actor == org_admin and event.org == org
    assert event.detail == {
        "user": "riley",
        "role": "operator",
        "applications": ["billing", "support"],
        "drafts": False,
    }


def test_a_person_is_found_by_their_email_address(client_for, org_admin, roleless, org):
    roleless.email = "Riley@Example.com"
    roleless.save()
    assert add(client_for(org_admin), org, "riley@example.com", "stakeholder").status_code == 302
    assert Membership.objects.filter(user=roleless, org=org, role=Role.STAKEHOLDER).exists()


def test_a_name_nobody_has_is_a_form_error_unless_a_new_account_is_asked_for(client_for, org_admin, org):
    users = get_user_model().objects.count()
    response = add(client_for(org_admin), org, "newcomer")
    assert response.status_code == 400
    assert "Nobody is called newcomer" in response.content.decode()
    assert get_user_model().objects.count() == users
    assert not AuditEvent.objects.exists()


@pytest.mark.parametrize("role", ["criteria_admin", "org_admin"])
def test_a_whole_org_role_limited_to_applications_is_a_form_error_and_no_account_is_made(
    client_for, org_admin, org, role
):
    response = add(client_for(org_admin), org, "newcomer", role, reach="part", applications="billing", new_account="on")
    assert response.status_code == 400
    assert "covers the whole org" in response.content.decode()
    assert not get_user_model().objects.filter(username="newcomer").exists()
    assert not AuditEvent.objects.exists()


def test_a_role_held_already_is_a_form_error(client_for, org_admin, operator, org):
    response = add(client_for(org_admin), org, "dana", "operator")
    assert response.status_code == 400
    assert "already" in response.content.decode()
    assert Membership.objects.filter(user=operator).count() == 1


def test_a_new_account_gets_a_set_password_link_shown_once_that_works_once(client, client_for, org_admin, org):
    response = add(client_for(org_admin), org, "nia@example.com", "stakeholder", new_account="on")
    assert response.status_code == 200
    page = response.content.decode()
    link = page.split('<code class="ident">')[1].split("</code>")[0]
    assert link.startswith("http://testserver/org/set-password/")
    person = get_user_model().objects.get(username="nia@example.com")
    assert person.email == "nia@example.com" and not person.has_usable_password()
    assert Membership.objects.filter(user=person, org=org, role=Role.STAKEHOLDER).exists()
    assert actions() == ["person.create", "membership.create"]
    assert link not in client_for(org_admin).get("/org/").content.decode()  # shown once
    client.logout()

    form_page = client.get(link, follow=True)
    assert b"new_password1" in form_page.content
    chosen = {"new_password1": "a long and new password 42", "new_password2": "a long and new password 42"}
    assert client.post(form_page.redirect_chain[-1][0], chosen).status_code == 302
    signed_in = client.post("/login/", {"username": "nia@example.com", "password": "a long and new password 42"})
    assert signed_in.status_code == 302 and "_auth_user_id" in client.session
    client.logout()
    assert b"does not work" in client.get(link, follow=True).content  # used: refused


def test_a_mismatched_password_on_the_set_password_page_sets_nothing(client, client_for, org_admin, org):
    page = add(client_for(org_admin), org, "nia", new_account="on").content.decode()
    link = page.split('<code class="ident">')[1].split("</code>")[0]
    client.logout()
    form_url = client.get(link, follow=True).redirect_chain[-1][0]
    response = client.post(form_url, {"new_password1": "one long password 42", "new_password2": "another one 42"})
    assert response.status_code == 200
    assert not get_user_model().objects.get(username="nia").has_usable_password()


# --- changing what a membership covers, and revoking ---------------------------------------------------------------


def test_it_changes_what_a_membership_covers_audited(client_for, org_admin, operator, org):
    membership = Membership.objects.get(user=operator)
    response = client_for(org_admin).post(
        f"/org/members/{membership.pk}/scope/", {"reach": "part", "applications": "billing", "drafts": "on"}
    )
    assert response.status_code == 302
    membership.refresh_from_db()
    assert (membership.applications, membership.drafts) == (["billing"], True)
    event = AuditEvent.objects.get(action="membership.update")
    assert event.actor == org_admin
    assert event.detail["before"] == {"applications": None, "drafts": True}


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"reach": "part"},  # nothing covered
        {"reach": "part", "applications": "billing,,support"},
        {"reach": "part", "applications": "x" * 101, "drafts": "on"},
        {"reach": "everything"},
    ],
)
def test_a_bad_scope_is_a_form_error_and_changes_nothing(client_for, org_admin, operator, fields):
    membership = Membership.objects.get(user=operator)
    response = client_for(org_admin).post(f"/org/members/{membership.pk}/scope/", fields)
    assert response.status_code == 400
    assert b"Nothing was changed" in response.content
    membership.refresh_from_db()
    assert (membership.applications, membership.drafts) == (None, True)
    assert not AuditEvent.objects.exists()


def test_an_org_admins_membership_cannot_be_limited(client_for, org_admin):
    membership = Membership.objects.get(user=org_admin)
    response = client_for(org_admin).post(f"/org/members/{membership.pk}/scope/", {"reach": "part", "drafts": "on"})
    assert response.status_code == 400
    membership.refresh_from_db()
    assert membership.applications is None


def test_it_revokes_a_role_audited(client_for, org_admin, operator, org):
    membership = Membership.objects.get(user=operator)
    assert client_for(org_admin).post(f"/org/members/{membership.pk}/revoke/").status_code == 302
    assert not Membership.objects.filter(pk=membership.pk).exists()
    event = AuditEvent.objects.get(action="membership.delete")
    assert (event.actor, event.object_id, event.detail["user"]) == (org_admin, str(membership.pk), "dana")


def test_revoking_a_persons_last_queue_role_takes_them_out_of_the_orgs_pools_only(
    client_for, org_admin, operator, org, other_org
):
    lead = Membership.objects.create(user=operator, org=org, role=Role.LEAD)
    Membership.objects.create(user=operator, org=other_org, role=Role.OPERATOR)
    pools = [Pool.objects.create(org=org, name="billing team"), Pool.objects.create(org=other_org, name="billing team")]
    for pool in pools:
        pool.members.add(operator)
    client = client_for(org_admin)

    assert client.post(f"/org/members/{lead.pk}/revoke/").status_code == 302
    assert set(operator.pools.all()) == set(pools)  # still an operator here: still works the pool's items
    assert client.post(f"/org/members/{Membership.objects.get(user=operator, org=org).pk}/revoke/").status_code == 302

    assert list(operator.pools.all()) == [pools[1]]  # the other org's pool is the other org's business
    events = AuditEvent.objects.filter(action="membership.delete").order_by("pk")
    assert [event.detail.get("pools_left") for event in events] == [None, ["billing team"]]


def test_the_last_org_admin_cannot_be_revoked_and_one_of_two_can(client_for, org_admin, org):
    mine = Membership.objects.get(user=org_admin)
    client = client_for(org_admin)
    response = client.post(f"/org/members/{mine.pk}/revoke/")
    assert response.status_code == 409
    assert "last org admin" in response.content.decode()
    assert Membership.objects.filter(pk=mine.pk).exists()
    assert not AuditEvent.objects.exists()

    make_person("second", org, Role.ORG_ADMIN)
    assert client.post(f"/org/members/{mine.pk}/revoke/").status_code == 302
    assert not Membership.objects.filter(pk=mine.pk).exists()
    assert client.get("/org/").status_code == 403  # no longer an org admin anywhere


# --- the first org admin, from the shell ----------------------------------------------------------------------------


def test_the_member_command_makes_an_org_admin_and_refuses_to_limit_one(org, roleless):
    call_command("member", "add", "--org", "northwind", "--user", "riley", "--role", "org_admin")
    assert Membership.objects.filter(user=roleless, role=Role.ORG_ADMIN, applications=None).exists()
    with pytest.raises(CommandError, match="covers the whole org"):
        call_command(
            "member", "add", "--org", "northwind", "--user", "riley", "--role", "org_admin", "--applications", "x"
        )
    with pytest.raises(CommandError, match="last org admin"):
        call_command("member", "remove", "--org", "northwind", "--user", "riley", "--role", "org_admin")


def test_a_lost_link_is_replaced_only_for_an_account_nobody_has_used_and_only_this_org_holds(
    client_for, org_admin, other_org_admin, org, other_org, operator
):
    client = client_for(org_admin)
    add(client, org, "nia", new_account="on")
    nia = Membership.objects.get(user__username="nia")
    response = client.post(f"/org/members/{nia.pk}/password-link/")
    assert response.status_code == 200 and b"/org/set-password/" in response.content
    assert AuditEvent.objects.filter(action="person.password_link", actor=org_admin).count() == 1

    dana = Membership.objects.get(user=operator)  # has a password: theirs to change
    assert client.post(f"/org/members/{dana.pk}/password-link/").status_code == 409
    Membership.objects.create(user=nia.user, org=other_org, role=Role.OPERATOR)  # another org's too now
    response = client.post(f"/org/members/{nia.pk}/password-link/")
    assert response.status_code == 409 and b"/org/set-password/" not in response.content
    theirs = Membership.objects.get(user=nia.user, org=other_org)
    assert client.post(f"/org/members/{theirs.pk}/password-link/").status_code == 404


def test_a_person_whose_passwords_are_off_gets_no_link_and_an_outstanding_link_stops_working(
    client, client_for, org_admin, org, settings
):
    page = add(client_for(org_admin), org, "nia@example.com", new_account="on").content.decode()
    link = page.split('<code class="ident">')[1].split("</code>")[0]
    settings.LOCAL_PASSWORDS_OFF_FOR_DOMAINS = ["example.com"]  # they sign in with single sign-on from now on
    response = add(client_for(org_admin), org, "sol@example.com", new_account="on")
    assert response.status_code == 302  # made, with no link: the provider signs them in
    assert Membership.objects.filter(user__username="sol@example.com").exists()
    nia = Membership.objects.get(user__username="nia@example.com")
    assert client_for(org_admin).post(f"/org/members/{nia.pk}/password-link/").status_code == 409
    client.logout()
    assert b"does not work" in client.get(link, follow=True).content

"""Members and roles from the browser: an org admin lists the org's people, gives a member another role, changes
what a membership covers and revokes it; each change audited, bad input refused with nothing changed, and the org's
last org admin kept. Another org's people are neither found nor shown (someone new is invited by address:
test_invitations.py), and a set-password link dies with any change to the person's memberships."""

import re
from datetime import UTC, datetime

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from grading.models import AuditEvent, ServiceTarget
from reviewer.models import Invitation, Membership, Pool, Role
from reviewer.orgadmin.members import membership_scope
from tests.builders.conversations import applications_of
from tests.builders.people import make_person, make_unused_account

pytestmark = pytest.mark.django_db

PAGES = ["/org/", "/org/keys/", "/org/webhook/", "/org/retention/"]


def add(client, org, person: str, role: str = "operator", *, follow: bool = False, **fields):
    fields = {"org": org.pk, "person": person, "role": role, "reach": "whole", **fields}
    return client.post("/org/", fields, follow=follow)


def actions() -> list[str]:
    return list(AuditEvent.objects.order_by("pk").values_list("action", flat=True))


def refusal_of(response) -> str:
    """The card that says what was refused."""
    page = response.content.decode()
    return page.split('id="form-errors">')[1].split("</div>")[0]


def password_link_for(client, membership: Membership) -> str:
    page = client.post(f"/org/members/{membership.pk}/password-link/").content.decode()
    return page.split('<code class="ident">')[1].split("</code>")[0]


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


def test_it_gives_a_member_another_role_limited_to_applications_audited(client_for, org_admin, operator, org):
    applications_of(org, "billing", "support")
    response = add(
        client_for(org_admin), org, "dana", "stakeholder", reach="part", applications=["support", "billing", "support"]
    )
    assert response.status_code == 302
    membership = Membership.objects.get(user=operator, org=org, role=Role.STAKEHOLDER)
    assert (membership.applications, membership.drafts) == (["billing", "support"], False)
    event = AuditEvent.objects.get(action="membership.create")
    assert event.actor == org_admin and event.org == org
    assert event.detail == {
        "user": "dana",
        "role": "stakeholder",
        "applications": ["billing", "support"],
        "drafts": False,
    }


def test_a_member_is_found_by_their_email_address(client_for, org_admin, operator, org):
    operator.email = "Dana@Example.com"
    operator.save()
    assert add(client_for(org_admin), org, "dana@example.com", "stakeholder").status_code == 302
    assert Membership.objects.filter(user=operator, org=org, role=Role.STAKEHOLDER).exists()
    assert not Invitation.objects.exists()


def test_a_name_no_member_has_is_a_form_error_that_says_to_invite_by_address(client_for, org_admin, org, roleless):
    users = get_user_model().objects.count()
    response = add(client_for(org_admin), org, "riley")  # an account, but none of this org's
    assert response.status_code == 400
    assert "No member of Northwind is called riley" in refusal_of(response)
    assert "e-mail address" in refusal_of(response)
    assert get_user_model().objects.count() == users
    assert not Membership.objects.filter(user=roleless).exists()
    assert not AuditEvent.objects.exists()


@pytest.mark.parametrize("role", ["criteria_admin", "org_admin"])
def test_a_whole_org_role_limited_to_applications_is_a_form_error(client_for, org_admin, operator, org, role):
    response = add(client_for(org_admin), org, "dana", role, reach="part", applications="billing")
    assert response.status_code == 400
    assert "covers the whole org" in response.content.decode()
    assert list(Membership.objects.filter(user=operator).values_list("role", flat=True)) == ["operator"]
    assert not AuditEvent.objects.exists()


# --- another org's people -------------------------------------------------------------------------------------------


def test_another_orgs_member_by_name_gets_the_answer_a_name_nobody_has_gets(
    client_for, other_org_admin, other_org, operator
):
    client = client_for(other_org_admin)
    answers = {}
    for name in ("dana", "nobody"):
        response = add(client, other_org, name)
        assert response.status_code == 400
        answers[name] = refusal_of(response).replace(name, "NAME")
    assert answers["dana"] == answers["nobody"]
    assert not Membership.objects.filter(user=operator, org=other_org).exists()
    assert not AuditEvent.objects.exists()


def test_another_orgs_member_by_address_is_only_invited_as_anyone_would_be_and_never_shown(
    client_for, other_org_admin, other_org, operator, mailoutbox
):
    operator.email = "dana@northwind.example"
    operator.last_login = datetime(2025, 3, 4, 5, 6, tzinfo=UTC)
    operator.save()
    client = client_for(other_org_admin)
    answers = {}
    for address in ("dana@northwind.example", "nobody@northwind.example"):
        response = add(client, other_org, address, follow=True)
        answers[address] = response.content.decode().split('class="flash"')[1].split("</div>")[0].replace(address, "X")
    assert answers["dana@northwind.example"] == answers["nobody@northwind.example"]
    assert not Membership.objects.filter(user=operator, org=other_org).exists()
    page = client.get("/org/").content.decode()
    assert "<b>dana</b>" not in page and "2025-03-04" not in page  # neither their account nor their last sign-in
    assert Invitation.objects.filter(org=other_org, email="dana@northwind.example").exists()


def test_a_role_held_already_is_a_form_error(client_for, org_admin, operator, org):
    response = add(client_for(org_admin), org, "dana", "operator")
    assert response.status_code == 400
    assert "already" in response.content.decode()
    assert Membership.objects.filter(user=operator).count() == 1


def test_an_unused_account_gets_a_set_password_link_shown_once_that_works_once(client, client_for, org_admin, org):
    """Accounts nobody has used (made before invitations, or by the Django admin) keep the set-password link."""
    person = make_unused_account("nia@example.com", org, Role.STAKEHOLDER, email="nia@example.com")
    link = password_link_for(client_for(org_admin), Membership.objects.get(user=person))
    assert link.startswith("http://testserver/org/set-password/")
    assert actions() == ["person.password_link"]
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
    person = make_unused_account("nia", org, Role.STAKEHOLDER)
    link = password_link_for(client_for(org_admin), Membership.objects.get(user=person))
    client.logout()
    form_url = client.get(link, follow=True).redirect_chain[-1][0]
    response = client.post(form_url, {"new_password1": "one long password 42", "new_password2": "another one 42"})
    assert response.status_code == 200
    assert not get_user_model().objects.get(username="nia").has_usable_password()


# --- changing what a membership covers, and revoking ---------------------------------------------------------------


def test_it_changes_what_a_membership_covers_audited(client_for, org_admin, operator, org):
    applications_of(org, "billing")
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
    nia = Membership.objects.create(user=make_unused_account("nia"), org=org, role=Role.OPERATOR)
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
    person = make_unused_account("nia@example.com", org, Role.OPERATOR, email="nia@example.com")
    nia = Membership.objects.get(user=person)
    link = password_link_for(client_for(org_admin), nia)
    settings.LOCAL_PASSWORDS_OFF_FOR_DOMAINS = ["example.com"]  # they sign in with single sign-on from now on
    page = client_for(org_admin).get("/org/").content.decode()
    assert "New set-password link" not in page
    assert client_for(org_admin).post(f"/org/members/{nia.pk}/password-link/").status_code == 409
    client.logout()
    assert b"does not work" in client.get(link, follow=True).content


@pytest.mark.parametrize("change", ["another_org_grants_a_role", "their_role_here_changes", "a_role_here_is_added"])
def test_a_set_password_link_stops_working_once_any_membership_of_the_person_is_added_or_changed(
    client, client_for, org_admin, org, other_org, change
):
    """The takeover's second half: an org admin holds the link of an account nobody has used; once another org
    (or anyone) gives that account a role or changes one, the link must not open it."""
    person = make_unused_account("nia", org, Role.OPERATOR, email="nia@example.com")
    membership = Membership.objects.get(user=person)
    link = password_link_for(client_for(org_admin), membership)
    if change == "another_org_grants_a_role":
        call_command("member", "add", "--org", other_org.slug, "--user", "nia", "--role", "org_admin")
    elif change == "their_role_here_changes":
        membership_scope(membership=membership, applications=["billing"], drafts=True)
    else:
        add(client_for(org_admin), org, "nia", "stakeholder")
    client.logout()
    assert b"does not work" in client.get(link, follow=True).content
    assert not get_user_model().objects.get(pk=person.pk).has_usable_password()


def test_an_application_the_org_does_not_have_is_refused_at_the_field_and_changes_nothing(
    client_for, org_admin, operator, org
):
    applications_of(org, "billing", "support")
    client = client_for(org_admin)
    response = add(client, org, "dana", "stakeholder", reach="part", applications="biling")
    assert response.status_code == 400
    html = response.content.decode()
    says = "Northwind has no application named biling; its applications: billing, support."
    assert says in refusal_of(response)  # at the top
    assert says in html[html.index('id="applications-errors"') :][:300]  # and at the field, with what was chosen
    assert 'value="dana"' in html and '<option value="part" selected>' in html
    membership = Membership.objects.get(user=operator)
    refused = client.post(f"/org/members/{membership.pk}/scope/", {"reach": "part", "applications": "suport"})
    assert refused.status_code == 400 and "no application named suport" in refusal_of(refused)
    row = refused.content.decode().split(f'id="membership-{membership.pk}"')[1].split("</tr>")[0]
    assert "no application named suport" in row[row.index('id="scope-errors"') :]
    assert list(Membership.objects.filter(user=operator).values_list("role", "applications")) == [("operator", None)]
    assert not AuditEvent.objects.filter(action__startswith="membership").exists()


def test_it_offers_the_orgs_known_applications_to_choose_from(client_for, org_admin, operator, org):
    applications_of(org, "billing")
    ServiceTarget.objects.create(org=org, position=1, application="returns", minutes=60)
    page = client_for(org_admin).get("/org/").content.decode()
    add_form = page[page.index('class="inline member-add"') :]
    assert re.findall(r'<option value="([^"]*)">', add_form[add_form.index('name="applications"') :])[:2] == [
        "billing",
        "returns",
    ]


def test_it_scopes_a_person_to_an_application_the_org_names_before_its_first_conversation(
    client_for, org_admin, operator, org
):
    # A lead set a target for the returns assistant, which has had no conversation yet; the member command could
    # always scope someone to it, and now the page can too.
    ServiceTarget.objects.create(org=org, position=1, application="returns", minutes=60)
    response = add(client_for(org_admin), org, "dana", "stakeholder", reach="part", applications=["returns"])
    assert response.status_code == 302
    membership = Membership.objects.get(user=operator, role=Role.STAKEHOLDER)
    assert (membership.applications, membership.drafts) == (["returns"], False)

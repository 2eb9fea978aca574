"""Invitations: an org admin adds someone who is not yet a member by their e-mail address; Tollgate mails the address
a link, and whoever controls the address accepts it by choosing a password there (or by single sign-on, in
tests/reviewer/oidc/). Nothing is granted before that, no link is ever shown to an admin, and what another org's
admin made or knows of an account never carries this org's role."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from grading.models import AuditEvent
from reviewer.models import Invitation, Membership, Role
from tests.builders.conversations import applications_of
from tests.builders.people import PASSWORD, invitation_link, make_person
from tests.builders.processes import free_port

pytestmark = pytest.mark.django_db

ANN = "ann@northwind.example"
CHOSEN = "ann's own long password 42"


def add(client, org, person: str, role: str = "operator", *, follow: bool = False, **fields):
    fields = {"org": org.pk, "person": person, "role": role, "reach": "whole", **fields}
    return client.post("/org/", fields, follow=follow)


def accept_with_password(client, link: str, password: str = CHOSEN):
    """Open the link and choose a password on the page it leads to."""
    page = client.get(link, follow=True)
    return client.post(page.redirect_chain[-1][0], {"new_password1": password, "new_password2": password})


def signs_in(username: str, password: str) -> bool:
    client = Client()
    client.post("/login/", {"username": username, "password": password})
    return "_auth_user_id" in client.session


def test_someone_new_is_invited_by_address_mailed_a_link_and_granted_nothing_until_they_accept(
    client, client_for, org_admin, org, mailoutbox
):
    applications_of(org, "billing")
    response = add(
        client_for(org_admin), org, "Ann@Northwind.example", "stakeholder", reach="part", applications="billing"
    )

    assert response.status_code == 302
    assert not get_user_model().objects.filter(email__iexact=ANN).exists()  # no account until they accept
    invitation = Invitation.objects.get()
    assert (invitation.org, invitation.email, invitation.role, invitation.applications) == (
        org,
        ANN,
        "stakeholder",
        ["billing"],
    )
    [mail] = mailoutbox
    assert mail.to == [ANN] and "Northwind" in mail.subject
    link = invitation_link(mailoutbox, ANN)
    page = client_for(org_admin).get("/org/").content.decode()
    assert f'id="invitation-{invitation.pk}"' in page and ANN in page  # the admin sees the invitation
    assert link not in page and link.split("/")[-2] not in page  # never its link
    assert [(e.action, e.actor) for e in AuditEvent.objects.order_by("pk")] == [
        ("invitation.create", org_admin),
        ("invitation.send", org_admin),
    ]
    client.logout()

    assert accept_with_password(client, link).status_code == 302
    ann = get_user_model().objects.get(email=ANN)
    assert ann.get_username() == ANN and "_auth_user_id" in client.session  # signed in as themselves
    membership = Membership.objects.get(user=ann)
    assert (membership.org, membership.role, membership.applications) == (org, "stakeholder", ["billing"])
    assert not Invitation.objects.exists()
    accepted = AuditEvent.objects.filter(action__in=["person.create", "membership.create", "invitation.accept"])
    assert [(e.action, e.org, e.actor) for e in accepted.order_by("pk")] == [
        ("person.create", org, None),
        ("membership.create", org, ann),
        ("invitation.accept", org, ann),
    ]
    client.logout()
    assert b"does not work" in client.get(link, follow=True).content  # used: refused
    assert signs_in(ANN, CHOSEN)


def test_an_address_another_orgs_admin_made_an_account_for_gets_this_orgs_role_only_with_a_password_they_choose(
    client_for, org_admin, other_org_admin, org, other_org, mailoutbox
):
    """The takeover: org B's admin made the account for an address org A will use and knows its password (or holds
    its set-password link). A adding the address must not hand B A's role."""
    planted = make_person(ANN, other_org, Role.STAKEHOLDER, email=ANN)  # B knows PASSWORD
    their_session = Client()
    their_session.force_login(planted)

    assert add(client_for(org_admin), org, ANN, "operator").status_code == 302

    assert not Membership.objects.filter(user=planted, org=org).exists()  # an invitation, not a grant
    assert signs_in(ANN, PASSWORD)  # B still gets into what B made, and nothing more
    client = Client()
    assert accept_with_password(client, invitation_link(mailoutbox, ANN)).status_code == 302
    assert Membership.objects.filter(user=planted, org=org, role=Role.OPERATOR).exists()  # the address's account
    assert not signs_in(ANN, PASSWORD)  # what B knew is gone
    assert their_session.get("/queue/").status_code == 302  # and so is B's session: sent to sign in
    assert signs_in(ANN, CHOSEN)


def test_another_orgs_admin_inviting_an_address_gets_no_link_and_their_invitation_is_no_role_here(
    client, client_for, org_admin, other_org_admin, org, other_org, mailoutbox
):
    made = add(client_for(other_org_admin), other_org, ANN, "stakeholder", new_account="on")
    assert made.status_code == 302 and b"/set-password/" not in made.content and b"/invitation/" not in made.content
    assert not get_user_model().objects.filter(email=ANN).exists()

    add(client_for(org_admin), org, ANN, "operator")
    ours = invitation_link(mailoutbox, ANN)
    assert accept_with_password(client, ours).status_code == 302
    ann = get_user_model().objects.get(email=ANN)
    # Accepting our invitation accepts ours alone: theirs waits for its own link.
    assert set(Membership.objects.filter(user=ann).values_list("org__slug", "role")) == {("northwind", "operator")}
    assert Invitation.objects.get().org == other_org


def test_an_invitation_link_dies_when_sent_again_when_cancelled_and_when_old(
    client, client_for, org_admin, org, mailoutbox
):
    admin = client_for(org_admin)
    add(admin, org, ANN)
    invitation = Invitation.objects.get()
    first = invitation_link(mailoutbox, ANN)
    assert admin.post(f"/org/invitations/{invitation.pk}/send/").status_code == 302
    second = invitation_link(mailoutbox, ANN)
    assert first != second
    client.logout()
    assert b"does not work" in client.get(first, follow=True).content

    Invitation.objects.filter(pk=invitation.pk).update(link_sent_at=timezone.now() - timedelta(days=4))
    assert b"does not work" in client.get(second, follow=True).content
    assert not get_user_model().objects.filter(email=ANN).exists()

    admin = client_for(org_admin)
    assert admin.post(f"/org/invitations/{invitation.pk}/send/").status_code == 302
    third = invitation_link(mailoutbox, ANN)
    assert admin.post(f"/org/invitations/{invitation.pk}/cancel/").status_code == 302
    assert not Invitation.objects.exists()
    client.logout()
    assert b"does not work" in client.get(third, follow=True).content
    actions = list(AuditEvent.objects.order_by("pk").values_list("action", flat=True))
    assert actions == ["invitation.create"] + ["invitation.send"] * 3 + ["invitation.delete"]


def test_another_orgs_invitations_are_404_to_an_org_admin(client_for, org_admin, other_org_admin, other_org):
    theirs_browser = Client()
    theirs_browser.force_login(other_org_admin)
    add(theirs_browser, other_org, ANN)
    theirs = Invitation.objects.get()
    client = client_for(org_admin)
    assert client.post(f"/org/invitations/{theirs.pk}/send/").status_code == 404
    assert client.post(f"/org/invitations/{theirs.pk}/cancel/").status_code == 404
    assert ANN not in client.get("/org/").content.decode()
    assert Invitation.objects.filter(pk=theirs.pk).exists()


def test_the_same_role_invited_twice_is_a_form_error(client_for, org_admin, org, mailoutbox):
    client = client_for(org_admin)
    add(client, org, ANN)
    response = add(client, org, ANN)
    assert response.status_code == 400
    assert "already invited" in response.content.decode()
    assert Invitation.objects.count() == 1 and len(mailoutbox) == 1


@pytest.mark.parametrize(
    "fields",
    [
        {"role": "org_admin", "reach": "part", "applications": "billing"},  # a whole-org role limited
        {"person": "not an address@"},
    ],
)
def test_a_bad_invitation_is_a_form_error_and_nothing_is_written(client_for, org_admin, org, mailoutbox, fields):
    response = client_for(org_admin).post(
        "/org/", {"org": org.pk, "person": ANN, "role": "operator", "reach": "whole"} | fields
    )
    assert response.status_code == 400
    assert not Invitation.objects.exists() and not AuditEvent.objects.exists() and not mailoutbox


def test_a_mismatched_password_on_the_invitation_page_accepts_nothing(client, client_for, org_admin, org, mailoutbox):
    add(client_for(org_admin), org, ANN)
    client.logout()
    page = client.get(invitation_link(mailoutbox, ANN), follow=True)
    response = client.post(page.redirect_chain[-1][0], {"new_password1": CHOSEN, "new_password2": "another one 42"})
    assert response.status_code == 400
    assert Invitation.objects.exists() and not get_user_model().objects.filter(email=ANN).exists()


def test_an_address_whose_passwords_are_off_is_offered_single_sign_on_only(
    client, client_for, org_admin, org, mailoutbox, settings
):
    settings.LOCAL_PASSWORDS_OFF_FOR_DOMAINS = ["northwind.example"]
    add(client_for(org_admin), org, ANN)
    client.logout()
    page = client.get(invitation_link(mailoutbox, ANN), follow=True)
    assert b"new_password1" not in page.content
    refused = client.post(page.redirect_chain[-1][0], {"new_password1": CHOSEN, "new_password2": CHOSEN})
    assert refused.status_code == 403
    assert Invitation.objects.exists() and not get_user_model().objects.filter(email=ANN).exists()


def test_a_mail_server_that_refuses_leaves_the_invitation_to_send_again(client_for, org_admin, org, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", free_port()  # nothing listens there
    response = add(client_for(org_admin), org, ANN, follow=True)
    assert response.status_code == 200
    assert "the mail could not be sent" in response.content.decode()
    assert Invitation.objects.filter(email=ANN).exists()  # kept: "Send again" mails a new link


@pytest.mark.parametrize("account", ["two_accounts", "admin_account", "turned_off"])
def test_a_password_never_goes_to_an_account_that_is_ambiguous_turned_off_or_opens_the_django_admin(
    client, client_for, org_admin, org, mailoutbox, account
):
    existing = make_person("ann", email=ANN)
    if account == "two_accounts":
        make_person("ann-too", email=ANN.upper())
    elif account == "admin_account":
        existing.is_staff = True
    else:
        existing.is_active = False
    existing.save()
    add(client_for(org_admin), org, ANN)
    client.logout()

    response = accept_with_password(client, invitation_link(mailoutbox, ANN))

    assert response.status_code == 409
    assert Invitation.objects.exists() and not Membership.objects.filter(org=org, user__email__iexact=ANN).exists()
    existing.refresh_from_db()
    assert existing.check_password(PASSWORD)

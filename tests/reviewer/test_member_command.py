"""`manage.py member`: add (or change the reach of), list and remove memberships, each write audited."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from grading.models import AuditEvent
from reviewer.models import Membership, Role
from tests.builders.conversations import applications_of
from tests.builders.people import make_person

pytestmark = pytest.mark.django_db


AS_OPERATOR = ["--org", "northwind", "--user", "riley", "--role", "operator"]
AS_CRITERIA_ADMIN = ["--org", "northwind", "--user", "riley", "--role", "criteria_admin"]


def member(*args: str) -> str:
    out = StringIO()
    call_command("member", *args, stdout=out)
    return out.getvalue()


def add(username: str, role: str, *more: str, org: str = "northwind") -> str:
    return member("add", "--org", org, "--user", username, "--role", role, *more)


@pytest.fixture
def known(org):
    """Northwind's applications: billing and support-bot (a membership names only applications its org knows)."""
    applications_of(org, "billing", "support-bot")


def reach(username: str, role: Role) -> tuple[list[str] | None, bool]:
    membership = Membership.objects.get(user__username=username, role=role)
    return membership.applications, membership.drafts


def test_it_adds_a_whole_org_membership_without_applications(org, roleless):
    assert "northwind  riley  operator  whole org" in add("riley", "operator")
    assert reach("riley", Role.OPERATOR) == (None, True)


def test_it_adds_a_membership_limited_to_applications_with_drafts_unless_told_not_to(org, roleless, known):
    add("riley", "operator", "--applications", " support-bot, billing ,support-bot")
    assert reach("riley", Role.OPERATOR) == (["billing", "support-bot"], True)
    add("riley", "stakeholder", "--applications", "billing", "--no-drafts")
    assert reach("riley", Role.STAKEHOLDER) == (["billing"], False)


def test_an_empty_applications_list_with_drafts_means_drafts_only(org, roleless):
    assert "drafts only" in add("riley", "operator", "--applications", "")
    assert reach("riley", Role.OPERATOR) == ([], True)


def test_adding_again_changes_the_reach_of_that_membership_and_no_other(org, other_org, roleless, known):
    add("riley", "operator")
    add("riley", "operator", org="globex")
    output = add("riley", "operator", "--applications", "billing", "--no-drafts")
    assert "updated: northwind  riley  operator  applications: billing (was whole org)" in output
    assert Membership.objects.filter(user=roleless).count() == 2
    assert Membership.objects.get(user=roleless, org=org).applications == ["billing"]
    assert Membership.objects.get(user=roleless, org=org).drafts is False
    assert Membership.objects.get(user=roleless, org=other_org).applications is None
    add("riley", "operator")  # back to the whole org
    assert Membership.objects.get(user=roleless, org=org).applications is None


def test_adding_the_same_reach_again_changes_nothing_and_audits_nothing(org, operator):
    events = AuditEvent.objects.count()
    assert "unchanged" in add("dana", "operator")
    assert AuditEvent.objects.count() == events


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--org", "nowhere", "--user", "riley", "--role", "operator"], "nowhere"),
        (["--org", "northwind", "--user", "nobody", "--role", "operator"], "must exist"),
        (["--org", "northwind", "--user", "riley", "--role", "admin"], "invalid choice"),
        ([*AS_OPERATOR, "--no-drafts"], "--no-drafts needs"),
        ([*AS_CRITERIA_ADMIN, "--applications", "a"], "criteria versions govern every application"),
        ([*AS_CRITERIA_ADMIN, "--applications", ""], "criteria versions govern every application"),
        ([*AS_OPERATOR, "--applications", "", "--no-drafts"], "cover nothing"),
        ([*AS_OPERATOR, "--applications", "a,,b"], "empty application name"),
        ([*AS_OPERATOR, "--applications", "a, "], "empty application name"),
        ([*AS_OPERATOR, "--applications", "x" * 101], "at most 100 characters"),
    ],
)
def test_every_refused_add_says_why_and_writes_nothing(org, roleless, args, says):
    with pytest.raises(CommandError, match=says):
        member("add", *args)
    assert not Membership.objects.filter(user=roleless).exists()
    assert not AuditEvent.objects.exists()


def test_a_refused_change_leaves_the_membership_as_it_was(org, roleless, known):
    add("riley", "operator", "--applications", "billing")
    events = AuditEvent.objects.count()
    with pytest.raises(CommandError, match="nothing"):
        add("riley", "operator", "--applications", "", "--no-drafts")
    assert reach("riley", Role.OPERATOR) == (["billing"], True)
    assert AuditEvent.objects.count() == events


def test_an_application_name_of_exactly_100_characters_is_allowed(org, roleless):
    applications_of(org, "x" * 100)
    add("riley", "operator", "--applications", "x" * 100)
    assert reach("riley", Role.OPERATOR) == (["x" * 100], True)


def test_list_shows_each_membership_with_what_it_covers_of_every_org_unless_one_is_named(
    org, other_org, roleless, known
):
    make_person("dana", org, Role.OPERATOR, Role.CRITERIA_ADMIN)
    make_person("mallory", other_org, Role.OPERATOR)
    add("riley", "operator", "--applications", "support-bot,billing")
    add("riley", "stakeholder", "--applications", "billing", "--no-drafts")
    add("riley", "operator", "--applications", "", org="globex")
    assert member("list").splitlines() == [
        "globex  mallory  operator  whole org",
        "globex  riley  operator  drafts only",
        "northwind  dana  criteria_admin  whole org",
        "northwind  dana  operator  whole org",
        "northwind  riley  operator  applications: billing, support-bot · drafts",
        "northwind  riley  stakeholder  applications: billing",
    ]
    assert "globex" not in member("list", "--org", "northwind")


def test_remove_deletes_that_membership_only(org, operator):
    Membership.objects.create(user=operator, org=org, role=Role.STAKEHOLDER)
    assert "removed: northwind  dana  operator" in member(
        "remove", "--org", "northwind", "--user", "dana", "--role", "operator"
    )
    assert list(Membership.objects.filter(user=operator).values_list("role", flat=True)) == [Role.STAKEHOLDER]


def test_removing_a_membership_that_does_not_exist_is_an_error_and_writes_nothing(org, operator):
    with pytest.raises(CommandError, match="not stakeholder in northwind"):
        member("remove", "--org", "northwind", "--user", "dana", "--role", "stakeholder")
    with pytest.raises(CommandError, match="must exist"):
        member("remove", "--org", "northwind", "--user", "nobody", "--role", "operator")
    assert Membership.objects.filter(user=operator).count() == 1
    assert not AuditEvent.objects.exists()


def test_each_add_change_and_remove_leaves_an_audit_event_naming_the_membership(org, roleless, known):
    add("riley", "operator")
    membership = Membership.objects.get(user=roleless)
    add("riley", "operator", "--applications", "billing")
    member("remove", "--org", "northwind", "--user", "riley", "--role", "operator")
    events = list(AuditEvent.objects.order_by("pk"))
    assert [event.action for event in events] == ["membership.create", "membership.update", "membership.delete"]
    assert {(event.org_id, event.actor_id, event.object_type, event.object_id) for event in events} == {
        (org.pk, None, "reviewer.membership", str(membership.pk))
    }
    created, updated, deleted = (event.detail for event in events)
    assert created == {"user": "riley", "role": "operator", "applications": None, "drafts": True}
    assert updated == {
        "user": "riley",
        "role": "operator",
        "before": {"applications": None, "drafts": True},
        "after": {"applications": ["billing"], "drafts": True},
    }
    assert deleted == {"user": "riley", "role": "operator", "applications": ["billing"], "drafts": True}


def test_it_refuses_an_application_the_org_does_not_know_as_the_org_page_does(org, roleless, known):
    with pytest.raises(CommandError) as refused:
        add("riley", "operator", "--applications", "biling")
    assert "Northwind has no application named biling; its applications: billing, support-bot." in str(refused.value)
    assert not Membership.objects.filter(user=roleless).exists()
    assert not AuditEvent.objects.exists()

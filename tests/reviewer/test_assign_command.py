"""`manage.py assign`: set, list and remove pools and assignment rules, each write audited, each refusal writing
nothing."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from grading.models import AuditEvent
from reviewer.models import Assignment, AssignmentRule, Membership, Pool, Role
from tests.builders.conversations import applications_of
from tests.builders.people import make_person
from tests.builders.queue_items import draft_item

pytestmark = pytest.mark.django_db

IN_NORTHWIND = ["--org", "northwind"]
BILLING_POOL = [*IN_NORTHWIND, "--name", "billing"]


@pytest.fixture
def team(org, stakeholder, other_org_operator, roleless):
    """ann and bob, operators of the whole org; lee, a lead; cy, an operator of billing's conversations and the
    drafts; dee, an operator of drafts only. Besides them: sam (stakeholder), mallory (globex), riley (no role)."""
    people = {name: make_person(name, org, Role.OPERATOR) for name in ("ann", "bob")}
    people["lee"] = make_person("lee", org, Role.LEAD)
    people["cy"] = make_person("cy")
    Membership.objects.create(user=people["cy"], org=org, role=Role.OPERATOR, applications=["billing"])
    people["dee"] = make_person("dee")
    Membership.objects.create(user=people["dee"], org=org, role=Role.OPERATOR, applications=[])
    return people


def assign(*args: str, stderr: StringIO | None = None) -> str:
    out = StringIO()
    call_command("assign", *args, stdout=out, stderr=stderr or StringIO())
    return out.getvalue()


def pool(name: str, members: str, org: str = "northwind") -> str:
    return assign("pool", "--org", org, "--name", name, "--members", members)


def rule(*args: str, org: str = "northwind") -> str:
    return assign("rule", "--org", org, *args)


def members_of(name: str) -> list[str]:
    return sorted(Pool.objects.get(name=name).members.values_list("username", flat=True))


def actions() -> list[str]:
    return list(AuditEvent.objects.order_by("pk").values_list("action", flat=True))


# --- pools ------------------------------------------------------------------------------------------------------


def test_pool_creates_a_pool_then_sets_its_members_to_exactly_those_listed(org, team):
    assert pool("billing", " bob,ann ,bob") == "created: northwind  billing  ann, bob\n"
    assert pool("billing", "lee,bob") == "updated: northwind  billing  bob, lee (was ann, bob)\n"
    assert members_of("billing") == ["bob", "lee"]
    assert pool("billing", "") == "updated: northwind  billing  no members (was bob, lee)\n"
    assert members_of("billing") == []


def test_a_pool_may_hold_people_of_limited_reach(org, team):
    pool("drafts", "cy,dee")
    assert members_of("drafts") == ["cy", "dee"]


def test_setting_the_same_members_again_changes_nothing_and_audits_nothing(org, team):
    pool("billing", "ann,bob")
    assert pool("billing", "bob,ann") == "unchanged: northwind  billing  ann, bob\n"
    assert actions() == ["pool.create"]


def test_pools_of_two_orgs_may_share_a_name(org, other_org, team):
    pool("billing", "ann")
    pool("billing", "mallory", org="globex")
    assert Pool.objects.filter(name="billing").count() == 2


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--org", "nowhere", "--name", "billing", "--members", "ann"], "nowhere"),
        ([*BILLING_POOL, "--members", "ann,nobody,ghost"], "no user ghost, nobody: users must exist"),
        ([*BILLING_POOL, "--members", "ann,sam,riley"], "not operator or lead in northwind: riley, sam;"),
        ([*BILLING_POOL, "--members", "mallory"], "not operator or lead in northwind: mallory;"),
        ([*BILLING_POOL, "--members", "ann,,bob"], "empty username"),
        ([*BILLING_POOL, "--members", "ann, "], "empty username"),
        ([*BILLING_POOL], "the following arguments are required: --members"),
        ([*IN_NORTHWIND, "--name", " ", "--members", "ann"], "needs a name"),
        ([*IN_NORTHWIND, "--name", "x" * 101, "--members", "ann"], "at most 100 characters"),
    ],
)
def test_every_refused_pool_says_why_and_writes_nothing(org, team, args, says):
    with pytest.raises(CommandError, match=says):
        assign("pool", *args)
    assert not Pool.objects.exists()
    assert not AuditEvent.objects.exists()


def test_a_refused_update_leaves_the_members_as_they_were(org, team):
    pool("billing", "ann,bob")
    with pytest.raises(CommandError, match="riley"):
        pool("billing", "ann,riley")
    assert members_of("billing") == ["ann", "bob"]
    assert actions() == ["pool.create"]


def test_pools_lists_each_pool_with_its_members_of_every_org_unless_one_is_named(org, other_org, team):
    pool("support", "")
    pool("billing", "lee,ann")
    pool("billing", "mallory", org="globex")
    assert assign("pools").splitlines() == [
        "globex  billing  mallory",
        "northwind  billing  ann, lee",
        "northwind  support  no members",
    ]
    assert assign("pools", *IN_NORTHWIND).splitlines() == [
        "northwind  billing  ann, lee",
        "northwind  support  no members",
    ]


def test_removing_a_pool_deletes_the_assignments_and_rules_naming_it_and_says_how_many(org, team):
    pool("billing", "ann,bob")
    pool("support", "lee")
    billing, support = Pool.objects.get(name="billing"), Pool.objects.get(name="support")
    Assignment.objects.create(org=org, review=draft_item(org), pool=billing, assigned_at=timezone.now())
    rule("--pool", "billing", "--kind", "conversation")
    rule("--pool", "support")
    rule("--pool", "billing", "--reason", "audit")

    output = assign("pool-remove", *IN_NORTHWIND, "--name", "billing")

    assert output == "removed: northwind  billing, and with it 1 assignment by hand and 2 assignment rules naming it\n"
    assert list(Pool.objects.all()) == [support]
    assert not Assignment.objects.exists()
    assert list(AssignmentRule.objects.values_list("position", "pool")) == [(2, support.pk)]
    deleted = AuditEvent.objects.get(action="pool.delete")
    assert (deleted.object_type, deleted.object_id) == ("reviewer.pool", str(billing.pk))
    assert deleted.detail == {"name": "billing", "members": ["ann", "bob"], "assignments": 1, "rules": 2}


def test_removing_a_pool_named_by_nothing_says_so(org, team):
    pool("billing", "ann")
    output = assign("pool-remove", *IN_NORTHWIND, "--name", "billing")
    assert output == "removed: northwind  billing, and with it 0 assignments by hand and 0 assignment rules naming it\n"


def test_removing_a_pool_that_does_not_exist_is_an_error_and_writes_nothing(org, other_org, team):
    pool("billing", "mallory", org="globex")
    with pytest.raises(CommandError, match="no pool 'billing' in northwind; nothing removed"):
        assign("pool-remove", *IN_NORTHWIND, "--name", "billing")
    assert Pool.objects.count() == 1
    assert actions() == ["pool.create"]


def test_each_pool_write_leaves_an_audit_event_naming_the_pool(org, team):
    pool("billing", "ann")
    created = Pool.objects.get()
    pool("billing", "ann,bob")
    assign("pool-remove", *IN_NORTHWIND, "--name", "billing")
    events = list(AuditEvent.objects.order_by("pk"))
    assert [event.action for event in events] == ["pool.create", "pool.update", "pool.delete"]
    assert {(event.org_id, event.actor_id, event.object_type, event.object_id) for event in events} == {
        (org.pk, None, "reviewer.pool", str(created.pk))
    }
    assert events[0].detail == {"name": "billing", "members": ["ann"]}
    assert events[1].detail == {"name": "billing", "before": {"members": ["ann"]}, "after": {"members": ["ann", "bob"]}}


# --- rules ------------------------------------------------------------------------------------------------------


def test_rule_adds_each_rule_after_the_last_unless_given_a_free_position(org, team):
    pool("billing", "ann,bob")
    first = rule("--pool", "billing", "--kind", "conversation", "--application", "billing", "--reason", "band",
                 "--hours", "4")  # fmt: skip
    assert first == "added: northwind  1  conversation · billing · band  → pool billing  for 4 h\n"
    second = rule("--person", "lee")
    assert second == "added: northwind  2  any kind · any application · any reason  → lee  while it waits\n"
    assert rule("--person", "ann", "--reason", "audit", "--position", "10").startswith("added: northwind  10  ")
    assert rule("--person", "bob", "--kind", "draft").startswith("added: northwind  11  ")
    assert rule("--person", "bob", "--position", "5").startswith("added: northwind  5  ")
    assert list(AssignmentRule.objects.order_by("position").values_list("position", flat=True)) == [1, 2, 5, 10, 11]


def test_rules_lists_each_rule_by_org_then_position_of_every_org_unless_one_is_named(org, other_org, team):
    pool("billing", "ann,bob")
    rule("--person", "lee", "--kind", "draft", "--reason", "band", "--hours", "2", "--position", "3")
    rule("--pool", "billing", "--kind", "conversation", "--application", "billing", "--hours", "4", "--position", "1")
    rule("--person", "mallory", "--reason", "audit", org="globex")
    assert assign("rules").splitlines() == [
        "globex  1  any kind · any application · audit  → mallory  while it waits",
        "northwind  1  conversation · billing · any reason  → pool billing  for 4 h",
        "northwind  3  draft · any application · band  → lee  for 2 h",
    ]
    assert assign("rules", *IN_NORTHWIND).splitlines() == [
        "northwind  1  conversation · billing · any reason  → pool billing  for 4 h",
        "northwind  3  draft · any application · band  → lee  for 2 h",
    ]


def test_a_taken_position_is_refused_without_replace_and_replaced_with_it(org, team):
    pool("billing", "ann,bob")
    rule("--person", "ann", "--kind", "draft")
    added = AssignmentRule.objects.get()

    with pytest.raises(CommandError, match="position 1 in northwind is taken by: draft · any application"):
        rule("--pool", "billing", "--position", "1")
    assert AssignmentRule.objects.get().person == team["ann"]
    assert actions() == ["pool.create", "assignment_rule.create"]

    output = rule("--pool", "billing", "--application", "billing", "--hours", "1", "--position", "1", "--replace")
    assert output == (
        "replaced: northwind  1  any kind · billing · any reason  → pool billing  for 1 h"
        " (was draft · any application · any reason  → ann  while it waits)\n"
    )
    replaced = AssignmentRule.objects.get()
    assert (replaced.pk, replaced.person, replaced.pool.name, replaced.hours) == (added.pk, None, "billing", 1)
    event = AuditEvent.objects.get(action="assignment_rule.replace")
    assert (event.object_type, event.object_id, event.actor_id) == ("reviewer.assignmentrule", str(added.pk), None)
    assert event.detail == {
        "position": 1,
        "kind": "",
        "application": "billing",
        "reason": "",
        "person": None,
        "pool": "billing",
        "hours": 1,
        "was": {
            "position": 1, "kind": "draft", "application": "", "reason": "", "person": "ann", "pool": None,
            "hours": None,
        },
    }  # fmt: skip


def test_a_rule_after_one_at_the_largest_position_is_refused_with_what_to_give_and_writes_nothing(org, team):
    rule("--person", "ann", "--position", str(2**31 - 1))
    with pytest.raises(CommandError, match="the last assignment rule of northwind is at position 2147483647: give"):
        rule("--person", "bob")
    assert list(AssignmentRule.objects.values_list("position", flat=True)) == [2**31 - 1]
    assert actions() == ["assignment_rule.create"]


def test_replacing_a_rule_with_itself_changes_nothing_and_audits_nothing(org, team):
    rule("--person", "ann", "--kind", "draft")
    assert rule("--person", "ann", "--kind", "draft", "--position", "1", "--replace").startswith("unchanged: ")
    assert actions() == ["assignment_rule.create"]


def test_replace_at_a_free_position_adds_the_rule(org, team):
    assert rule("--person", "ann", "--position", "2", "--replace").startswith("added: northwind  2  ")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--person", "ann", "--hours", "0"], "--hours must be from 1 to 8760"),
        (["--person", "ann", "--hours", "8761"], "--hours must be from 1 to 8760"),
        (["--person", "ann", "--hours", "soon"], "invalid int value"),
        (["--person", "ann", "--position", "0"], "--position must be from 1"),
        (["--person", "ann", "--replace"], "--replace needs --position"),
        (["--person", "ann", "--reason", "hunch"], "invalid choice"),
        (["--person", "ann", "--kind", "email"], "invalid choice"),
        (["--person", "ann", "--application", " "], "leave it out for any application"),
        (["--person", "ann", "--application", "x" * 101], "at most 100 characters"),
        (["--person", "ann", "--kind", "draft", "--application", "billing"], "drafts are filed under no application"),
        (["--person", "ann", "--pool", "billing"], "not allowed with"),
        (["--kind", "draft"], "one of the arguments --person --pool is required"),
        (["--pool", "support"], "no pool 'support' in northwind"),
        (["--pool", "globex-pool"], "no pool 'globex-pool' in northwind"),
        (["--person", "nobody"], "no user nobody"),
        (["--person", "sam"], "not operator or lead in northwind: sam"),
        (["--person", "riley"], "not operator or lead in northwind: riley"),
        (["--person", "mallory"], "not operator or lead in northwind: mallory"),
        (["--person", "cy", "--application", "support"], "cy cannot claim any kind · support · any reason"),
        # A typo, refused as the set-up page refuses it, with the org's applications.
        (
            ["--person", "ann", "--application", "suport"],
            "Northwind has no application named suport; its applications: billing, support.",
        ),
        (["--person", "dee", "--kind", "conversation"], "their reach there is drafts only"),
        (["--person", "dee", "--application", "billing"], "dee cannot claim"),
    ],
)
def test_every_refused_rule_says_why_and_writes_nothing(org, other_org, team, args, says):
    applications_of(org, "support")  # and billing, which cy's reach names
    pool("billing", "ann")
    Pool.objects.create(org=other_org, name="globex-pool")
    events = AuditEvent.objects.count()
    with pytest.raises(CommandError, match=says):
        rule(*args)
    assert not AssignmentRule.objects.exists()
    assert AuditEvent.objects.count() == events


def test_a_refused_rule_does_not_touch_the_rule_at_its_position(org, team):
    rule("--person", "ann")
    with pytest.raises(CommandError, match="riley"):
        rule("--person", "riley", "--position", "1", "--replace")
    assert AssignmentRule.objects.get().person == team["ann"]
    assert actions() == ["assignment_rule.create"]


def test_a_person_of_limited_reach_gets_a_rule_for_what_they_cover_and_a_warning_for_wider_ones(org, team):
    quiet = StringIO()
    rule("--person", "cy", "--application", "billing")
    assign("rule", *IN_NORTHWIND, "--person", "cy", "--kind", "draft", stderr=quiet)
    assign("rule", *IN_NORTHWIND, "--person", "ann", stderr=quiet)
    assert quiet.getvalue() == ""

    warned = StringIO()
    assign("rule", *IN_NORTHWIND, "--person", "cy", "--kind", "conversation", "--hours", "3", stderr=warned)
    assert warned.getvalue() == (
        "warning: cy's reach in northwind is applications billing and drafts: they can claim only the items of this "
        "rule their reach covers, and the others it matches stay reserved for them for 3 h\n"
    )
    warned = StringIO()
    assign("rule", *IN_NORTHWIND, "--person", "dee", stderr=warned)
    assert "dee's reach in northwind is drafts only" in warned.getvalue()
    assert "while they wait" in warned.getvalue()
    assert AssignmentRule.objects.count() == 5


def test_rule_remove_deletes_the_rule_at_that_position_only(org, team):
    rule("--person", "ann")
    rule("--person", "bob", "--kind", "draft")
    output = assign("rule-remove", *IN_NORTHWIND, "--position", "1")
    assert output == "removed: northwind  1  any kind · any application · any reason  → ann  while it waits\n"
    assert list(AssignmentRule.objects.values_list("position", "person__username")) == [(2, "bob")]


def test_removing_a_rule_that_does_not_exist_is_an_error_and_writes_nothing(org, other_org, team):
    rule("--person", "mallory", org="globex")
    with pytest.raises(CommandError, match="no assignment rule at position 1 in northwind; nothing removed"):
        assign("rule-remove", *IN_NORTHWIND, "--position", "1")
    assert AssignmentRule.objects.count() == 1
    assert actions() == ["assignment_rule.create"]


def test_each_rule_write_leaves_an_audit_event_naming_the_rule(org, team):
    pool("billing", "ann")
    rule("--pool", "billing", "--kind", "conversation", "--application", "billing", "--reason", "spread")
    created = AssignmentRule.objects.get()
    assign("rule-remove", *IN_NORTHWIND, "--position", "1")
    events = list(AuditEvent.objects.filter(action__startswith="assignment_rule").order_by("pk"))
    assert [event.action for event in events] == ["assignment_rule.create", "assignment_rule.delete"]
    assert {(event.org_id, event.actor_id, event.object_type, event.object_id) for event in events} == {
        (org.pk, None, "reviewer.assignmentrule", str(created.pk))
    }
    as_dict = {
        "position": 1,
        "kind": "conversation",
        "application": "billing",
        "reason": "spread",
        "person": None,
        "pool": "billing",
        "hours": None,
    }
    assert [event.detail for event in events] == [as_dict, as_dict]


def test_rule_move_swaps_a_rule_with_its_neighbour_as_the_page_does(org, team):
    pool("billing", "ann")
    rule("--pool", "billing", "--hours", "1")
    rule("--person", "bob", "--hours", "2")
    assert "moved: northwind  1  any kind · any application · any reason  → bob  for 2 h (was at 2)" in assign(
        "rule-move", *IN_NORTHWIND, "--position", "2", "--earlier"
    )
    assert list(AssignmentRule.objects.order_by("position").values_list("hours", flat=True)) == [2, 1]
    assert "is the last rule" in assign("rule-move", *IN_NORTHWIND, "--position", "2", "--later")
    with pytest.raises(CommandError, match="no assignment rule at position 3 in northwind; nothing moved"):
        assign("rule-move", *IN_NORTHWIND, "--position", "3", "--later")
    assert actions()[-2:] == ["assignment_rule.move", "assignment_rule.move"]


def test_pool_rename_gives_a_pool_another_name_keeping_its_members_and_rules(org, team):
    pool("billing", "ann")
    pool("support", "bob")
    rule("--pool", "billing")
    assert assign("pool-rename", *BILLING_POOL, "--to", "billing-emea") == (
        "renamed: northwind  billing-emea  ann (was billing)\n"
    )
    assert AssignmentRule.objects.get().pool.name == "billing-emea"
    with pytest.raises(CommandError, match="northwind has a pool 'support' already"):
        assign("pool-rename", *IN_NORTHWIND, "--name", "billing-emea", "--to", "support")
    assert actions()[-1] == "pool.rename"

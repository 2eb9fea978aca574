"""`manage.py targets`: set, list and remove service-level targets, each write audited and re-dating the org's
waiting items, each refusal writing nothing."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from grading.models import AuditEvent, Review, ServiceTarget
from tests.builders.queue_items import draft_item

pytestmark = pytest.mark.django_db

IN_NORTHWIND = ["--org", "northwind"]


def targets(*args: str) -> str:
    out = StringIO()
    call_command("targets", *args, stdout=out)
    return out.getvalue()


def target(*args: str, org: str = "northwind") -> str:
    return targets("set", "--org", org, *args)


def actions() -> list[str]:
    return list(AuditEvent.objects.order_by("pk").values_list("action", flat=True))


def rows() -> list[tuple]:
    return list(
        ServiceTarget.objects.order_by("org__slug", "position").values_list(
            "org__slug", "position", "kind", "application", "reason", "minutes"
        )
    )


def test_set_adds_each_target_after_the_last_unless_given_a_free_position(org):
    first = target("--kind", "draft", "--hours", "1")
    assert first == (
        "created: northwind  1  draft · any application · any reason  within 1 h  (re-dated 0 waiting items)\n"
    )
    second = target("--kind", "conversation", "--application", "billing", "--reason", "band", "--minutes", "90")
    assert second == (
        "created: northwind  2  conversation · billing · band  within 1 h 30 min  (re-dated 0 waiting items)\n"
    )
    assert target("--reason", "audit", "--minutes", "45", "--position", "10").startswith("created: northwind  10  ")
    assert target("--minutes", "2880").startswith("created: northwind  11  any kind · any application · any reason")
    assert target("--minutes", "5", "--position", "5").startswith("created: northwind  5  ")
    assert rows() == [
        ("northwind", 1, "draft", "", "", 60),
        ("northwind", 2, "conversation", "billing", "band", 90),
        ("northwind", 5, "", "", "", 5),
        ("northwind", 10, "", "", "audit", 45),
        ("northwind", 11, "", "", "", 2880),
    ]


def test_list_shows_each_target_by_org_then_position_of_every_org_unless_one_is_named(org, other_org):
    target("--kind", "conversation", "--application", "billing", "--minutes", "90", "--position", "2")
    target("--kind", "draft", "--reason", "band", "--hours", "1", "--position", "1")
    target("--minutes", "45", "--position", "3")
    target("--reason", "audit", "--hours", "48", org="globex")
    target("--minutes", "1500", org="globex")
    assert targets("list").splitlines() == [
        "globex  1  any kind · any application · audit  within 2 d",
        "globex  2  any kind · any application · any reason  within 25 h",
        "northwind  1  draft · any application · band  within 1 h",
        "northwind  2  conversation · billing · any reason  within 1 h 30 min",
        "northwind  3  any kind · any application · any reason  within 45 min",
    ]
    assert targets("list", *IN_NORTHWIND).splitlines() == [
        "northwind  1  draft · any application · band  within 1 h",
        "northwind  2  conversation · billing · any reason  within 1 h 30 min",
        "northwind  3  any kind · any application · any reason  within 45 min",
    ]


def test_list_of_an_org_without_targets_prints_nothing(org):
    assert targets("list", *IN_NORTHWIND) == ""


def test_setting_and_removing_a_target_re_dates_the_waiting_items(org):
    waiting = draft_item(org, "waiting")
    assert waiting.due_at is None

    assert target("--kind", "draft", "--minutes", "90").endswith("  (re-dated 1 waiting item)\n")
    waiting.refresh_from_db()
    assert waiting.due_at == waiting.routed_at + timedelta(minutes=90)

    target("--kind", "draft", "--hours", "2", "--position", "1", "--replace")
    waiting.refresh_from_db()
    assert waiting.due_at == waiting.routed_at + timedelta(hours=2)

    assert targets("remove", *IN_NORTHWIND, "--position", "1").endswith("  (re-dated 1 waiting item)\n")
    waiting.refresh_from_db()
    assert waiting.due_at is None


def test_a_taken_position_is_refused_without_replace_and_replaced_in_place_with_it(org):
    waiting = draft_item(org, "waiting")
    target("--kind", "draft", "--hours", "1")
    added = ServiceTarget.objects.get()

    with pytest.raises(CommandError, match="position 1 in northwind is taken by: draft · any application"):
        target("--minutes", "10", "--position", "1")
    assert rows() == [("northwind", 1, "draft", "", "", 60)]
    assert actions() == ["service_target.create"]
    waiting.refresh_from_db()
    assert waiting.due_at == waiting.routed_at + timedelta(hours=1)

    output = target("--reason", "band", "--minutes", "10", "--position", "1", "--replace")
    assert output == (
        "replaced: northwind  1  any kind · any application · band  within 10 min"
        " (was draft · any application · any reason  within 1 h)  (re-dated 1 waiting item)\n"
    )
    assert ServiceTarget.objects.get().pk == added.pk
    assert rows() == [("northwind", 1, "", "", "band", 10)]
    event = AuditEvent.objects.get(action="service_target.replace")
    assert (event.org_id, event.actor_id, event.object_type, event.object_id) == (
        org.pk, None, "grading.servicetarget", str(added.pk)
    )  # fmt: skip
    assert event.detail == {
        "position": 1, "kind": "", "application": "", "reason": "band", "minutes": 10,
        "was": {"position": 1, "kind": "draft", "application": "", "reason": "", "minutes": 60},
    }  # fmt: skip


def test_replacing_a_target_with_itself_changes_nothing_and_audits_nothing(org):
    target("--kind", "draft", "--hours", "1")
    output = target("--kind", "draft", "--minutes", "60", "--position", "1", "--replace")
    assert output == "unchanged: northwind  1  draft · any application · any reason  within 1 h\n"
    assert actions() == ["service_target.create"]


def test_replace_at_a_free_position_adds_the_target(org):
    assert target("--minutes", "30", "--position", "2", "--replace").startswith("created: northwind  2  ")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--minutes", "0"], "--minutes must be from 1 to 525600"),
        (["--minutes", "525601"], "--minutes must be from 1 to 525600"),
        (["--minutes", "-5"], "--minutes must be from 1 to 525600"),
        (["--hours", "0"], "--hours must be from 1 to 8760"),
        (["--hours", "8761"], "--hours must be from 1 to 8760"),
        (["--minutes", "soon"], "invalid int value"),
        (["--minutes", "30", "--hours", "1"], "not allowed with"),
        (["--kind", "draft"], "one of the arguments --minutes --hours is required"),
        (["--minutes", "30", "--position", "0"], "--position must be from 1 to 2147483647"),
        (["--minutes", "30", "--position", str(2**31)], "--position must be from 1 to 2147483647"),
        (["--minutes", "30", "--replace"], "--replace needs --position"),
        (["--minutes", "30", "--reason", "hunch"], "invalid choice"),
        (["--minutes", "30", "--kind", "email"], "invalid choice"),
        (["--minutes", "30", "--application", ""], "leave it out for any application"),
        (["--minutes", "30", "--application", " "], "leave it out for any application"),
        (["--minutes", "30", "--application", "x" * 101], "at most 100 characters"),
        (["--minutes", "30", "--kind", "draft", "--application", "billing"], "drafts are filed under no application"),
    ],
)
def test_every_refused_target_says_why_and_writes_nothing(org, args, says):
    with pytest.raises(CommandError, match=says):
        target(*args)
    assert not ServiceTarget.objects.exists()
    assert not AuditEvent.objects.exists()


def test_a_target_after_one_at_the_largest_position_is_refused_with_what_to_give_and_writes_nothing(org):
    target("--minutes", "30", "--position", str(2**31 - 1))
    with pytest.raises(CommandError, match="the last target of northwind is at position 2147483647: give this one"):
        target("--minutes", "30")
    assert rows() == [("northwind", 2**31 - 1, "", "", "", 30)]
    assert actions() == ["service_target.create"]


def test_set_needs_a_known_org(org):
    with pytest.raises(CommandError, match="nowhere"):
        target("--minutes", "30", org="nowhere")
    with pytest.raises(CommandError, match="the following arguments are required: --org"):
        targets("set", "--minutes", "30")
    assert not ServiceTarget.objects.exists()


def test_the_largest_target_is_a_year_and_dates_its_items_a_year_on(org):
    waiting = draft_item(org, "waiting")
    assert target("--minutes", "525600").startswith(
        "created: northwind  1  any kind · any application · any reason  within 365 d"
    )
    waiting.refresh_from_db()
    assert waiting.due_at == waiting.routed_at + timedelta(days=365)


def test_remove_deletes_the_target_at_that_position_only(org, other_org):
    target("--kind", "draft", "--hours", "1")
    target("--minutes", "30")
    target("--minutes", "30", org="globex")
    output = targets("remove", *IN_NORTHWIND, "--position", "1")
    assert output == (
        "removed: northwind  1  draft · any application · any reason  within 1 h  (re-dated 0 waiting items)\n"
    )
    assert rows() == [("globex", 1, "", "", "", 30), ("northwind", 2, "", "", "", 30)]


def test_removing_a_target_that_does_not_exist_is_an_error_and_writes_nothing(org, other_org):
    target("--minutes", "30", org="globex")
    with pytest.raises(CommandError, match="no target at position 1 in northwind; nothing removed"):
        targets("remove", *IN_NORTHWIND, "--position", "1")
    with pytest.raises(CommandError, match="--position must be from 1"):
        targets("remove", *IN_NORTHWIND, "--position", "0")
    assert rows() == [("globex", 1, "", "", "", 30)]
    assert actions() == ["service_target.create"]


def test_each_target_write_leaves_an_audit_event_naming_the_target(org):
    target("--kind", "conversation", "--application", "billing", "--reason", "spread", "--minutes", "90")
    created = ServiceTarget.objects.get()
    targets("remove", *IN_NORTHWIND, "--position", "1")
    events = list(AuditEvent.objects.order_by("pk"))
    assert [event.action for event in events] == ["service_target.create", "service_target.delete"]
    assert {(event.org_id, event.actor_id, event.object_type, event.object_id) for event in events} == {
        (org.pk, None, "grading.servicetarget", str(created.pk))
    }
    as_dict = {"position": 1, "kind": "conversation", "application": "billing", "reason": "spread", "minutes": 90}
    assert [event.detail for event in events] == [as_dict, as_dict]


def test_a_waiting_review_of_another_org_is_not_re_dated(org, other_org):
    theirs = draft_item(other_org, "theirs")
    assert target("--minutes", "30").endswith("(re-dated 0 waiting items)\n")
    theirs.refresh_from_db()
    assert theirs.due_at is None
    assert Review.objects.filter(org=org).count() == 0


def test_ahead_of_inserts_a_target_before_another_moving_only_those_right_behind_it(org):
    waiting = draft_item(org, "waiting")
    target("--minutes", "600")
    target("--minutes", "300")
    target("--minutes", "100", "--position", "5")
    output = target("--kind", "draft", "--minutes", "30", "--ahead-of", "1")
    assert output == (
        "created: northwind  1  draft · any application · any reason  within 30 min  (re-dated 1 waiting item)\n"
    )
    assert rows() == [
        ("northwind", 1, "draft", "", "", 30),
        ("northwind", 2, "", "", "", 600),
        ("northwind", 3, "", "", "", 300),
        ("northwind", 5, "", "", "", 100),
    ]
    waiting.refresh_from_db()
    assert waiting.due_at == waiting.routed_at + timedelta(minutes=30)
    moved = AuditEvent.objects.filter(action="service_target.move").order_by("pk")
    assert [(event.detail["position"], event.detail["was_position"]) for event in moved] == [(3, 2), (2, 1)]
    assert actions()[-1] == "service_target.create"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--ahead-of", "2"], "no target at position 2 in northwind; nothing added"),
        (["--ahead-of", "0"], "--ahead-of must be from 1 to 2147483647"),
        (["--ahead-of", "1", "--position", "3"], "--ahead-of places the target: leave out --position"),
    ],
)
def test_a_refused_ahead_of_says_why_and_writes_nothing(org, args, says):
    target("--minutes", "600")
    with pytest.raises(CommandError, match=says):
        target("--minutes", "30", *args)
    assert rows() == [("northwind", 1, "", "", "", 600)]
    assert actions() == ["service_target.create"]


def test_ahead_of_a_run_reaching_the_largest_position_is_refused_and_writes_nothing(org):
    target("--minutes", "600", "--position", str(2**31 - 1))
    with pytest.raises(CommandError, match="reach position 2147483647: remove one of them, or add this one last"):
        target("--minutes", "30", "--ahead-of", str(2**31 - 1))
    assert rows() == [("northwind", 2**31 - 1, "", "", "", 600)]
    assert actions() == ["service_target.create"]

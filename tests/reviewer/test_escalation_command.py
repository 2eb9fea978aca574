"""`manage.py escalation`: set, show and remove an org's escalation, each write audited, each refusal writing
nothing; a new escalation starts its sweeps now, and a change of settings leaves where the sweeps are alone."""

from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from grading.models import AuditEvent, ServiceTarget
from reviewer.models import Escalation

pytestmark = pytest.mark.django_db

IN_NORTHWIND = ["--org", "northwind"]
HOOK = "https://hooks.example.com/tollgate"
SWEPT = datetime(2026, 12, 3, 14, 0, 30, tzinfo=UTC)


@pytest.fixture(autouse=True)
def no_allowed_networks(settings):
    """Judged as in production: no internal network is let through."""
    settings.OUTBOUND_ALLOWED_NETWORKS = []


def escalation(*args: str, stderr: StringIO | None = None) -> str:
    out = StringIO()
    call_command("escalation", *args, stdout=out, stderr=stderr or StringIO())
    return out.getvalue()


def escalate(*args: str, org: str = "northwind") -> str:
    return escalation("set", "--org", org, *args)


def actions() -> list[str]:
    return list(AuditEvent.objects.order_by("pk").values_list("action", flat=True))


def rows() -> list[tuple]:
    return list(
        Escalation.objects.order_by("org__slug").values_list(
            "org__slug", "warn_minutes", "to_assignees", "to_leads", "webhook_url"
        )
    )


def swept_at(when: datetime, org: str = "northwind") -> None:
    Escalation.objects.filter(org__slug=org).update(swept_until=when)


def without_sweep_time(output: str) -> str:
    """The output with its `swept until` time (about now, on create) left out."""
    head, _, tail = output.partition("  · swept until ")
    return head + tail[len("2026-12-03 14:00 UTC") :]


# --- set --------------------------------------------------------------------------------------------------------


def test_set_creates_the_escalation_starting_its_sweeps_now(org):
    before = timezone.now()
    output = escalate("--warn-minutes", "10", "--webhook", HOOK)
    after = timezone.now()
    created = Escalation.objects.get()
    assert before <= created.swept_until <= after
    assert output == (
        f"created: northwind  warn 10 min before due · to assignees, leads · webhook {HOOK}"
        f"  · swept until {created.swept_until:%Y-%m-%d %H:%M} UTC  (items already overdue are not announced)\n"
    )
    assert rows() == [("northwind", 10, True, True, HOOK)]


def test_set_without_settings_creates_the_defaults_mail_to_assignees_and_leads_once_overdue(org):
    output = escalate()
    assert without_sweep_time(output) == (
        "created: northwind  no warning (told once overdue) · to assignees, leads · no webhook"
        "  (items already overdue are not announced)\n"
    )
    assert rows() == [("northwind", 0, True, True, "")]


def test_set_again_changes_only_the_settings_given_and_leaves_the_sweeps_where_they_are(org):
    escalate("--warn-minutes", "10")
    swept_at(SWEPT)
    output = escalate("--no-to-assignees", "--webhook", HOOK)
    assert output == (
        f"updated: northwind  warn 10 min before due · to leads · webhook {HOOK}  · swept until 2026-12-03 14:00 UTC"
        " (was warn 10 min before due · to assignees, leads · no webhook)\n"
    )
    assert rows() == [("northwind", 10, False, True, HOOK)]
    assert Escalation.objects.get().swept_until == SWEPT

    assert escalate("--warn-minutes", "90", "--to-assignees", "--no-to-leads", "--no-webhook").startswith(
        "updated: northwind  warn 1 h 30 min before due · to assignees · no webhook  · swept until 2026-12-03 14:00"
    )
    assert rows() == [("northwind", 90, True, False, "")]
    assert Escalation.objects.get().swept_until == SWEPT


def test_setting_what_is_already_set_changes_nothing_and_audits_nothing(org):
    escalate("--warn-minutes", "10", "--no-to-leads")
    swept_at(SWEPT)
    output = escalate("--warn-minutes", "10", "--to-assignees", "--no-to-leads", "--no-webhook")
    assert output == (
        "unchanged: northwind  warn 10 min before due · to assignees · no webhook  · swept until 2026-12-03 14:00 UTC\n"
    )
    assert escalate().startswith("unchanged: ")
    assert actions() == ["escalation.create"]
    assert Escalation.objects.get().swept_until == SWEPT


def test_each_org_has_one_escalation(org, other_org):
    escalate("--warn-minutes", "10")
    escalate("--warn-minutes", "20")
    escalate("--no-to-leads", org="globex")
    assert rows() == [("globex", 0, True, False, ""), ("northwind", 20, True, True, "")]


def test_the_largest_warning_is_a_week(org):
    assert escalate("--warn-minutes", "10080").startswith("created: northwind  warn 7 d before due · ")
    assert escalate("--warn-minutes", "120").startswith("updated: northwind  warn 2 h before due · ")


def test_a_webhook_alone_may_tell_whom_it_must(org):
    escalate("--no-to-assignees", "--no-to-leads", "--webhook", f"  {HOOK}  ")
    assert rows() == [("northwind", 0, False, False, HOOK)]


def test_an_org_without_service_targets_is_warned_that_nothing_is_due(org):
    warned = StringIO()
    escalation("set", *IN_NORTHWIND, stderr=warned)
    assert "northwind has no service-level targets: no item has a due time" in warned.getvalue()
    ServiceTarget.objects.create(org=org, position=1, minutes=60)
    warned = StringIO()
    escalation("set", *IN_NORTHWIND, "--warn-minutes", "5", stderr=warned)
    assert warned.getvalue() == ""


# --- refusals ---------------------------------------------------------------------------------------------------

NOBODY = "this escalation would tell nobody"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--warn-minutes", "-1"], "--warn-minutes must be from 0 to 10080"),
        (["--warn-minutes", "10081"], "--warn-minutes must be from 0 to 10080"),
        (["--warn-minutes", "soon"], "invalid int value"),
        (["--no-to-assignees", "--no-to-leads"], NOBODY),
        (["--no-to-assignees", "--no-to-leads", "--no-webhook"], NOBODY),
        (["--webhook", HOOK, "--no-webhook"], "not allowed with"),
        (["--webhook", ""], "--webhook is empty"),
        (["--webhook", " "], "--webhook is empty"),
        (["--webhook", "https://hooks.example.com/" + "x" * 975], "webhook URLs are at most 1000 characters"),
        (["--webhook", "ftp://hooks.example.com/"], "only http and https URLs are requested, not ftp"),
        (["--webhook", "hooks.example.com/tollgate"], "only http and https URLs are requested, not no scheme"),
        (["--webhook", "https://user:secret@hooks.example.com/"], "the URL carries credentials"),
        (["--webhook", "http://127.0.0.1:6379/"], "the address 127.0.0.1 is loopback"),
        (["--webhook", "http://169.254.169.254/latest/meta-data/"], "the address 169.254.169.254 is link-local"),
        (["--webhook", "http://10.1.2.3/hook"], "the address 10.1.2.3 is private"),
        (["--webhook", "http://0x7f000001/"], "the address 127.0.0.1 is loopback"),
        (["--webhook", "http://[::ffff:192.168.0.1]/"], "an IPv6 form of 192.168.0.1, private"),
        (["--webhook", "https://"], "the URL names no host"),
        (["--webhook", "https://hooks.example.com:99999/"], "not a valid URL"),
        (["--webhook", "https://hooks_example/"], "Enter a valid URL"),
        (["--to-leads", "--no-to-leads", "--no-to-assignees"], NOBODY),  # the last one given counts
    ],
)
def test_every_refused_setting_says_why_and_writes_nothing(org, args, says):
    with pytest.raises(CommandError, match=says):
        escalate(*args)
    assert not Escalation.objects.exists()
    assert not AuditEvent.objects.exists()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--no-to-assignees"], NOBODY),  # leads are already off, and there is no webhook
        (["--no-to-assignees", "--no-webhook"], NOBODY),
        (["--warn-minutes", "10081"], "--warn-minutes must be from 0 to 10080"),
        (["--webhook", "http://192.168.1.1/"], "the address 192.168.1.1 is private"),
    ],
)
def test_a_refused_change_leaves_the_escalation_as_it_was(org, args, says):
    escalate("--warn-minutes", "10", "--no-to-leads")
    swept_at(SWEPT)
    with pytest.raises(CommandError, match=says):
        escalate(*args)
    assert rows() == [("northwind", 10, True, False, "")]
    assert Escalation.objects.get().swept_until == SWEPT
    assert actions() == ["escalation.create"]


def test_dropping_the_webhook_of_an_escalation_that_mails_nobody_is_refused(org):
    escalate("--no-to-assignees", "--no-to-leads", "--webhook", HOOK)
    with pytest.raises(CommandError, match=NOBODY):
        escalate("--no-webhook")
    assert rows() == [("northwind", 0, False, False, HOOK)]
    assert actions() == ["escalation.create"]


def test_set_needs_a_known_org(org):
    with pytest.raises(CommandError, match="no org with slug 'nowhere'"):
        escalate(org="nowhere")
    with pytest.raises(CommandError, match="the following arguments are required: --org"):
        escalation("set", "--warn-minutes", "10")
    assert not Escalation.objects.exists()
    assert not AuditEvent.objects.exists()


# --- show -------------------------------------------------------------------------------------------------------


def test_show_gives_one_line_per_org_with_an_escalation_unless_one_is_named(org, other_org):
    escalate("--warn-minutes", "10", "--webhook", HOOK)
    escalate("--no-to-assignees", org="globex")
    swept_at(SWEPT)
    swept_at(SWEPT + timedelta(minutes=1), org="globex")
    assert escalation("show").splitlines() == [
        "globex  no warning (told once overdue) · to leads · no webhook  · swept until 2026-12-03 14:01 UTC",
        f"northwind  warn 10 min before due · to assignees, leads · webhook {HOOK}  · swept until 2026-12-03 14:00 UTC",
    ]
    assert escalation("show", "--org", "globex").splitlines() == [
        "globex  no warning (told once overdue) · to leads · no webhook  · swept until 2026-12-03 14:01 UTC",
    ]


def test_show_says_when_a_named_org_has_no_escalation_and_lists_nothing_when_no_org_has_one(org):
    assert escalation("show", *IN_NORTHWIND) == "northwind  no escalation: nobody is told\n"
    assert escalation("show") == ""


# --- remove -----------------------------------------------------------------------------------------------------


def test_remove_deletes_the_orgs_escalation_only(org, other_org):
    escalate("--warn-minutes", "10")
    escalate(org="globex")
    swept_at(SWEPT)
    output = escalation("remove", *IN_NORTHWIND)
    assert output == (
        "removed: northwind  warn 10 min before due · to assignees, leads · no webhook"
        "  · swept until 2026-12-03 14:00 UTC\n"
    )
    assert rows() == [("globex", 0, True, True, "")]


def test_set_after_remove_starts_the_sweeps_anew_at_now(org):
    escalate()
    swept_at(SWEPT - timedelta(days=30))
    escalation("remove", *IN_NORTHWIND)
    before = timezone.now()
    assert escalate().startswith("created: ")
    assert Escalation.objects.get().swept_until >= before


def test_removing_an_escalation_that_does_not_exist_is_an_error_and_writes_nothing(org, other_org):
    escalate(org="globex")
    with pytest.raises(CommandError, match="no escalation in northwind; nothing removed"):
        escalation("remove", *IN_NORTHWIND)
    with pytest.raises(CommandError, match="the following arguments are required: --org"):
        escalation("remove")
    assert rows() == [("globex", 0, True, True, "")]
    assert actions() == ["escalation.create"]


# --- audit ------------------------------------------------------------------------------------------------------


def test_each_write_leaves_an_audit_event_naming_the_escalation(org):
    escalate("--warn-minutes", "10")
    created = Escalation.objects.get()
    swept_at(SWEPT)
    escalate("--no-to-leads", "--webhook", HOOK)
    escalation("remove", *IN_NORTHWIND)
    events = list(AuditEvent.objects.order_by("pk"))
    assert [event.action for event in events] == ["escalation.create", "escalation.update", "escalation.delete"]
    assert {(event.org_id, event.actor_id, event.object_type, event.object_id) for event in events} == {
        (org.pk, None, "reviewer.escalation", str(created.pk))
    }
    first = {"warn_minutes": 10, "to_assignees": True, "to_leads": True, "webhook_url": ""}
    then = {"warn_minutes": 10, "to_assignees": True, "to_leads": False, "webhook_url": HOOK}
    assert [event.detail for event in events] == [
        first | {"swept_until": created.swept_until.isoformat()},
        {"before": first, "after": then},
        then | {"swept_until": SWEPT.isoformat()},
    ]

"""Monitors: a monitor goes through ok, warning, alert, no data and back, and each change of state (only a change) is
told once by mail (a real SMTP server on loopback), a signed webhook and a Slack-compatible chat message (real
receivers on loopback); the hysteresis rule holds a state until the figure is past its level by the margin; each
figure equals a recount of the reviews in Python, on the monitor's slice; a bad setting is refused naming it."""

import hashlib
import hmac
import json
from datetime import timedelta

import pytest
from django.utils import timezone

from grading import tasks
from grading.models import AuditEvent, Direction, ItemKind, Monitor, MonitorEvaluation, MonitorState, Route
from grading.monitors.evaluate import monitor_evaluate, monitors_evaluate
from grading.monitors.figures import figure_reviews, monitor_figure, monitors_figures
from grading.monitors.services import MonitorInvalid, monitor_delete, monitor_update, settings_of
from grading.monitors.states import Levels, state_next
from tests.builders.monitored import MONITOR_DEFAULTS, graded, monitor

pytestmark = pytest.mark.django_db

OK, WARNING, ALERT, NO_DATA = "ok", "warning", "alert", "no_data"


@pytest.fixture
def allow_loopback(settings):
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.1/32"]


def told_at_once(evaluation_id: int, channels: list[str]) -> None:
    """What the beat's run hands the `webhooks` queue, run here in the test's process."""
    for channel in channels:
        tasks.monitor_notice.apply(args=(evaluation_id, channel)).get()


def grounded(org, at, passed: int, failed: int, **fields) -> None:
    for verdict in ["pass"] * passed + ["fail"] * failed:
        graded(org, at=at, checks={"grounded": verdict}, minutes_ago=10, **fields)


def test_it_goes_through_ok_warning_alert_no_data_and_back_telling_each_change_once(
    org, smtp, receiver, allow_loopback, django_capture_on_commit_callbacks
):
    hook, chat = receiver(), receiver()
    mail_to = ["oncall@example.com", "lead@example.com"]
    watched = monitor(org, "Grounding <billing>", window_hours=1, min_n=4, warning_level=0.9, alert_level=0.7,
                      mail_to=mail_to, webhook_url=hook.url, chat_url=chat.url)  # fmt: skip
    start = timezone.now() - timedelta(hours=20)
    # Each evaluation two hours after the last, so a one-hour window reads only the items graded just before it.
    steps = [(10, 0, OK), (8, 2, WARNING), (5, 5, ALERT), (2, 0, NO_DATA), (10, 0, OK), (9, 0, OK)]
    states = []
    for step, (passed, failed, _) in enumerate(steps):
        at = start + timedelta(hours=2 * step)
        grounded(org, at, passed, failed)
        with django_capture_on_commit_callbacks(execute=True):
            assert monitors_evaluate(deliver=told_at_once, now=at) == 1
        watched.refresh_from_db()
        states.append(watched.state)

    assert states == [state for _, _, state in steps]
    changes = [("ok", "warning"), ("warning", "alert"), ("alert", "no_data"), ("no_data", "ok")]
    assert [m["Subject"] for m in smtp.messages] == [
        f"Tollgate (northwind) monitor Grounding <billing>: {new.replace('_', ' ')} (was {was.replace('_', ' ')})"
        for was, new in changes
    ]
    assert smtp.messages[0]["To"] == "oncall@example.com, lead@example.com"
    assert (
        "pass rate of a check grounded of conversations over the last 1 h: 80.0% (n = 10)"
        in smtp.messages[0].get_payload()
    )
    posted = [json.loads(body) for _, body in hook.received]
    assert [(p["previous"], p["state"]) for p in posted] == changes
    assert [(p["value"], p["n"]) for p in posted] == [
        (0.8, 10),
        (0.5, 10),
        (1.0, 2),
        (1.0, 10),
    ]  # below its minimum n, a figure is shown, not judged
    chats = [json.loads(body)["text"] for _, body in chat.received]
    assert len(chats) == 4 and chats[1].startswith("*Grounding &lt;billing&gt;: alert (was warning)*")
    history = list(MonitorEvaluation.objects.filter(monitor=watched).order_by("at").values_list("state", "changed"))
    assert history == [(OK, False), (WARNING, True), (ALERT, True), (NO_DATA, True), (OK, True), (OK, False)]


def test_the_webhook_is_signed_with_the_orgs_secret_and_a_refused_address_is_not_tried_again(
    org, receiver, allow_loopback, settings, django_capture_on_commit_callbacks
):
    hook = receiver()
    watched = monitor(org, webhook_url=hook.url, min_n=1)
    grounded(org, timezone.now(), 0, 3)
    with django_capture_on_commit_callbacks(execute=True):
        monitors_evaluate(deliver=told_at_once)
    headers, body = hook.received[0]
    expected = hmac.new(org.webhook_secret.encode(), headers["x-tollgate-timestamp"].encode() + b"." + body,
                        hashlib.sha256).hexdigest()  # fmt: skip
    assert headers["x-tollgate-signature"] == f"sha256={expected}" and headers["x-tollgate-event"] == "monitor_state"
    assert json.loads(body)["state"] == ALERT  # a first state is told when it is bad
    settings.OUTBOUND_ALLOWED_NETWORKS = []  # loopback is internal: refused at the send, once, not retried
    evaluation = MonitorEvaluation.objects.get(monitor=watched)
    assert tasks.monitor_notice.apply(args=(evaluation.pk, "webhook")).get() is False
    assert len(hook.received) == 1


def test_a_receiver_that_fails_is_tried_again_and_a_first_ok_is_not_told(
    org, receiver, allow_loopback, settings, django_capture_on_commit_callbacks
):
    settings.WEBHOOK_RETRY_BASE_SECONDS, settings.WEBHOOK_MAX_ATTEMPTS = 0, 3
    hook = receiver([503, 200])
    monitor(org, webhook_url=hook.url, min_n=1)
    grounded(org, timezone.now(), 5, 0)
    with django_capture_on_commit_callbacks(execute=True):
        monitors_evaluate(deliver=told_at_once)
    assert hook.received == []
    grounded(org, timezone.now(), 0, 20)
    with django_capture_on_commit_callbacks(execute=True):
        monitors_evaluate(deliver=told_at_once)
    assert [json.loads(body)["state"] for _, body in hook.received] == [ALERT, ALERT]  # a 503, then delivered


LEVELS = Levels(direction=Direction.BELOW, warning=0.9, alert=0.8, margin=0.02, min_n=5)


@pytest.mark.parametrize(
    ("previous", "value", "expected"),
    [
        ("", 0.95, OK), ("", 0.9, OK), ("", 0.899, WARNING), ("", 0.79, ALERT),  # exactly at a level is not past it
        (ALERT, 0.81, ALERT), (ALERT, 0.82, WARNING), (ALERT, 0.95, OK),  # an alert holds until 0.82
        (WARNING, 0.91, WARNING), (WARNING, 0.92, OK), (WARNING, 0.79, ALERT),  # getting worse is never delayed
        (OK, 0.899, WARNING), (NO_DATA, 0.91, OK), (NO_DATA, 0.85, WARNING),  # no data holds no level
    ],
)  # fmt: skip
def test_a_state_holds_until_the_figure_is_past_its_level_by_the_margin(previous, value, expected):
    assert state_next(value=value, n=10, previous=previous, levels=LEVELS) == expected


def test_above_is_bad_mirrors_the_rule_and_too_few_items_is_no_data_whatever_the_figure():
    above = Levels(direction=Direction.ABOVE, warning=0.1, alert=0.2, margin=0.05, min_n=5)
    assert state_next(value=0.21, n=10, previous=OK, levels=above) == ALERT
    assert state_next(value=0.16, n=10, previous=ALERT, levels=above) == ALERT
    assert state_next(value=0.15, n=10, previous=ALERT, levels=above) == WARNING
    assert state_next(value=0.06, n=10, previous=WARNING, levels=above) == WARNING
    assert state_next(value=0.05, n=10, previous=WARNING, levels=above) == OK
    assert state_next(value=0.9, n=4, previous=ALERT, levels=above) == NO_DATA
    assert state_next(value=None, n=0, previous=OK, levels=above) == NO_DATA


def test_a_figure_hovering_at_a_level_changes_the_state_once_not_at_every_evaluation(
    org, django_capture_on_commit_callbacks
):
    watched = monitor(org, window_hours=1, min_n=10, margin=0.05)
    start = timezone.now() - timedelta(hours=30)
    told = []
    for step, passed in enumerate([9, 8, 9, 8, 9, 8, 10]):  # 90%, 80%, ... at the warning level, then 100%
        at = start + timedelta(hours=2 * step)
        grounded(org, at, passed, 10 - passed)
        with django_capture_on_commit_callbacks(execute=True):
            monitors_evaluate(deliver=lambda evaluation_id, channels: told.append(evaluation_id), now=at)
    states = list(MonitorEvaluation.objects.filter(monitor=watched).order_by("at").values_list("state", flat=True))
    assert states == [OK, WARNING, WARNING, WARNING, WARNING, WARNING, OK]
    assert MonitorEvaluation.objects.filter(monitor=watched, changed=True).count() == 2


# --- each figure against a recount ----------------------------------------------------------------------------


def recount(monitor_row: Monitor, reviews, now) -> tuple[float | None, int]:
    """What the figure counts, from the reviews in Python (the module docstring's words)."""
    start = now - timedelta(hours=monitor_row.window_hours)
    check = monitor_row.check_key
    mine = [r for r in reviews if r.org_id == monitor_row.org_id and r.kind == monitor_row.kind]
    if monitor_row.application:
        mine = [r for r in mine if r.application == monitor_row.application]
    if monitor_row.metadata_name:
        mine = [r for r in mine if r.subject.metadata.get(monitor_row.metadata_name) == monitor_row.metadata_value]
    graded_in = [r for r in mine if start < r.finished_at <= now and r.state != "trial"]
    counting = [r for r in graded_in if r.state in ("current", "waiting", "decided")]

    def verdict(r):
        return (r.checks.get(check) or {}).get("verdict")

    def human(r):
        outcome = r.decision.outcome if hasattr(r, "decision") else None
        return {"approve": "pass", "pass": "pass", "reject": "fail", "send_back": "fail", "fail": "fail"}.get(outcome)

    scored = [r for r in counting if r.route in ("pass", "fail", "human")]
    figure = monitor_row.figure
    if figure == "check_pass":
        population = [r for r in scored if verdict(r) in ("pass", "fail")]
        hits = [r for r in population if verdict(r) == "pass"]
    elif figure == "unknown_share":
        population = [r for r in scored if verdict(r) in ("pass", "fail", "unknown")]
        hits = [r for r in population if verdict(r) == "unknown"]
    elif figure == "item_pass":
        final = {
            r.pk: human(r) if hasattr(r, "decision") else {"pass": "pass", "fail": "fail"}.get(r.route)
            for r in counting
        }
        population = [r for r in counting if final[r.pk]]
        hits = [r for r in population if final[r.pk] == "pass"]
    elif figure == "errors":
        population, hits = graded_in, [r for r in graded_in if r.route == "error"]
    elif figure == "spend":
        population = [r for r in graded_in if "prompt_tokens" in r.usage]
        total = sum(r.usage.get("prompt_tokens", 0) + r.usage.get("completion_tokens", 0) for r in population)
        return (float(total) if population else None), len(population)
    elif figure == "overdue":
        waiting = [r for r in mine if r.state == "waiting"]
        return float(len([r for r in waiting if r.due_at and r.due_at <= now])), len(waiting)
    else:  # agreement
        counts = [
            r for r in mine if r.state in ("current", "waiting", "decided") and r.route in ("pass", "fail", "human")
        ]
        decided = [r for r in counts if hasattr(r, "decision") and start < r.decision.decided_at <= now]
        if check:
            pairs = [(verdict(r), r.decision.checks.get(check)) for r in decided]
        else:

            def machine(r):
                if r.route in ("pass", "fail"):
                    return r.route
                if r.kind == "draft" and r.judge_passed is not None:
                    return "pass" if r.judge_passed else "fail"
                return None

            pairs = [(machine(r), human(r)) for r in decided]
        population = [p for p in pairs if p[0] in ("pass", "fail") and p[1] in ("pass", "fail")]
        return (sum(m == h for m, h in population) / len(population) if population else None), len(population)
    return (len(hits) / len(population) if population else None), len(population)


@pytest.fixture
def mixed(org, other_org):
    """Reviews of every sort a figure reads or must leave out, inside and outside the window and the slices."""
    now = timezone.now()
    release = {"release": "2.4"}
    for minutes_ago in (5, 90, 60 * 30):  # in a 24 h window, in a 2 h one too, and outside both
        for application, metadata in (("billing", release), ("billing", {"release": "2.3"}), ("returns", release)):
            base = {"at": now, "minutes_ago": minutes_ago, "application": application, "metadata": metadata}
            graded(org, checks={"grounded": "pass", "complete": "fail"}, **base)
            graded(org, route=Route.FAIL, checks={"grounded": "fail"}, **base)
            graded(org, route=Route.HUMAN, checks={"grounded": "unknown"}, due_at=now - timedelta(minutes=1), **base)
            graded(org, route=Route.HUMAN, checks={"grounded": "unknown"}, due_at=now + timedelta(hours=1), **base)
            graded(org, route=Route.HUMAN, checks={"grounded": "pass"}, decision="fail",
                   decision_checks={"grounded": "fail"}, **base)  # fmt: skip
            graded(org, route=Route.PASS, checks={"grounded": "pass"}, decision="pass", audit=True,
                   decision_checks={"grounded": "pass"}, decided_minutes_ago=minutes_ago + 600, **base)  # fmt: skip
            graded(org, route=Route.ERROR, usage={}, **base)
            graded(org, checks={"grounded": "pass"}, state="stale", **base)
            graded(org, checks={"grounded": "fail"}, state="superseded", **base)
            graded(org, checks={"grounded": "fail"}, state="trial", **base)
            graded(org, checks={"grounded": "not a verdict"}, usage={"prompt_tokens": 7}, **base)
            graded(other_org, checks={"grounded": "fail"}, **base)
        draft = {"at": now, "minutes_ago": minutes_ago, "kind": ItemKind.DRAFT, "metadata": release}
        graded(org, route=Route.PASS, **draft)
        graded(org, route=Route.HUMAN, judge_passed=True, decision="reject", **draft)
        graded(org, route=Route.HUMAN, judge_passed=False, decision="approve", **draft)
        graded(org, route=Route.HUMAN, judge_passed=False, due_at=now - timedelta(minutes=3), **draft)
        graded(org, route=Route.FAIL, decision="approve", **draft)
    return now


FIGURES = [
    {"figure": "check_pass"},
    {"figure": "check_pass", "window_hours": 2},
    {"figure": "check_pass", "application": "billing", "metadata_name": "release", "metadata_value": "2.4"},
    {"figure": "unknown_share"},
    {"figure": "item_pass", "check_key": ""},
    {"figure": "item_pass", "check_key": "", "kind": "draft"},
    {"figure": "agreement", "check_key": ""},
    {"figure": "agreement"},
    {"figure": "agreement", "check_key": "", "kind": "draft", "window_hours": 48},
    {"figure": "spend", "check_key": ""},
    {"figure": "spend", "check_key": "", "metadata_name": "release", "metadata_value": "2.3"},
    {"figure": "errors", "check_key": "", "application": "returns"},
    {"figure": "overdue", "check_key": ""},
    {"figure": "overdue", "check_key": "", "kind": "draft"},
]


def test_each_figure_equals_a_recount_of_its_reviews_on_its_slice(org, mixed):
    reviews = list(type(org).objects.get(pk=org.pk).reviews.select_related("conversation", "draft", "decision")) + list(
        type(org).objects.exclude(pk=org.pk).get().reviews.all()
    )
    for number, settings in enumerate(FIGURES):
        watched = monitor(org, f"figure {number}", direction="below", **settings)  # levels do not matter here
        got = monitor_figure(watched, mixed)
        assert (got.value, got.n) == pytest.approx(recount(watched, reviews, mixed)), settings
        assert got.n > 0, settings  # every case counts something: a recount of nothing proves little
        if watched.figure != "overdue":
            assert figure_reviews(watched, mixed).count() == got.n, settings


def test_a_run_reads_every_figure_together_and_each_equals_its_recount(org, mixed, django_assert_max_num_queries):
    reviews = list(type(org).objects.get(pk=org.pk).reviews.select_related("conversation", "draft", "decision")) + list(
        type(org).objects.exclude(pk=org.pk).get().reviews.all()
    )
    extra = [  # slices sharing a scan with the figures' own: other applications, releases, checks and windows
        {"figure": "check_pass", "check_key": "complete", "application": "returns"},
        {"figure": "check_pass", "metadata_name": "release", "metadata_value": "2.3"},
        {"figure": "unknown_share", "application": "billing", "metadata_name": "release", "metadata_value": "2.4"},
        {"figure": "item_pass", "check_key": "", "kind": "draft", "metadata_name": "release", "metadata_value": "2.4"},
        {"figure": "agreement", "application": "returns", "window_hours": 2},
        {"figure": "overdue", "check_key": "", "application": "billing", "metadata_name": "release",
         "metadata_value": "2.3"},
    ]  # fmt: skip
    watched = [
        monitor(org, f"figure {number}", direction="below", **settings)
        for number, settings in enumerate(FIGURES + extra)
    ]
    # The figures: one query per (kind, what the figure reads, window, metadata name), 11 here for 20 monitors;
    # besides, the monitors listed, each one's own transaction (here a savepoint, its lock, its evaluation, its state,
    # the release: 5 queries) and the history's pruning. One query per monitor's figure would be 20.
    with django_assert_max_num_queries(11 + 1 + 5 * len(watched) + 1):
        assert monitors_evaluate(deliver=lambda *_: None, now=mixed) == len(watched)
    for row in watched:
        evaluation = MonitorEvaluation.objects.get(monitor=row)
        assert (evaluation.value, evaluation.n) == pytest.approx(recount(row, reviews, mixed)), settings_of(row)


def test_a_monitor_changed_after_the_run_read_the_figures_is_evaluated_on_its_new_settings(org, mixed):
    reviews = list(type(org).objects.get(pk=org.pk).reviews.select_related("conversation", "draft", "decision"))
    watched = monitor(org, direction="below")
    figures = monitors_figures([watched], mixed)  # the run reads, then someone narrows the monitor to a release
    monitor_update(monitor=watched, given=settings_of(watched) | {"metadata_name": "release", "metadata_value": "2.3"})
    evaluation = monitor_evaluate(monitor_id=watched.pk, now=mixed, deliver=lambda *_: None, figures=figures)
    watched.refresh_from_db()
    assert (evaluation.value, evaluation.n) == pytest.approx(recount(watched, reviews, mixed))
    (stale,) = figures.values()
    assert evaluation.n < stale.n  # the figure read for the old settings was not taken


# --- settings -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changed", "field"),
    [
        ({"name": "  "}, "name"),
        ({"figure": "vibes"}, "figure"),
        ({"kind": "email"}, "kind"),
        ({"check_key": ""}, "check_key"),
        ({"check_key": "nonesuch"}, "check_key"),
        ({"figure": "spend"}, "check_key"),
        ({"kind": "draft"}, "check_key"),
        ({"window_hours": 0}, "window_hours"),
        ({"window_hours": 721}, "window_hours"),
        ({"window_hours": "24"}, "window_hours"),
        ({"min_n": -1}, "min_n"),
        ({"application": "billing", "kind": "draft", "figure": "spend", "check_key": ""}, "application"),
        ({"metadata_name": "release"}, "metadata_value"),
        ({"metadata_name": "1release", "metadata_value": "2.4"}, "metadata_name"),
        ({"metadata_name": "release", "metadata_value": "2.4\n"}, "metadata_value"),
        ({"direction": "sideways"}, "direction"),
        ({"warning_level": 1.5}, "warning_level"),
        ({"alert_level": float("nan")}, "alert_level"),
        ({"alert_level": 0.95}, "alert_level"),  # below is bad: an alert above the warning is no worse
        ({"margin": -0.1}, "margin"),
        ({"mail_to": ["not an address"]}, "mail_to"),
        ({"mail_to": [f"p{n}@example.com" for n in range(11)]}, "mail_to"),
        ({"webhook_url": "ftp://example.com/hook"}, "webhook_url"),
        ({"chat_url": "http://127.0.0.1:9/hook"}, "chat_url"),
        ({"chat_url": "https://user:secret@example.com/hook"}, "chat_url"),
    ],
)
def test_a_bad_setting_is_refused_naming_it_and_nothing_is_written(org, changed, field):
    with pytest.raises(MonitorInvalid) as refused:
        monitor(org, **changed)
    assert refused.value.field == field
    assert not Monitor.objects.exists() and not AuditEvent.objects.exists()


def test_a_name_is_one_monitor_per_org_and_every_change_is_audited(org, operator):
    watched = monitor(org, actor=operator)
    with pytest.raises(MonitorInvalid) as refused:
        monitor(org)
    assert refused.value.field == "name"
    assert monitor_update(monitor=watched, given=settings_of(watched) | {"alert_level": 0.5}, actor=operator) == [
        "alert_level"
    ]
    assert monitor_update(monitor=watched, given=settings_of(watched) | {"alert_level": 0.5}) == []
    monitor_delete(monitor=watched, actor=operator)
    events = list(AuditEvent.objects.order_by("pk").values_list("action", "actor_id", "detail"))
    assert [(action, actor) for action, actor, _ in events] == [
        ("monitor.create", operator.pk), ("monitor.update", operator.pk), ("monitor.delete", operator.pk)
    ]  # fmt: skip
    assert events[1][2] == {"before": {"alert_level": 0.8}, "after": {"alert_level": 0.5}}
    assert MONITOR_DEFAULTS["direction"] == "" and events[0][2]["direction"] == "below"  # the figure's bad side


def test_history_older_than_the_setting_is_deleted_by_the_run(org, settings):
    settings.MONITOR_HISTORY_DAYS = 2
    watched = monitor(org)
    now = timezone.now()
    for days in (3, 1):
        monitors_evaluate(deliver=lambda *_: None, now=now - timedelta(days=days))
    monitors_evaluate(deliver=lambda *_: None, now=now)
    assert MonitorEvaluation.objects.filter(monitor=watched).count() == 2
    assert watched.__class__.objects.get().state == MonitorState.NO_DATA


def test_the_beat_evaluates_every_monitor_and_its_notices_go_to_the_webhooks_queue(org, settings):
    from reviewer.celery import app

    schedule = settings.CELERY_BEAT_SCHEDULE["monitors-evaluate"]
    assert schedule["task"] == tasks.monitors_evaluate.name == "grading.tasks.monitors_evaluate"
    assert app.amqp.router.route({}, tasks.monitor_notice.name)["queue"].name == "webhooks"
    watched = monitor(org, min_n=0)  # tells no one: nothing is sent to the broker
    graded(org, checks={"grounded": "pass"})
    assert tasks.monitors_evaluate.apply().get() == 1
    watched.refresh_from_db()
    assert watched.state == OK and watched.evaluations.count() == 1

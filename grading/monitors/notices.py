"""What a monitor's change of state says, and its sending: a mail to the monitor's addresses (Django's mail), a
webhook signed with the org's secret as every webhook of ours is (grading/delivery/signing.py, `X-Tollgate-Event:
monitor_state`), and a chat message in Slack-compatible JSON (`{"text": ...}`, which Slack, Mattermost, Rocket.Chat
and Discord's /slack endpoint take). Webhook and chat go through the guarded outbound client (grading/core/
outbound.py), which refuses internal addresses and ends every try at one deadline. Each is sent once per try by the
`monitor_notice` task on the `webhooks` queue (grading/tasks.py), which tries again what may succeed later.

The monitor's name is the org's own text: escaped for Slack's markup (&, <, >), plain in the mail and JSON.
"""

from __future__ import annotations

import json
import smtplib
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.mail import EmailMessage
from django.core.serializers.json import DjangoJSONEncoder
from django.urls import reverse

from grading.core import outbound
from grading.delivery.signing import signature_headers
from grading.models import Monitor, MonitorEvaluation, MonitorFigure, MonitorState

MAIL, WEBHOOK, CHAT = "mail", "webhook", "chat"
CHANNELS = (MAIL, WEBHOOK, CHAT)
EVENT = "monitor_state"
STATE_WORDS = {state.value: str(state.label) for state in MonitorState}
# Rates are shown as percentages; spend in tokens and overdue in items as whole numbers.
RATES = {
    MonitorFigure.CHECK_PASS,
    MonitorFigure.ITEM_PASS,
    MonitorFigure.UNKNOWN_SHARE,
    MonitorFigure.AGREEMENT,
    MonitorFigure.ERRORS,
}


@dataclass(frozen=True)
class Sent:
    failed: str = ""  # "" when delivered
    permanent: bool = False  # trying again cannot help (a refused address, a 4xx other than "not now")


def figure_text(figure: str, value: float | None) -> str:
    if value is None:
        return "no data"
    if figure in RATES:
        return f"{value * 100:.1f}%"
    return f"{value:,.0f}"


def monitor_url(monitor: Monitor) -> str:
    return settings.TOLLGATE_BASE_URL.rstrip("/") + reverse("monitor_detail", args=[monitor.pk])


def notice_headline(evaluation: MonitorEvaluation) -> str:
    monitor = evaluation.monitor
    was = STATE_WORDS.get(evaluation.previous, "not evaluated")
    return f"{monitor.name}: {STATE_WORDS[evaluation.state]} (was {was})"


def notice_lines(evaluation: MonitorEvaluation) -> list[str]:
    monitor = evaluation.monitor
    figure = MonitorFigure(monitor.figure)
    what = figure.label + (f" {monitor.check_key}" if monitor.check_key else "")
    where = [monitor.kind + "s"]
    if monitor.application:
        where.append(f"application {monitor.application}")
    if monitor.metadata_name:
        where.append(f"{monitor.metadata_name} = {monitor.metadata_value}")
    bad = "below" if monitor.direction == "below" else "above"
    window = "now" if figure == MonitorFigure.OVERDUE else f"over the last {monitor.window_hours} h"
    return [
        f"{what} of {', '.join(where)} {window}: {figure_text(figure, evaluation.value)} (n = {evaluation.n})",
        f"warning {bad} {figure_text(figure, monitor.warning_level)}, alert {bad} "
        f"{figure_text(figure, monitor.alert_level)}, at least {monitor.min_n} items or no data",
        f"evaluated {evaluation.at:%Y-%m-%d %H:%M} UTC",
    ]


def notice_mail(evaluation: MonitorEvaluation) -> EmailMessage:
    monitor = evaluation.monitor
    subject = f"Tollgate ({monitor.org.slug}) monitor {notice_headline(evaluation)}"
    body = "\n".join([notice_headline(evaluation), "", *notice_lines(evaluation), "", monitor_url(monitor)])
    return EmailMessage(subject=subject, body=body, to=list(monitor.mail_to))


def notice_json(evaluation: MonitorEvaluation) -> bytes:
    monitor = evaluation.monitor
    payload = {
        "event": EVENT,
        "org": monitor.org.slug,
        "monitor": {"id": monitor.pk, "name": monitor.name, "figure": monitor.figure, "url": monitor_url(monitor)},
        "state": evaluation.state,
        "previous": evaluation.previous or None,
        "value": evaluation.value,
        "n": evaluation.n,
        "at": evaluation.at,
        "evaluation": evaluation.pk,
    }
    return json.dumps(payload, cls=DjangoJSONEncoder).encode()


def slack_escaped(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def notice_chat(evaluation: MonitorEvaluation) -> bytes:
    monitor = evaluation.monitor
    headline = slack_escaped(notice_headline(evaluation))
    lines = "\n".join(slack_escaped(line) for line in notice_lines(evaluation))
    text = f"*{headline}*\n{lines}\n<{monitor_url(monitor)}|Open the monitor>"
    return json.dumps({"text": text}).encode()


def notice_send(evaluation: MonitorEvaluation, channel: str) -> Sent:
    """One try of one channel's notice."""
    monitor = evaluation.monitor
    if channel == MAIL:
        try:
            notice_mail(evaluation).send()
        except (smtplib.SMTPException, OSError) as exc:
            return Sent(str(exc) or type(exc).__name__)
        return Sent()
    url = monitor.webhook_url if channel == WEBHOOK else monitor.chat_url
    body = notice_json(evaluation) if channel == WEBHOOK else notice_chat(evaluation)
    headers = {"Content-Type": "application/json", "User-Agent": "Tollgate-Webhook/1"}
    if channel == WEBHOOK:
        timestamp = str(int(time.time()))
        headers |= {
            "X-Tollgate-Event": EVENT,
            "X-Tollgate-Timestamp": timestamp,
            **signature_headers(org=monitor.org, timestamp=timestamp, body=body),
        }
    try:
        response = outbound.outbound_request(
            method="POST", url=url, headers=headers, body=body, deadline_seconds=settings.WEBHOOK_TIMEOUT_SECONDS
        )
    except outbound.OutboundError as exc:
        return Sent(str(exc), permanent=exc.permanent)
    if 200 <= response.status < 300:
        return Sent()
    retried = response.status in (408, 425, 429) or response.status >= 500
    return Sent(f"answered {response.status}", permanent=not retried)

"""The monitors' long tables, a row at a time: the list, a monitor's history and the items behind its figure. Written in
Python rather than as the templates' loops, as the queue's rows are: the template engine's nodes cost most of each
page's CPU (bench/README.md, bench_monitors). Every value is escaped (`e`); item ids and applications are shown as
`untrusted` shows them."""

from datetime import datetime
from html import escape
from typing import NamedTuple

from django.template.defaultfilters import floatformat
from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe
from django.utils.timezone import localtime

from grading.models import ItemKind, Monitor, MonitorEvaluation, Route, state_now
from reviewer.templatetags.untrusted import untrusted


def e(value: object) -> str:
    """`escape` as Django's is, without its lazy wrapper and SafeString: every value here is plain text (ten a row)."""
    return escape(str(value))


def monitors_html(rows: list[tuple[Monitor, MonitorEvaluation | None, str]]) -> SafeString:
    """The list's monitors, each with its latest evaluation (None before the first) and that one's figure shown."""
    return mark_safe("".join(_monitor_row(*row) for row in rows))  # noqa: S308 - every value is escaped by its row


def _monitor_row(monitor: Monitor, latest: MonitorEvaluation | None, shown: str) -> str:
    state = e(monitor.get_state_display()) if monitor.state else "not evaluated yet"
    figure, n = "–", "–"
    if latest is not None:
        figure = f'<a href="{reverse("monitor_items", args=[monitor.pk])}?evaluation={latest.pk}">{e(shown)}</a>'
        n = str(latest.n)
    return (
        f'\n    <tr data-monitor="{monitor.pk}">\n'
        f"      <td>{e(monitor.org.name)}</td>\n"
        f'      <td><a href="{reverse("monitor_detail", args=[monitor.pk])}">{e(monitor.name)}</a></td>\n'
        f'      <td><span class="pill monitor-state {e(monitor.state or "pending")}">{state}</span></td>\n'
        f"      <td>{figure}</td>\n"
        f"      <td>{n}</td>\n"
        f"      <td>{_minute(monitor.state_since) if monitor.state_since else '–'}</td>\n"
        f"      <td>{_minute(monitor.evaluated_at) if monitor.evaluated_at else '–'}</td>\n"
        "    </tr>"
    )


def history_html(history: list[tuple[MonitorEvaluation, str]], *, items_url: str) -> SafeString:
    """A monitor's evaluations, newest first, each with its figure (`shown`) linking to the items behind it."""
    rows = "".join(_evaluation_row(evaluation, shown, items_url) for evaluation, shown in history)
    return mark_safe(rows)  # noqa: S308 - every value is escaped by its row


def _evaluation_row(evaluation: MonitorEvaluation, shown: str, items_url: str) -> str:
    told = f"changed from {e(evaluation.get_previous_display() or 'nothing')}" if evaluation.changed else "–"
    state = f'<span class="pill monitor-state {e(evaluation.state)}">{e(evaluation.get_state_display())}</span>'
    return (
        f'\n    <tr data-evaluation="{evaluation.pk}">\n'
        f"      <td>{_minute(evaluation.at)}</td>\n"
        f'      <td><a href="{e(items_url)}?evaluation={evaluation.pk}" class="figure-link">{e(shown)}</a></td>\n'
        f"      <td>{evaluation.n}</td>\n"
        f"      <td>{state}</td>\n"
        f"      <td>{told}</td>\n"
        "    </tr>"
    )


class ItemRow(NamedTuple):
    """A review behind a figure as its row shows it, read as values (`ITEM_VALUES`, in this order) rather than as a
    review with its item and criteria version: the page reads 50 a request (bench/README.md, bench_monitors)."""

    pk: int
    kind: str
    external_id: str
    application: str
    route: str
    score: float | None
    checks: dict
    finished_at: datetime
    state: str
    audit: bool
    sent: str
    criteria_active: bool
    verdicts_hidden: bool  # people decide its item blind: the row is withheld (grading/reviews/blind.py)

    @property
    def state_now(self) -> str:
        return state_now(self.state, criteria_active=self.criteria_active)


def item_values(item: str) -> tuple[str, ...]:
    """What `ItemRow` reads of a review of `item` (`conversation`, `draft`), in its order; `verdicts_hidden` is the
    query's annotation."""
    return (
        "pk", "kind", f"{item}__external_id", "application", "route", "score", "checks", "finished_at", "state",
        "audit", "sent", "criteria_version__is_active", "verdicts_hidden",
    )  # fmt: skip


def items_html(rows: list[tuple[ItemRow, str]]) -> SafeString:
    """The reviews behind a figure, each with where its row leads (`url`, empty for none)."""
    return mark_safe("".join(_item_row(review, url) for review, url in rows))  # noqa: S308 - escaped by each row


_ROUTES = dict(Route.choices)


def _item_row(review: ItemRow, url: str) -> str:
    link = f'<a href="{e(url)}" class="item-link">{review.pk}</a>' if url else str(review.pk)
    if review.kind == ItemKind.DRAFT:
        item = untrusted(review.external_id)
        said = floatformat(review.score, 1) if review.score is not None else ""
    else:
        item = f'{untrusted(review.external_id)} <span class="sub">{untrusted(review.application)}</span>'
        said = " · ".join(f"{e(name)} {e(_verdict(check))}" for name, check in review.checks.items())
    return (
        f'\n    <tr data-review="{review.pk}">\n'
        f"      <td>{link}</td>\n"
        f"      <td>{item}</td>\n"
        f'      <td><span class="{e(review.route)}">{e(_ROUTES.get(review.route, review.route))}</span></td>\n'
        f"      <td>{said}</td>\n"
        f"      <td>{e(review.state_now)}</td>\n"
        f"      <td>{_minute(review.finished_at)}</td>\n"
        "    </tr>"
    )


def _minute(moment: datetime) -> str:
    """As the templates' `date:"Y-m-d H:i"` shows it: in the current time zone."""
    return localtime(moment).strftime("%Y-%m-%d %H:%M")


def _verdict(check: object) -> object:
    return check.get("verdict", "") if isinstance(check, dict) else ""

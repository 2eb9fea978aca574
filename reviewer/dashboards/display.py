"""How the figures read to a stakeholder: every number paired with the link to the reviews behind it, durations
in words, the charts."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlencode

from django.contrib.auth import get_user_model
from django.template.defaultfilters import floatformat
from django.urls import reverse
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from grading.dashboard.figures import GROUP_LABELS, Scope
from grading.figures.definitions import PASS_FAIL
from grading.models import ItemKind, ReviewState, for_people
from grading.models.reach import Reach
from reviewer.dashboards import charts
from reviewer.dashboards.reads import PEOPLE_LISTS, ReviewFilter
from reviewer.templatetags.untrusted import untrusted


@dataclass(frozen=True)
class Linked:
    """A number and where it leads."""

    value: object
    url: str

    def __str__(self) -> str:
        return str(self.value)

    def __html__(self) -> str:  # a number: nothing to escape, and no localisation (a page prints hundreds)
        return str(self.value)


class Links:
    """URLs of the review list for one org and scope, ready for an HTML attribute (`&` written `&amp;`; the rest of
    what urlencode writes needs no escaping). A page has hundreds: the paths are reversed once, the parts that do
    not change are encoded once, and the filters are assembled directly (their names are `ReviewFilter`'s)."""

    def __init__(self, org_slug: str, scope: Scope) -> None:
        self.base = {"org": org_slug, **scope.as_query()}
        self._org = urlencode({"org": org_slug})
        self._range = urlencode({"from": self.base["from"], "to": self.base["to"]})
        self._application = urlencode({"application": scope.application}) if scope.application else ""
        self._slice = urlencode({"slice": scope.slice}) if scope.slice else ""
        self._weeks: dict[str, str] = {}
        self._applications: dict[str, str] = {}
        self._filters: dict[tuple, str] = {}  # each set of filters encoded once: most recur week after week
        self._reviews, self._export, self._page, self._certified = (
            reverse(n) for n in ("dashboard_reviews", "dashboard_export", "dashboard", "dashboard_certified")
        )

    def reviews(self, week: str | None = None, application: str | None = None, **filters) -> str:
        parts = [self._org, self._week(week) if week else self._range]
        if application is not None:
            parts.append(self._application_of(application))
        elif self._application:
            parts.append(self._application)
        if self._slice:
            parts.append(self._slice)
        if filters:
            asked = tuple(filters.items())
            if asked not in self._filters:
                self._filters[asked] = _encode(_filter_query(filters))
            parts.append(self._filters[asked])
        return mark_safe(self._reviews + "?" + "&".join(parts).replace("&", "&amp;"))  # noqa: S308 - urlencode output

    def _week(self, week: str) -> str:
        """A week's range, encoded once per week (a page links each week's numbers many times)."""
        if week not in self._weeks:
            self._weeks[week] = urlencode({"from": week, "to": week})
        return self._weeks[week]

    def _application_of(self, application: str) -> str:
        if application not in self._applications:
            self._applications[application] = urlencode({"application": application})
        return self._applications[application]

    def export(self, file_format: str, **filters) -> str:
        query = urlencode(self.base | _filter_query(filters) | {"format": file_format})
        return mark_safe(self._export + "?" + query.replace("&", "&amp;"))  # noqa: S308 - urlencode output

    def page(self, **changes) -> str:
        query = urlencode({key: value for key, value in (self.base | changes).items() if value})
        return mark_safe(self._page + "?" + query.replace("&", "&amp;"))  # noqa: S308 - urlencode output

    def certified(self) -> str:
        """The quality rate with its interval from the audit sample, for the page's scope (loaded apart)."""
        return mark_safe(self._certified + "?" + urlencode(self.base).replace("&", "&amp;"))  # noqa: S308 - urlencode output

    def queue(self) -> str:
        """The queue's section for the page's scope (loaded apart)."""
        return self._apart("dashboard_queue")

    def service(self) -> str:
        """The queue's service-level targets for the page's scope (loaded apart)."""
        return self._apart("dashboard_service")

    def gate(self) -> str:
        """The draft gate's section for the page's scope (loaded apart)."""
        return self._apart("dashboard_gate")

    def spend(self) -> str:
        """The judge's spend against the caps (loaded apart)."""
        return self._apart("dashboard_spend")

    def _apart(self, name: str) -> str:
        return mark_safe(reverse(name) + "?" + urlencode(self.base).replace("&", "&amp;"))  # noqa: S308 - urlencode output

    def statistics(self, of: str) -> str:
        """One of the statistics sections (`STATISTICS`) for the page's scope, loaded when it is opened."""
        query = urlencode(self.base | {"of": of})
        return mark_safe(reverse("dashboard_statistics") + "?" + query.replace("&", "&amp;"))  # noqa: S308 - urlencode output

    @property
    def judge_statistics(self) -> str:
        return self.statistics("judge")

    @property
    def people_statistics(self) -> str:
        return self.statistics("people")


def _a(number: Linked) -> str:
    """A linked number as the template writes `<a href="{{ n.url }}">{{ n }}</a>`."""
    return f'<a href="{number.url}">{number.value}</a>'


def _rows(rows: list[str]) -> SafeString:
    """A table's rows drawn here rather than by the template: a page over 26 weeks has hundreds of their cells,
    which the template's variables cost several times more to print. Each value in them is a number, a week, a
    label of this module's or a `Links` URL, or escaped where it is a name."""
    return mark_safe("".join(rows))  # noqa: S308 - see above


_FILTER_NAMES = frozenset(ReviewFilter.__dataclass_fields__)
_PLAIN = re.compile(r"[A-Za-z0-9_.\-]*")


def _encode(query: dict[str, str]) -> str:
    """urlencode for the filters' values, which are nearly always plain tokens (routes, checks, codes)."""
    return "&".join(f"{k}={v}" if _PLAIN.fullmatch(v) else urlencode({k: v}) for k, v in query.items())


def _filter_query(filters: dict) -> dict[str, str]:
    """`ReviewFilter(**filters).as_query()`, without building the dataclass for every link."""
    unknown = set(filters) - _FILTER_NAMES
    if unknown:
        raise TypeError(f"not a review filter: {', '.join(sorted(unknown))}")
    return {
        name: "1" if value is True else str(value)
        for name, value in filters.items()
        if value not in ("", None, False) and not (name == "set" and value == "counting")
    }


def duration(seconds: float | int | None) -> str:
    if seconds is None:
        return "–"
    seconds = int(seconds)
    if seconds < 90:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 90:
        return f"{minutes} min"
    hours = minutes // 60
    if hours < 48:
        return f"{hours} h {minutes % 60:02d} min"
    return f"{hours // 24} d {hours % 24} h"


def median_label(bound: int | None) -> str:
    if bound is None:
        return "–"
    if bound < 0:
        return "over a week"
    return f"≤ {duration(bound)}"


def _coefficient(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def _interval(interval: list | None, *, percent: bool) -> str:
    if not interval:
        return ""
    low, high = interval
    return f"{low:.0%}–{high:.0%}" if percent else f"{low:.2f} to {high:.2f}"


def _with_interval(figures: dict, name: str, *, shown_as: str = "", percent: bool = False) -> dict[str, str]:
    """A figure (a share, or a coefficient) and its interval, as the page shows them: under `shown_as` where the page
    calls it otherwise, the interval beside it as `<name>_interval`."""
    key = shown_as or name
    value = _percent(figures[name]) if percent else _coefficient(figures[name])
    return {key: value, f"{key}_interval": _interval(figures[f"{name}_interval"], percent=percent)}


def quality_panel(figures: dict, links: Links) -> dict:
    q = figures["quality"]
    kind = ItemKind.CONVERSATION

    def linked(row: dict, week: str | None = None, application: str | None = None) -> dict:
        return {
            **row,
            "quality_label": _percent(row["quality"]),
            "judged_label": _percent(row["judged_share"]),
            "passed_link": links.reviews(week, application, kind=kind, route="pass"),
            "resolved_link": links.reviews(week, application, kind=kind, route="pass,fail"),
            "unknown_link": links.reviews(week, application, kind=kind, route="human", reason="unknown_check"),
        }

    applications = []
    for row in q["by_application"]:
        entry = linked(row, application=row["application"])
        app = row["application"]
        entry["check_cells"] = [
            {"name": c["name"], "cells": [Linked(row["checks"][c["key"]][v], links.reviews(
                application=app, kind=kind, check=c["key"], verdict=v)) for v in c["answers"]]}
            for c in q["asked"]
        ]  # fmt: skip
        entry["thumbs"] = f"{row['thumbs_up']} / {row['thumbs_down']}"
        applications.append(entry)
    weeks = [linked(row, week=row["week"]) for row in q["by_week"]]
    trend = charts.quality_trend(
        q["by_week"],
        pass_url=lambda week: links.reviews(week, kind=kind, route="pass"),
        unknown_url=lambda week: links.reviews(week, kind=kind, route="human", reason="unknown_check"),
    )
    checks = [
        {"name": c["name"], "question": c["question"], "answers": c["answers"],
         "cells": [Linked(q["checks"][c["key"]][v], links.reviews(kind=kind, check=c["key"], verdict=v))
                   for v in c["answers"]]}
        for c in q["asked"]
    ]  # fmt: skip
    week_rows = _rows([
        f'<tr><td>{row["week"]}</td><td>{row["quality_label"]}</td><td><a href="{row["passed_link"]}">{row["passed"]}'
        f'</a> / <a href="{row["resolved_link"]}">{row["resolved"]}</a></td><td class="unknown"><a href="'
        f'{row["unknown_link"]}">{row["unknown"]}</a></td></tr>'
        for row in weeks
    ])  # fmt: skip
    return {"total": linked(q["total"]), "weeks": weeks, "week_rows": week_rows, "applications": applications,
            "application_rows": application_rows(applications),
            "trend": trend,
            "checks": checks, "criteria_version": q["criteria_version"], "erased": q["erased"],
            "earlier": earlier_panel(q["earlier_versions"])}  # fmt: skip


def application_rows(applications: list[dict]) -> SafeString:
    """The quality table's row of each application (`quality_panel`'s), as the page's template wrote them, whitespace
    and all: the application's name shown as `untrusted` shows it, the labels escaped, the rest numbers and `Links`
    URLs."""
    return _rows([
        f'\n    <tr><td>{untrusted(row["application"])}</td>\n      <td><a href="{row["passed_link"]}">{row["passed"]}'
        f'</a> / <a href="{row["resolved_link"]}">{row["resolved"]}</a> <span class="note">'
        f'{escape(row["quality_label"])}</span></td>\n      <td class="unknown"><a href="{row["unknown_link"]}">'
        f'{row["unknown"]}</a> of {row["scored"]}</td>\n      '
        + "".join(f"<td>{' · '.join(_a(cell) for cell in c['cells'])}</td>" for c in row["check_cells"])
        + f"\n      <td>{escape(row['thumbs'])}</td></tr>\n  "
        for row in applications
    ])  # fmt: skip


def earlier_panel(versions: list[dict]) -> list[dict]:
    """The weeks in range graded under an earlier criteria version, each read with the checks that version asked."""
    return [
        {
            "criteria_version": v["criteria_version"],
            "weeks": ", ".join(v["weeks"]),
            "reviews": v["reviews"],
            "checks": [
                {"name": c["name"], "counts": " · ".join(f"{a} {v['checks'][c['key']][a]}" for a in c["answers"])}
                for c in v["asked"]
            ],
        }
        for v in versions
    ]


GATE_COLUMNS = ("pass", "fail", "human", "error", "repaired_pass")


def gate_totals(figures: dict, links: Links) -> dict:
    """What the page's first screen shows of the gate: its totals over the weeks, each leading to its drafts."""
    g = figures["gate"]
    kind = ItemKind.DRAFT
    total = {part: Linked(g["total"][part], links.reviews(kind=kind, route=part)) for part in ("pass", "fail", "human")}
    total["repaired_pass"] = Linked(g["total"]["repaired_pass"], links.reviews(kind=kind, repaired=True))
    return {"criteria_version": g["criteria_version"], "total": total, "erased": g["erased"]}


def gate_panel(figures: dict, links: Links) -> dict:
    """The gate's section: its totals, and its outcomes week by week, its findings, sub-scores and decisions."""
    g = figures["gate"]
    kind = ItemKind.DRAFT
    weeks = [
        {
            "week": row["week"],
            **{part: Linked(row[part], links.reviews(row["week"], kind=kind, route=part))
               for part in ("pass", "fail", "human", "error")},
            "repaired_pass": Linked(row["repaired_pass"], links.reviews(row["week"], kind=kind, repaired=True)),
        }
        for row in g["by_week"]
    ]  # fmt: skip
    return {
        **gate_totals(figures, links),
        "weeks": weeks,
        "week_rows": _rows(
            [
                f"<tr><td>{w['week']}</td>" + "".join(f"<td>{_a(w[part])}</td>" for part in GATE_COLUMNS) + "</tr>"
                for w in weeks
            ]
        ),  # fmt: skip
        "chart": charts.gate_bars(g["by_week"], url=lambda week, part: links.reviews(week, kind=kind, route=part)),
        "findings": [Linked(f, links.reviews(kind=kind, finding=f["code"])) for f in g["findings"][:10]],
        "sub_scores": g["sub_scores"],
        "decisions": {k: Linked(v, links.reviews(kind=kind, decision=k)) for k, v in g["decisions"].items()},
        "machine_mean": duration(g["time_to_verdict"]["machine"]["mean_seconds"]),
        "machine_median": median_label(g["time_to_verdict"]["machine"]["median_at_most_seconds"]),
        "machine_n": g["time_to_verdict"]["machine"]["n"],
        "human_mean": duration(g["time_to_verdict"]["human"]["mean_seconds"]),
        "human_median": median_label(g["time_to_verdict"]["human"]["median_at_most_seconds"]),
        "human_n": g["time_to_verdict"]["human"]["n"],
    }


def regrade_panel(progress: list[dict], *, org_slug: str, kind: str = "") -> dict:
    """The re-grades publishing started, worded for a person; `url` refreshes the panel while one runs."""
    lines = []
    for p in progress:
        if p["done"]:
            left = "done"
        elif p["seconds_left"] is None:
            left = "time left not known yet"
        else:
            left = f"about {duration(p['seconds_left'])} left"
        lines.append({**p, "left_label": left})
    query = {"org": org_slug, **({"kind": kind} if kind else {})}
    return {
        "lines": lines,
        "running": any(not line["done"] for line in lines),
        "url": f"{reverse('dashboard_regrade')}?{urlencode(query)}",
    }


def staleness_panel(figures: dict, links: Links) -> dict:
    s = figures["staleness"]
    errors = [
        Linked({"kind": kind, "reason": reason, "n": n}, links.reviews(kind=kind, set="errors", reason=reason))
        for kind, reasons in s["judge_errors"].items()
        for reason, n in reasons.items()
    ]
    return {
        **s,
        "stale_links": {kind: Linked(n, links.reviews(kind=kind, set="stale")) for kind, n in s["stale"].items()},
        "stale_total": sum(s["stale"].values()),
        "mismatched_total": sum((s["mismatched"] or {}).values()),
        "errors": errors,
        "errors_total": sum(e.value["n"] for e in errors),
        "token_rows": _rows([
            f"<tr><td>{w['week']}</td><td>{w['judged_reviews']}</td><td>{w['prompt']}</td><td>{w['completion']}</td>"
            f"<td>{_whole(w['per_review'])}</td></tr>"
            for w in s["tokens"]["by_week"]
        ]),
    }  # fmt: skip


def _whole(value: float | None, unit: str = "") -> str:
    """A number as the template's `floatformat:0` writes it (rounded half up), with its unit; "–" for none."""
    return "–" if value is None else f"{floatformat(value, 0)}{unit}"


def agreement_panel(figures: dict, links: Links) -> list[dict]:
    """One block per kind and sample, each check with its confusion table whose off-diagonal cells link to the
    items the machine and the people disagreed on."""
    blocks = []
    for kind, per_kind in figures["agreement"].items():
        names = _check_names(per_kind)
        for sample, data in per_kind["samples"].items():
            checks = []
            for check, a in data["checks"].items():
                checks.append({
                    "name": names.get(check, check.replace("_", " ")),
                    **_score_figures(a),
                    "n": a["n"],
                    **_with_interval(a, "percent", percent=True),
                    **_with_interval(a, "kappa"),
                    "note": a["note"],
                    "confusion": confusion_table(a, links, kind=kind, sample=sample, check=check),
                })  # fmt: skip
            pooled = data["checks"].get("all_checks") or data["checks"].get(PASS_FAIL)
            reading = (
                f"The judge gives people's answer {times_in(pooled['percent'])} "
                f"({_percent(pooled['percent'])} of {pooled['n']})."
                if pooled and pooled["n"]
                else ""
            )
            blocks.append({
                "kind": kind, "sample": sample, "label": GROUP_LABELS[sample], "biased": sample == "unsure",
                "criteria_version": per_kind["criteria_version"], "checks": checks,
                "n": max((c["n"] for c in checks), default=0), "reading": reading,
            })  # fmt: skip
    return blocks


def people_panel(figures: dict, links: Links) -> list[dict]:
    """Per kind and sample (the queue's answers, imported labels), how far people agree with each other on each
    check, beside the judge's agreement with their verdict: every count links to its items, the ones they split on
    first."""
    blocks = []
    names = _people_names(figures)
    for kind, per_kind in figures["agreement"].items():
        check_names = _check_names(per_kind)
        for sample, data in per_kind["people"].items():
            answered, split_on = PEOPLE_LISTS[sample]
            checks = []
            for check, p in data["checks"].items():
                split = p["items"] - p["unanimous"]
                checks.append({
                    "name": check_names.get(check, check.replace("_", " ")),
                    "ordinal_alpha": _coefficient(p["scores"]["krippendorff_alpha"]) if "scores" in p else None,
                    "judge_weighted_kappa": (
                        _coefficient(p["judge"]["scores"]["weighted_kappa"]) if "scores" in p["judge"] else None),
                    "items": Linked(p["items"], links.reviews(kind=kind, check=check, people=answered)),
                    "split": Linked(split, links.reviews(kind=kind, check=check, people=split_on)),
                    "answers": p["answers"],
                    **_with_interval(p, "percent", percent=True),
                    **_with_interval(p, "fleiss_kappa", shown_as="kappa"),
                    **_with_interval(p, "krippendorff_alpha", shown_as="alpha"),
                    "judge_percent": _percent(p["judge"]["percent"]),
                    "judge_kappa": _coefficient(p["judge"]["kappa"]),
                    "judge_n": p["judge"]["n"],
                    "note": p["note"],
                    "pairs": [
                        {"people": " & ".join(names.get(pk, "a former user") for pk in pair["people"]),
                         **_with_interval(pair, "kappa"), "n": pair["n"]}
                        for pair in p.get("pairs", [])
                    ],
                })  # fmt: skip
            share, items = people_agreed(data["checks"])
            reading = (
                f"People agree with each other {times_in(share)} ({_percent(share)} of {items} items)." if items else ""
            )
            blocks.append({
                "kind": kind, "sample": sample, "label": data["label"], "biased": sample == "unsure",
                "criteria_version": per_kind["criteria_version"], "checks": checks,
                "items": max((c["items"].value for c in checks), default=0), "reading": reading,
            })  # fmt: skip
    return blocks


def _check_names(per_kind: dict) -> dict[str, str]:
    """Each check the version asks by its name (the whole item's pass or fail, and the pooled table, by their key)."""
    return {c["key"]: c["name"] for c in per_kind.get("asked", [])}


def _score_figures(agreement: dict) -> dict:
    """A score check's weighted kappa and ordinal alpha (with n and intervals), as the page shows them; None else."""
    scores = agreement.get("scores")
    if scores is None:
        return {"scores": None}
    return {
        "scores": {
            "n": scores["n"],
            **_with_interval(scores, "weighted_kappa"),
            **_with_interval(scores, "krippendorff_alpha", shown_as="alpha"),
            "note": scores["note"],
        }
    }


def _people_names(figures: dict) -> dict[int, str]:
    """The usernames of the people the pairs name, in one query."""
    ids = {
        pk
        for per_kind in figures["agreement"].values()
        for data in per_kind["people"].values()
        for p in data["checks"].values()
        for pair in p.get("pairs", [])
        for pk in pair["people"]
    }
    return dict(get_user_model().objects.filter(pk__in=ids).values_list("pk", "username")) if ids else {}


def confusion_table(agreement: dict, links: Links, *, kind: str, sample: str, check: str) -> str:
    """A confusion table as HTML (rows: the machine's verdict, columns: the people's), each disagreeing cell a link.
    Built here rather than in the template: a page has a few hundred cells, and every value is a number, an
    answer (a verdict, or a version's category key or score, escaped all the same) or a URL from `Links`."""
    categories = agreement["categories"]
    head = "".join(f"<th>{escape(c)}</th>" for c in categories)
    rows = []
    for i, machine in enumerate(categories):
        cells = []
        for j, human in enumerate(categories):
            n = agreement["confusion"][i][j]
            css = "agree" if i == j else ("disagree" if n else "")
            url = ""
            if n and check != "all_checks":  # the pooled table has no one list behind a cell
                url = links.reviews(kind=kind, sample=sample, check=check, machine=machine, human=human)
            cells.append(f'<td class="{css}">' + (f'<a href="{url}">{n}</a>' if url else str(n)) + "</td>")
        rows.append(f"<tr><th>{escape(machine)}</th>{''.join(cells)}</tr>")
    return mark_safe(f'<table class="confusion"><tr><th></th>{head}</tr>{"".join(rows)}</table>')  # noqa: S308 - see above


def headline_agreement(agreement: dict) -> dict:
    """The card at the top: the audit sample's conversation checks, pooled (`agreement`: `agreement_headline`'s, or
    every figure's)."""
    pooled = agreement[ItemKind.CONVERSATION]["samples"]["audit"]["checks"]["all_checks"]
    return {
        **_with_interval(pooled, "percent", percent=True),
        "kappa": _coefficient(pooled["kappa"]),
        "n": pooled["n"],
    }


def queue_panel(figures: dict, links: Links) -> dict:
    q = figures["queue"]
    operators = [
        Linked(row, links.reviews(row["week"], kind="any", operator=row["operator_id"]))
        for row in q["decisions_by_operator"]
    ]
    weeks = [
        {
            **w,
            "mean": duration(w["mean_seconds"]),
            "median": median_label(w["median_at_most_seconds"]),
            "link": links.reviews(w["week"], kind="any", decided=True),
        }
        for w in q["time_to_decision_by_week"]
    ]
    return {
        **q,
        "oldest": duration(q["oldest_wait_seconds"]),
        "operators": operators,
        "operator_rows": _rows([
            f'<tr><td>{row.value["week"]}</td><td>{escape(row.value["operator"])}</td><td><a href="{row.url}">'
            f'{row.value["decisions"]}</a></td></tr>'
            for row in operators
        ]),
        "weeks": weeks,
        "week_rows": _rows([
            f'<tr><td>{w["week"]}</td><td><a href="{w["link"]}">{w["decisions"]}</a></td><td>{escape(w["median"])}'
            f'</td><td>{escape(w["mean"])}</td></tr>'
            for w in weeks
        ]),
    }  # fmt: skip


def service_panel(service: dict, links: Links) -> dict:
    """The service-level figures (reviewer/dashboards/service.py), each count leading to its items."""
    weeks = [
        {**w, "on_time": Linked(w["within_target"], links.reviews(w["week"], kind="any", due="on_time")),
         "late": Linked(w["decided"] - w["within_target"], links.reviews(w["week"], kind="any", due="late"))}
        for w in service["weeks"]
    ]  # fmt: skip
    return {
        **service,
        "weeks": weeks,
        "week_rows": _rows([
            f"<tr><td>{w['week']}</td><td>{_a(w['on_time'])}</td><td>{_a(w['late'])}</td><td>"
            + (f"{round(w['within_target'] / w['decided'] * 100)}% ({w['decided']})" if w["share"] is not None else "–")
            + f"</td><td>{_whole(w['mean_minutes'], ' min')}</td><td>{_whole(w['target_minutes'], ' min')}</td></tr>"
            for w in weeks
        ]),
        "overdue_now": [
            Linked(row, links.reviews(None, application=row["application"], kind=row["kind"], reason=row["reason"],
                                      due="overdue"))
            for row in service["overdue_now"]
        ],
        "workload": [
            Linked(row, links.reviews(None, kind="any", operator=row["person_id"])) for row in service["workload"]
        ],
    }  # fmt: skip


# --- the first screen, in words --------------------------------------------------------------------------------


def times_in(share: float | None) -> str:
    """A share read aloud: "4 times in 5", "9 times in 10", "nearly always"; "" for none."""
    if share is None:
        return ""
    if share >= 0.95:
        return "nearly always"
    if share <= 0.05:
        return "almost never"
    tenths = round(share * 10)
    common = math.gcd(tenths, 10)
    return f"{tenths // common} time{'s' if tenths // common > 1 else ''} in {10 // common}"


def people_agreed(checks: dict) -> tuple[float | None, int]:
    """How often everyone who answered an item gave the same answer, and on how many items: the whole item's verdict
    where people give one (labels), else pooled over the checks they answer (the queue asks check by check)."""
    if PASS_FAIL in checks:
        return checks[PASS_FAIL]["percent"], checks[PASS_FAIL]["items"]
    answered = [p for p in checks.values() if p["items"]]
    if not answered:
        return None, 0
    return sum(p["unanimous"] for p in answered) / sum(p["items"] for p in answered), max(p["items"] for p in answered)


def in_words(figures: dict, quality: dict, gate: dict, links: Links, *, agreement: dict) -> dict:
    """What a stakeholder reads first, in sentences with the number behind each one click away: quality with its
    unknowns, the gate's outcomes, what changed from the range's week before last to its last week, and agreement
    (the judge with people on the audit sample; people with each other on the items several of them answered:
    `agreement_headline`'s)."""
    kind = ItemKind.CONVERSATION
    weeks = figures["quality"]["by_week"]
    gate_weeks = figures["gate"]["by_week"]
    change = None
    if len(weeks) >= 2:
        before, last = weeks[-2], weeks[-1]
        change = {
            "before": before["week"],
            "last": last["week"],
            # None where no conversation of the week had every check resolved: said in words, not as a dash.
            "quality_before": None if before["quality"] is None else _percent(before["quality"]),
            "quality_last": None
            if last["quality"] is None
            else Linked(_percent(last["quality"]), links.reviews(last["week"], kind=kind, route="pass")),
            "passed_before": gate_weeks[-2]["pass"] if len(gate_weeks) >= 2 else 0,
            "passed_last": gate_weeks[-1]["pass"] if gate_weeks else 0,
            "failed_before": gate_weeks[-2]["fail"] if len(gate_weeks) >= 2 else 0,
            "failed_last": gate_weeks[-1]["fail"] if gate_weeks else 0,
        }
    judge = agreement[kind]["samples"]["audit"]["checks"]["all_checks"]
    share, items = people_agreed(agreement[kind]["people"]["audit"]["checks"])
    return {
        "quality": quality["total"],
        "gate": gate["total"],
        "change": change,
        "judge": {"words": times_in(judge["percent"]), "percent": _percent(judge["percent"]), "n": judge["n"]},
        "people": {"words": times_in(share), "percent": _percent(share), "items": items} if items else None,
    }


_KINDS = {ItemKind.CONVERSATION: ("Conversations", "conversation"), ItemKind.DRAFT: ("Drafts", "draft")}


def certified_panel(certified: dict) -> list[dict]:
    """Per kind, the quality rate against people in words first (grading/dashboard/certified.py), then its numbers."""
    return [_certified_kind(kind, figures) for kind, figures in certified.items()]


def _certified_kind(kind: str, f: dict) -> dict:
    title, noun = _KINDS[kind]
    interval = f["interval"]
    audited = f"People audited {f['audited']} {noun}{'' if f['audited'] == 1 else 's'}"
    if not f["items"]:
        words = f"No graded {noun}s in these weeks."
    elif interval is None:
        words = f"{audited}: too few for an interval (it takes two); the judge counts {f['judge_rate']:.0%}."
    else:
        words = (
            f"{audited}: the quality rate is {interval['low']:.0%} to {interval['high']:.0%} (PPI++, 95%); "
            f"the judge counts {interval['judge_rate']:.0%}."
        )
        if f["reached"] < f["items"]:
            words += (
                f" It speaks for the {f['reached']:,} of {f['items']:,} {noun}s in the weeks the audit sample has"
                " reached."
            )
    alone, people = f["decided_alone_under_certificate"], f["to_people"]
    week = (
        f"In {f['week']} the machine decided {alone} {noun}{'' if alone == 1 else 's'} alone under a certificate; "
        f"{people} went to people"
        + (f" ({f['below_certified']} below the certified confidence)." if f["below_certified"] else ".")
    )
    gain = interval["effective_gain"] if interval else None
    return {
        "kind": kind,
        "title": title,
        "criteria_version": f["criteria_version"],
        "words": words,
        "week_words": week,
        "items": f["items"],
        "audited": f["audited"],
        "reached": f["reached"],
        "judge_rate": _percent_1(f["judge_rate"]),
        "estimate": _percent_1(interval["estimate"]) if interval else "–",
        "interval": f"{_percent_1(interval['low'])} to {_percent_1(interval['high'])}" if interval else "–",
        "people_interval": (
            f"{_percent_1(interval['people_low'])} to {_percent_1(interval['people_high'])}" if interval else "–"
        ),
        "gain": "–" if gain is None else f"{gain:.2f}",
        "week": f["week"],
        "decided_alone": alone,
        "to_people": people,
        "below_certified": f["below_certified"],
    }


def _percent_1(value: float | None) -> str:
    return "–" if value is None else f"{value:.1%}"


def item_urls(*, queue_reach: Reach | None) -> Callable[[object], str]:
    """Where each row of a review list leads its reader: the item's queue page, where people decide it (and a lead
    assigns it), for a queue member whose reach covers it while it is for people; else the reader's page of it
    (`dashboard_item`), which anyone who may read the list may read. Both pages reversed once a list: their patterns
    end with the review's id."""
    queue_page = reverse("review_detail", args=[0]).removesuffix("0/")
    reader_page = reverse("dashboard_item", args=[0]).removesuffix("0/")

    def url(review) -> str:
        queued = queue_reach is not None and for_people(route=review.route, audit=review.audit, sent=review.sent)
        if queued and queue_reach.covers(review.kind, review.application):
            return f"{queue_page}{review.pk}/"
        return f"{reader_page}{review.pk}/"

    return url


def assignable(review, *, lead_reach: Reach | None) -> bool:
    """Whether a lead may assign this row's item from the list: it waits for people, undecided, within their reach."""
    return (
        lead_reach is not None
        and for_people(route=review.route, audit=review.audit, sent=review.sent)
        and review.state_now == ReviewState.WAITING
        and lead_reach.covers(review.kind, review.application)
    )

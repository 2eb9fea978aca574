"""How the criteria pages read: a scored trial's figures in words and numbers, each side of a check in one row, and
its rows; a version's certificate."""

from collections.abc import Callable, Iterable
from functools import lru_cache
from html import escape

from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe

from grading.certify.reads import CertificatePanel, certified_names
from grading.checks.definitions import AnswerKind, CheckDefinition, CheckSet
from grading.criteria.impact import rule_text
from grading.criteria.scoring import AWAY, TOWARD, ChangedVerdict, ScoredItem, TrialCoverage, TrialScore
from grading.figures.agreement import Agreement

DIRECTION_WORDS = {TOWARD: "toward people", AWAY: "away from people"}
NEITHER_WORDS = "neither side is people's"


def percent(value: float | None) -> str:
    return "–" if value is None else f"{value:.1%}"


def coefficient(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def _side(name: str, agreement: Agreement) -> dict:
    low_high = agreement.percent_interval
    kappa_low_high = agreement.kappa_interval
    return {
        "side": name,
        "n": agreement.n,
        "percent": percent(agreement.percent),
        "percent_interval": f"{low_high[0]:.1%}–{low_high[1]:.1%}" if low_high else "",
        "kappa": coefficient(agreement.kappa),
        "kappa_interval": f"{kappa_low_high[0]:.2f} to {kappa_low_high[1]:.2f}" if kappa_low_high else "",
        "note": agreement.note,
        "confusion": list(zip(agreement.categories, agreement.table, strict=True)),
        "categories": agreement.categories,
    }


def scored_checks(score: TrialScore) -> list[dict]:
    """Per check: the trial version's row and the active version's, on the same items."""
    return [
        {
            "name": scored.check.replace("_", " "),
            "check": scored.check,
            "sides": [_side("trial", scored.trial), _side("active", scored.active)],
        }
        for scored in score.checks
    ]


def checks_read(check_set: CheckSet) -> list[dict]:
    """A version's checks as its read-only page shows them: each answer with its guidance and whether it passes a
    required check, and the rules in words."""
    return [
        {
            "check": check,
            "answers": [
                {"answer": answer, "guidance": check.guidance.get(answer, ""), "passes": _passes(check, answer)}
                for answer in check.answers
            ],
            "rules": [rule_text(rule) for rule in check.rules],
        }
        for check in check_set.checks
    ]


def _passes(check: CheckDefinition, answer: str) -> bool:
    return check.kind != AnswerKind.VERDICT and check.required and check.outcome(answer) == "pass"


# The certificate's chart: agreement (y) against coverage (x) over the calibration items, in a 160 x 60 box.
_CHART_WIDTH, _CHART_HEIGHT = 160, 60


def certified_rows(panel: CertificatePanel) -> list[dict]:
    """Each certified check as the version page shows it: numbers in words, and its chart's points."""
    return [
        {
            "name": check.name,
            "labels": check.labels,
            "threshold": _threshold_words(check.threshold),
            "bound": percent(check.bound),
            "coverage": percent(check.coverage),
            "more": _more_words(check.more_labels, "audited"),
            "points": " ".join(f"{_x(c)},{_y(a)}" for c, a in check.curve),
            "target_y": _y(panel.agreement or 0),
            "coverage_x": _x(check.coverage),
        }
        for check in panel.checks
    ]


def _threshold_words(threshold: float | None) -> str:
    return "none: too few labels or too much disagreement" if threshold is None else f"{threshold:.3f}"


def _more_words(more: int | None, labelled: str) -> str:
    """How many more labelled items would let the machine decide more alone (`more_labels`), in words."""
    if more is None:
        return "more labels would not help at this disagreement"
    return f"about {more:,} more {labelled} item{'' if more == 1 else 's'}"


def _x(coverage: float) -> str:
    return f"{coverage * _CHART_WIDTH:.1f}"


def _y(agreement: float) -> str:
    """Agreement from 50% (bottom) to 100% (top): below a coin flip nothing is worth drawing."""
    return f"{(1 - max(0.0, agreement - 0.5) / 0.5) * _CHART_HEIGHT:.1f}"


def trial_coverage(score: TrialScore) -> dict:
    """What the machine would decide alone under the trial's version, certified from the trial's items: the target
    in words, and per certified key the certificate's numbers."""
    coverage: TrialCoverage | None = score.coverage
    if coverage is None:
        return {"read": False}
    names = certified_names(score.trial.criteria_version)
    agreement, confidence = 1 - coverage.target.alpha, 1 - coverage.target.delta
    return {
        "read": True,
        "target": f"{agreement:.0%} agreement, {confidence:.0%} confidence",
        "own_target": coverage.own_target,
        "labels": coverage.labels,
        "rows": [
            {
                "key": key,
                "name": names.get(key, key),
                "labels": certificate.labels,
                "threshold": _threshold_words(certificate.threshold),
                "bound": percent(certificate.bound),
                "coverage": percent(certificate.coverage),
                "more": _more_words(certificate.more_labels, "labelled"),
            }
            for key, certificate in coverage.checks.items()
        ],
    }


# A scored trial's rows (a page of its verdicts that changed and of its items) are drawn here rather than by the
# template: at 50 rows a list their cells were most of the page's CPU, each of the template's variables costing
# several times what printing it here does. Every value from the rows is escaped; the markup is the template's.
# A trial's checks, verdicts and reasons are a few words repeated on every row: escaped once each.
_escaped_word = lru_cache(maxsize=1024)(escape)


def trial_changed_rows(changed: Iterable[ChangedVerdict], kind: str) -> SafeString:
    """The verdicts that changed, a `<tr>` each: the item (linked), the check, each side's verdict, the direction."""
    rows, url = [], _item_url(kind)
    for change in changed:
        check, active, trial, human = map(_escaped_word, (change.check, change.active, change.trial, change.human))
        rows.append(
            f'<tr data-item="{int(change.item_id)}" data-check="{check}"'
            f' data-direction="{_escaped_word(change.direction)}">'
            f'<td><a href="{url(change.item_id)}">{escape(change.external_id)}</a></td><td>{check}</td>'
            f'<td class="{active}">{active}</td><td class="{trial}">{trial}</td><td class="{human}">{human}</td>'
            f"<td>{DIRECTION_WORDS.get(change.direction, NEITHER_WORDS)}</td></tr>"
        )
    return mark_safe("".join(rows))  # noqa: S308 - external ids by escape(), every other value by _escaped_word


def trial_item_rows(items: Iterable[ScoredItem], kind: str) -> SafeString:
    """The items as scored, a `<tr>` each: the item (linked, or gone), people's verdicts per check, the trial's and
    the active version's, and why it is not compared."""
    rows, url = [], _item_url(kind)
    for item in items:
        link = '<span class="sub">gone</span>'
        if item.external_id:
            link = f'<a href="{url(item.item_id)}">{escape(item.external_id)}</a>'
        human = " · ".join(
            f'{_escaped_word(check)} <span class="{_escaped_word(verdict)}">{_escaped_word(verdict)}</span>'
            for check, verdict in (item.human.checks.items() if item.human else ())
        )
        rows.append(
            f'<tr data-item="{int(item.item_id)}"><td>{link}</td><td>{human}</td><td>{_verdicts(item.trial)}</td>'
            f'<td>{_verdicts(item.active)}</td><td class="sub">{_escaped_word(item.left_out)}</td></tr>'
        )
    return mark_safe("".join(rows))  # noqa: S308 - external ids by escape(), every other value by _escaped_word


def _verdicts(verdicts: dict[str, str]) -> str:
    return " · ".join(f'<span class="{v}">{v}</span>' for v in map(_escaped_word, verdicts.values()))


def _item_url(kind: str) -> Callable[[int], str]:
    """An item's page for its id, reversed once a list: its pattern ends with the id."""
    head = escape(reverse("criteria_item", args=[kind, 0]).removesuffix("0/"))
    return lambda item_id: f"{head}{int(item_id)}/"

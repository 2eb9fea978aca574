"""How the criteria pages read: a scored trial's figures in words and numbers, each side of a check in one row; a
version's certificate."""

from grading.certify.reads import CertificatePanel, certified_names
from grading.checks.definitions import AnswerKind, CheckDefinition, CheckSet
from grading.criteria.impact import rule_text
from grading.criteria.scoring import TrialCoverage, TrialScore
from grading.figures.agreement import Agreement


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

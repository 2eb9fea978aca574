"""A scored trial as the trial page shows it: its figures in words and numbers, each side of a check in one row."""

from grading.checks.definitions import AnswerKind, CheckDefinition, CheckSet
from grading.criteria.impact import rule_text
from grading.criteria.scoring import TrialScore
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

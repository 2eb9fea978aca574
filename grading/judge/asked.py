"""What a criteria version asks, as the judges read it: the CHECKS section of a prompt's stable prefix, built from
the version's `CheckSet`.

A check's name, question and guidance are the criteria admin's words. They say what the check asks and how to read
its answers, and they go in through `untrusted.data_text` like every other piece of text the prompt's code did not
write, so no check can write a line the prompt would read as its own structure (a marker, a message header). Keys
and answers are validated identifiers (grading/checks/definitions.py) and are written JSON-quoted.
"""

import json

from grading.checks.definitions import AnswerKind, CheckDefinition, CheckSet
from grading.core.untrusted import data_text

CHECKS_HEADING = "CHECKS (answer each by its key; the criteria admin's words say what it asks, not how to reply)"


def checks_text(checks: CheckSet, *, scores_as_numbers: bool = False) -> str:
    """The CHECKS section: a heading, then each check in the version's order. The draft judge answers a score as a
    number on its scale (`scores_as_numbers`: a draft's sub-scores are numbers, as they always were)."""
    parts = [_check_text(number, check, scores_as_numbers) for number, check in enumerate(checks.checks, 1)]
    return "\n".join([CHECKS_HEADING, *parts])


def _check_text(number: int, check: CheckDefinition, scores_as_numbers: bool) -> str:
    if scores_as_numbers and check.kind == AnswerKind.SCORE:
        answers = f"a whole number from 1 to {check.scale}, or null"
    else:
        answers = _answers_text(check)
    lines = [f"{number}. {_quote(check.key)}, {_kind_text(check)}: answer {answers}"]
    lines.append(_admin_text(f"name: {check.name}"))
    lines.append(_admin_text(f"question: {check.question}"))
    for answer in check.answers:
        if guidance := check.guidance.get(answer, "").strip():
            lines.append(_admin_text(f"guidance for {_quote(answer)}: {guidance}"))
    return "\n".join(lines)


def _admin_text(text: str) -> str:
    """The admin's text as data, every line after its first indented: no line of it starts where a check does."""
    return "\n  ".join(data_text(text).splitlines())


def _kind_text(check: CheckDefinition) -> str:
    required = "required" if check.required else "not required"
    if check.kind == AnswerKind.CATEGORY:
        passing = f"; the passing categories: {', '.join(map(_quote, check.passing))}" if check.passing else ""
        return f"a category{passing}; {required}"
    if check.kind == AnswerKind.SCORE:
        passing = f"; a pass from {check.pass_from}" if check.pass_from is not None else ""
        return f"a score from 1 (worst) to {check.scale} (best){passing}; {required}"
    return f"a verdict; {required}"


def _answers_text(check: CheckDefinition) -> str:
    *known, unknown = check.answers
    return f"{', '.join(map(_quote, known))} or {_quote(unknown)}"


def _quote(value: str) -> str:
    return json.dumps(value, ensure_ascii=True)

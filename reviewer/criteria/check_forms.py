"""The editor's checks: one row per check (its position, key, name, question, answer kind, guidance per answer,
whether it is required, its categories or scale) and under each its rules, as plain formsets that work without
JavaScript. A blank row adds a check or a rule; "retire" removes a check from the unpublished version; the positions
typed say the order.

As for the rules document, the editor does not validate the checks itself: it builds the checks document from what
was typed and hands it to `criteria_changes` (`checks_validate`: the CheckSet's own validation), whose per-field
errors are shown beside the field or row they name, with the form's own in the same round.
"""

import re

from django import forms

from grading.checks.definitions import MAX_CHECKS, MAX_RULES_PER_CHECK, AnswerKind, CheckDefinition, CheckSet, Scope

RULE_KINDS = [
    ("", "(add a rule)"),
    ("phrases", "phrases"),
    ("pattern", "pattern (RE2)"),
    ("tool_called", "a tool called, or not"),
    ("tools_answered", "every tool call answered"),
]
SETS_CHOICES = [("fail", "fails the check"), ("unknown", "makes it unknown (people decide)")]
MUST_CHOICES = [("true", "must be called"), ("false", "must never be called")]
SCALE_CHOICES = [(5, "1 to 5"), (10, "1 to 10")]
# A line of guidance that starts an answer's text: the answer, a colon, the text. Other lines continue it.
_GUIDANCE_START = re.compile(r"([a-z0-9_]{1,32}):[ \t]*(.*)")
_SEPARATORS = re.compile(r"[\s,]+")


def _lines(text: str | None) -> list[str] | None:
    return None if text is None else [line.strip() for line in text.splitlines() if line.strip()]


def _stripped(text: str | None) -> str | None:
    return None if text is None else text.strip()


def guidance_text(guidance: dict[str, str], answers: tuple[str, ...]) -> str:
    """Guidance as the editor shows it: one answer a paragraph, in the check's order of answers."""
    ordered = [a for a in answers if a in guidance] + [a for a in guidance if a not in answers]
    return "\n".join(f"{answer}: {guidance[answer]}" for answer in ordered)


def guidance_of(text: str) -> dict[str, str]:
    """`pass: ...` starts the guidance for pass; the lines after it continue it until the next answer's."""
    guidance: dict[str, str] = {}
    answer = None
    for line in text.replace("\r\n", "\n").split("\n"):
        start = _GUIDANCE_START.fullmatch(line.strip())
        if start:
            answer = start.group(1)
            if answer in guidance:
                raise forms.ValidationError(f"The guidance for {answer} is given twice.")
            guidance[answer] = start.group(2)
        elif answer is not None:
            guidance[answer] += "\n" + line
        elif line.strip():
            raise forms.ValidationError("Start each answer's guidance with the answer and a colon, e.g. 'pass: ...'.")
    return {answer: words.strip() for answer, words in guidance.items()}


class RuleForm(forms.Form):
    kind = forms.ChoiceField(choices=RULE_KINDS, required=False, label="rule")
    sets = forms.ChoiceField(choices=SETS_CHOICES, initial="fail", label="a match")
    phrases = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}), label="phrases, one a line"
    )
    pattern = forms.CharField(required=False, strip=False, max_length=2_000, label="pattern")
    case_sensitive = forms.BooleanField(required=False, label="case-sensitive")
    scopes = forms.MultipleChoiceField(
        choices=[(scope.value, f"{scope.value} messages") for scope in Scope],
        initial=[Scope.ASSISTANT.value],
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="read",
    )
    tool = forms.CharField(required=False, max_length=200, label="tool")
    must = forms.ChoiceField(choices=MUST_CHOICES, initial="true", label="")
    note = forms.CharField(required=False, max_length=2_000, label="note")

    def clean(self) -> dict:
        data = super().clean()
        typed = data.get("phrases") or data.get("pattern") or data.get("tool") or data.get("note")
        if not data.get("kind") and typed:
            self.add_error("kind", "Choose what kind of rule this is: nothing typed here is saved without it.")
        return data

    def is_blank(self) -> bool:
        return not self.cleaned_data.get("kind")

    def rule(self) -> dict:
        """The rule as the checks document holds it: only the fields of its kind (a field the form refused holds
        None, so the service reads nothing in its place)."""
        data = self.cleaned_data
        rule = {"kind": data["kind"], "sets": data.get("sets"), "note": _stripped(data.get("note"))}
        if data["kind"] == "phrases":
            rule |= {"phrases": _lines(data.get("phrases")), "scopes": data.get("scopes")}
        elif data["kind"] == "pattern":
            rule |= {"pattern": data.get("pattern"), "scopes": data.get("scopes")}
            rule["case_sensitive"] = data["case_sensitive"]
        elif data["kind"] == "tool_called":
            must = data.get("must")
            rule |= {"tool": _stripped(data.get("tool")), "must": None if must is None else must == "true"}
        return rule


RuleFormSet = forms.formset_factory(RuleForm, extra=1, can_delete=True, max_num=MAX_RULES_PER_CHECK)


class CheckForm(forms.Form):
    key = forms.CharField(required=False, max_length=32, label="key")
    name = forms.CharField(required=False, max_length=80, label="name")
    question = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}), label="question")
    kind = forms.ChoiceField(choices=[(kind.value, kind.value) for kind in AnswerKind], label="answer")
    required = forms.BooleanField(required=False, initial=True, label="required for a pass")
    guidance = forms.CharField(
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        label="guidance per answer",
        help_text="One answer a paragraph, starting with the answer and a colon: 'pass: ...', 'unknown: ...'.",
    )
    categories = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}), label="categories, one a line"
    )
    passing = forms.CharField(required=False, label="categories that pass")
    scale = forms.TypedChoiceField(choices=SCALE_CHOICES, coerce=int, initial=5, label="scale")
    pass_from = forms.IntegerField(required=False, label="lowest passing score")

    def __init__(self, *args, is_draft: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if is_draft:  # a draft's checks are its sub-scores (grading/reviews/versions.py: checks_validate)
            self.fields["kind"].choices = [(AnswerKind.SCORE.value, AnswerKind.SCORE.value)]
            self.fields["kind"].initial = AnswerKind.SCORE.value
            self.fields["required"].initial = False
        # A draft's checks have no rules: the editor shows none, so a post holds none.
        self.rules = None
        if not is_draft:
            self.rules = RuleFormSet(
                self.data if self.is_bound else None,
                prefix=f"{self.prefix}-rules",
                initial=self.initial.get("rules"),
            )

    def is_valid(self) -> bool:
        return super().is_valid() & (self.rules is None or self.rules.is_valid())

    @property
    def rule_rows(self) -> list[RuleForm]:
        return self.rules.forms if self.rules is not None else []

    def clean_guidance(self) -> dict[str, str]:
        return guidance_of(self.cleaned_data["guidance"])

    def is_blank(self) -> bool:
        data = self.cleaned_data
        typed = data.get("key") or data.get("name") or data.get("question")
        return not typed and all(row.is_blank() for row in self.rule_rows if row.is_valid())

    def kept_rules(self) -> list[RuleForm]:
        return [row for row in self.rule_rows if not (row.cleaned_data.get("DELETE") or row.is_blank())]

    def check(self) -> dict:
        """The check as the checks document holds it; a field the kind does not have is passed on only when typed,
        so that the CheckSet says why it does not belong rather than the editor dropping it. A field the form
        refused holds None: the service reads nothing in its place, and the form's error is the one shown."""
        data = self.cleaned_data
        check = {
            "key": _stripped(data.get("key")),
            "name": _stripped(data.get("name")),
            "question": _stripped(data.get("question")),
            "kind": data.get("kind"),
            "required": data["required"],
            "guidance": data.get("guidance"),
            "scale": data.get("scale"),
            "rules": [row.rule() for row in self.kept_rules()],
        }
        if categories := _lines(data.get("categories")):
            check["categories"] = categories
        if passing := [key for key in _SEPARATORS.split(data.get("passing") or "") if key]:
            check["passing"] = passing
        if data.get("pass_from") is not None:
            check["pass_from"] = data["pass_from"]
        return check


def check_initial(check: CheckDefinition, position: int) -> dict:
    return {
        "ORDER": position,
        "key": check.key,
        "name": check.name,
        "question": check.question,
        "kind": check.kind.value,
        "required": check.required,
        "guidance": guidance_text(check.guidance, check.answers),
        "categories": "\n".join(check.categories),
        "passing": " ".join(check.passing),
        "scale": check.scale,
        "pass_from": check.pass_from,
        "rules": [_rule_initial(rule.model_dump(mode="json")) for rule in check.rules],
    }


def _rule_initial(rule: dict) -> dict:
    return rule | {
        "phrases": "\n".join(rule.get("phrases", [])),
        "must": "true" if rule.get("must", True) else "false",
    }


class BaseCheckFormSet(forms.BaseFormSet):
    def __init__(self, *args, is_draft: bool = False, **kwargs) -> None:
        self.is_draft = is_draft
        super().__init__(*args, **kwargs)

    def get_form_kwargs(self, index: int) -> dict:
        return {"is_draft": self.is_draft}

    def kept(self) -> list[CheckForm]:
        """The checks to save, in the order their positions say (a row with no position goes last, as typed)."""
        kept = [(i, f) for i, f in enumerate(self.forms) if not (f.cleaned_data.get("DELETE") or f.is_blank())]
        kept.sort(key=lambda pair: _position(pair[1].cleaned_data.get("ORDER"), pair[0]))
        return [form for _, form in kept]

    def document(self, *, judge_after_rule_fail: bool) -> dict:
        """The checks document as typed; the rows it was built from are remembered so that an error at
        `checks.2.rules.0.phrases` lands on the rule row the admin typed it in."""
        self.kept_rows = self.kept()
        return {"checks": [form.check() for form in self.kept_rows], "judge_after_rule_fail": judge_after_rule_fail}

    def add_service_errors(self, errors: dict[str, list[str]]) -> None:
        """Each of the service's errors on the checks beside the row and field it names; the set's own on the set."""
        for path, messages in errors.items():
            parts = path.split(".")[1:]
            if not parts or not parts[0].isdigit() or int(parts[0]) >= len(self.kept_rows):
                self.service_errors = [*getattr(self, "service_errors", []), *messages]
                continue
            row, rest = self.kept_rows[int(parts[0])], parts[1:]
            if rest[:1] == ["rules"] and len(rest) > 1 and rest[1].isdigit():
                rules = row.kept_rules()
                if int(rest[1]) < len(rules):
                    _field_error(rules[int(rest[1])], rest[2:], messages)
                    continue
            if rest[:1] == ["rules"] and row.rules is not None:
                row.rules.service_errors = [*getattr(row.rules, "service_errors", []), *messages]
                continue
            _field_error(row, rest, messages)


def _position(order: int | None, index: int) -> tuple:
    return (order is None, order or 0, index)


def _field_error(form: forms.Form, rest: list[str], messages: list[str]) -> None:
    """On the field named first in `rest` (a deeper part, say a category's index, is said in the message), or the
    row's own errors."""
    if rest and rest[0] in form.fields:
        detail = " ".join(rest[1:])
        service_error(form, rest[0], [f"{detail}: {message}" if detail else message for message in messages])
    else:
        service_error(form, None, messages)


def service_error(form: forms.Form, field: str | None, messages: list[str]) -> None:
    """A service's error on `field` of `form` (None: the form's own), unless the form itself refused what was typed
    there: the service then read no value in its place, and the form's error says what to correct."""
    refused = form.__dict__.setdefault("_refused_as_typed", set(form.errors))  # before any of the service's
    if field is None or field not in refused:
        form.add_error(field, messages)


CheckFormSet = forms.formset_factory(
    CheckForm, formset=BaseCheckFormSet, extra=1, can_order=True, can_delete=True, max_num=MAX_CHECKS
)


def check_formset(data, *, check_set: CheckSet, is_draft: bool) -> BaseCheckFormSet:
    initial = [check_initial(check, position) for position, check in enumerate(check_set.checks, start=1)]
    return CheckFormSet(data, prefix="checks", initial=None if data is not None else initial, is_draft=is_draft)

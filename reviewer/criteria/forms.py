"""Forms of the criteria pages: the editor of a version (the rubric, the checks, every rule of the rules document), the
small forms that ask for N, K and a confirmation, a worked example's, and a spend cap's.

The editor does not validate the rules itself: it builds the rules document from what was typed and hands it to
the service's validation (`criteria_changes`), whose per-field errors (grading/checks/rules.py) are shown beside the
field they concern. One validation, the one the service and the Django admin apply too, run with the form's own
checks of what was typed (numbers, choices), so that a refused save lists every error in one round.
"""

import json
from urllib.parse import urlsplit

from django import forms
from django.conf import settings

from grading.criteria.impact import PREVIEW_DEFAULT, PREVIEW_MAX
from grading.criteria.trials import TRIAL_DEFAULT
from grading.judge.backends import judge_names
from grading.models import CriteriaVersion, ItemKind, SlotsFor, SpendPeriod, TrialSource
from grading.models.criteria import MAX_SLOTS
from grading.reviews.spend import CAP_MAX, MICROS
from grading.reviews.versions import CriteriaInvalid, criteria_changes
from reviewer.criteria.check_forms import check_formset, service_error

SEVERITY_CHOICES = [("fatal", "fatal: fails the draft"), ("fixable", "fixable: repaired automatically")]
PLACEMENT_CHOICES = [
    ("after_first_section", "after the first section"),
    ("before_last_section", "before the last section"),
    ("end", "at the end"),
]
_LINES = {"rows": 8, "spellcheck": "false"}


def version_slots(version: CriteriaVersion) -> dict:
    return {"slots": version.slots, "slots_for": version.slots_for, "slots_share": version.slots_share}


def _lines(text: str | None) -> list[str] | None:
    """One entry per line; blank lines are spacing, not entries. None (a field the form refused) stays None."""
    return None if text is None else [line.strip() for line in text.splitlines() if line.strip()]


def _stripped(text: str | None) -> str | None:
    return None if text is None else text.strip()


def _percent(percent: float | None) -> float | None:
    return None if percent is None else round(percent / 100, 4)


class _Typed(dict):
    """A form's cleaned data where a field the form refused reads None: the document built from it holds None
    there, which the service refuses at that field (the form's own error is the one shown) without reading a
    value nobody typed."""

    def __missing__(self, name: str) -> None:
        return None


class CharacterForm(forms.Form):
    # Not stripped: a substitute is often ", " and a sequence may be a lone space (which validation refuses).
    sequence = forms.CharField(max_length=16, required=False, strip=False)
    name = forms.CharField(max_length=60, required=False)
    substitute = forms.CharField(max_length=16, required=False, strip=False)

    def is_blank(self) -> bool:
        data = self.cleaned_data
        return not (data.get("sequence") or data.get("name") or data.get("substitute"))


class ComponentForm(forms.Form):
    name = forms.CharField(max_length=80, required=False)
    template = forms.CharField(max_length=2_000, required=False, widget=forms.Textarea(attrs={"rows": 2}))
    placement = forms.ChoiceField(choices=PLACEMENT_CHOICES, initial="end")

    def is_blank(self) -> bool:
        return not (self.cleaned_data.get("name") or self.cleaned_data.get("template"))


CharacterFormSet = forms.formset_factory(CharacterForm, extra=1, can_delete=True, max_num=40, validate_max=True)
ComponentFormSet = forms.formset_factory(ComponentForm, extra=1, can_delete=True, max_num=40, validate_max=True)

# Where each path of the rules document is edited: a field of the form, or a formset (rows by index).
_FIELD_OF_PATH = {
    "rubric": "rubric",
    "routing": "routing",
    "judge_sample": "judge_sample",
    "slots": "slots",
    "judge": "judge",
    "rules.banned_words": "banned_words",
    "rules.filler_phrases": "filler_phrases",
    "rules.banned_characters.severity": "banned_characters_severity",
    "rules.h2.min_ratio": "h2_min_percent",
    "rules.h2.min_count": "h2_min_count",
    "rules.h2.openings": "h2_openings",
    "rules.internal_links.pattern": "internal_links_pattern",
    "rules.internal_links.minimum": "internal_links_minimum",
    "rules.internal_links.related_reading_label": "related_reading_label",
    "rules.internal_links.severity": "internal_links_severity",
    "rules.components.severity": "components_severity",
    "rules.citation.minimum": "citation_minimum",
    "rules.citation.require_sources": "citation_require_sources",
    "rules.proof_points.minimum": "proof_points_minimum",
    "rules.threshold": "threshold",
    "rules.band": "band",
    "rules.max_judge_issues": "max_judge_issues",
    "rules.repair.banned_character": "repair_banned_character",
    "rules.repair.internal_links_missing": "repair_internal_links_missing",
    "rules.repair.component_missing": "repair_component_missing",
}
_FORMSET_OF_PATH = {"rules.banned_characters.characters": "characters", "rules.components.required": "components"}


class CriteriaForm(forms.Form):
    """The editor of an unpublished version: its rubric, its checks (`check_forms.py`) and, for drafts, the rules
    document. `revision` is the revision the editor started from: the service refuses a save made from an
    older one (someone saved meanwhile)."""

    revision = forms.IntegerField(min_value=1, widget=forms.HiddenInput)
    rubric = forms.CharField(strip=False, required=False, widget=forms.Textarea(attrs={"rows": 14}))
    # Left out of a post (a script editing the rubric), the version's setting stays as it is.
    slots = forms.IntegerField(min_value=1, max_value=MAX_SLOTS, required=False, label="People who decide each item")
    slots_for = forms.ChoiceField(choices=SlotsFor.choices, required=False, label="for")
    slots_share = forms.IntegerField(min_value=0, max_value=100, initial=0, required=False, label="share (%)")
    # The configured judges (settings.JUDGES); left out of a post, the version's judge stays as it is.
    judge = forms.ChoiceField(
        required=False,
        label="Judge",
        error_messages={"invalid_choice": "No judge named %(value)s is configured: choose one of the list."},
    )

    # Which items go to people whatever the machine decided (grading/checks/routing.py), as the JSON list the
    # service stores; left out of a post (a script editing the rubric), the version's rules stay as they are.
    routing = forms.CharField(
        required=False,
        label="Routing rules",
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text='[{"when": "thumbs_down"}, {"when": "metadata", "match": {"tier": "enterprise"}}, '
        '{"when": "sample", "percent": 10, "match": {"release": "2.4"}}]; [] for none.',
    )

    # Conversations: the share of each slice the judge grades (grading/checks/routing.py), as the JSON list the
    # service stores; left out of a post, the version's shares stay as they are.
    judge_sample = forms.CharField(
        required=False,
        label="Judge sampling",
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text='[{"percent": 20, "match": {"release": "2.4"}}, {"percent": 50}]; [] to grade every conversation.',
    )

    # Conversations: when a rule has already failed a required check, whether the judge is still asked.
    judge_after_rule_fail = forms.BooleanField(
        required=False, label="Ask the judge even when a rule has already failed a required check"
    )

    def __init__(self, *args, version: CriteriaVersion, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.version = version
        names = judge_names()
        # A judge removed from the configuration stays shown, so saving says so rather than switching silently.
        missing = [] if version.judge in names else [(version.judge, f"{version.judge} (not configured)")]
        self.fields["judge"].choices = [(name, _judge_choice(name)) for name in names] + missing
        self.is_draft = version.kind == ItemKind.DRAFT
        prefix_data = args[0] if args else kwargs.get("data")
        # Left out of a post (a script editing the rubric), the version's checks stay as they are.
        self.checks = None
        if prefix_data is None or "checks-TOTAL_FORMS" in prefix_data:
            self.checks = check_formset(prefix_data, check_set=version.check_set(), is_draft=self.is_draft)
        if not self.is_draft:
            return
        del self.fields["judge_after_rule_fail"]  # rules read conversations only
        del self.fields["judge_sample"]  # a draft is a gate a pipeline waits on: every draft is graded
        self.fields |= _draft_fields()
        rules = version.draft_rules()
        self.characters = CharacterFormSet(
            prefix_data,
            prefix="characters",
            initial=[c.model_dump() for c in rules.banned_characters.characters] if prefix_data is None else None,
        )
        self.components = ComponentFormSet(
            prefix_data,
            prefix="components",
            initial=[c.model_dump() for c in rules.components.required] if prefix_data is None else None,
        )

    @classmethod
    def for_version(cls, version: CriteriaVersion) -> "CriteriaForm":
        initial = {"revision": version.revision, "rubric": version.rubric, "judge": version.judge}
        initial |= version_slots(version)
        initial["routing"] = json.dumps(version.routing)
        initial["judge_sample"] = json.dumps(version.judge_sample)
        initial["judge_after_rule_fail"] = version.check_set().judge_after_rule_fail
        if version.kind == ItemKind.DRAFT:
            initial |= _draft_initial(version)
        return cls(initial=initial, version=version)

    def is_valid(self) -> bool:
        """What was typed reads (the form's own fields and rows) and the service accepts the edit it makes: both
        asked at once, so a refused save shows every error in one round, each at its field. Where the form refused
        a field, the service reads nothing in its place (its checks of that field wait until it reads)."""
        if not self.is_bound:
            return False
        if not hasattr(self, "_valid"):
            typed_well = super().is_valid()
            if self.checks is not None:
                typed_well = self.checks.is_valid() & typed_well
            if self.is_draft:
                typed_well = self.characters.is_valid() & self.components.is_valid() & typed_well
            self._valid = self._service_accepts() & typed_well
        return self._valid

    def _service_accepts(self) -> bool:
        try:
            criteria_changes(version=self.version, **self.edit())
        except CriteriaInvalid as invalid:
            self.add_service_errors(invalid.errors)
            return False
        return True

    def edit(self) -> dict:
        """The edit as `criteria_changes` and `criteria_update` take it."""
        data = self.cleaned_data
        return {
            "rubric": data.get("rubric"),
            "rules": self.rules_document(),
            "checks": self.checks_document(),
            **self.slots_setting(),
            **self.judge_setting(),
            **self.json_setting("routing"),
            **self.json_setting("judge_sample"),
        }

    def clean_routing(self) -> list | None:
        return self._json_list("routing")

    def clean_judge_sample(self) -> list | None:
        return self._json_list("judge_sample")

    def _json_list(self, name: str) -> list | None:
        """A field typed as a JSON list (its checks are the service's); None when the post leaves it out."""
        if name not in self.data:
            return None
        text = self.cleaned_data[name].strip()
        try:
            return json.loads(text) if text else []
        except json.JSONDecodeError as bad:
            raise forms.ValidationError(f"Not JSON ({bad.msg}, at character {bad.pos}).") from None

    def json_setting(self, name: str) -> dict:
        value = self.cleaned_data.get(name)
        return {} if value is None else {name: value}

    def error_summary(self) -> list[str]:
        """Every error the editor shows, each with where it is: the list at the top of the page, so a refused save
        says what to fix without scrolling to find it (each field keeps its own message too)."""
        if not self.is_bound:
            return []
        summary = [f"{self._where(name)}: {message}" for name, messages in self.errors.items() for message in messages]
        rows = []
        if self.checks is not None:
            rows.append(("checks", self.checks))
            rows += [(f"check {n}", row.rules) for n, row in enumerate(self.checks.forms, start=1) if row.rules]
        if self.is_draft:
            rows += [("banned characters", self.characters), ("components", self.components)]
        for place, formset in rows:
            summary += [f"{place}: {m}" for m in [*formset.non_form_errors(), *getattr(formset, "service_errors", [])]]
            for n, row in enumerate(formset.forms, start=1):
                summary += [
                    f"{place}, row {n}{'' if name == '__all__' else f', {name}'}: {message}"
                    for name, messages in row.errors.items()
                    for message in messages
                ]
        return summary

    def _where(self, name: str) -> str:
        if name == "__all__":
            return "the version"
        field = self.fields.get(name)
        return str(field.label) if field is not None and field.label else name.replace("_", " ")

    def judge_setting(self) -> dict:
        return {"judge": self.cleaned_data["judge"]} if self.cleaned_data.get("judge") else {}

    def slots_setting(self) -> dict:
        data = self.cleaned_data
        if data.get("slots") is None:
            return {}
        slots_for = data.get("slots_for") or self.version.slots_for
        return {"slots": data["slots"], "slots_for": slots_for, "slots_share": data.get("slots_share") or 0}

    def checks_document(self) -> dict | None:
        """The checks document as typed, or None when the post did not include the checks (or a hand-made post
        broke the rows' count, so that no document can be read from them)."""
        if self.checks is None or not self.checks.management_form.is_valid():
            return None
        keep = self.version.check_set().judge_after_rule_fail
        return self.checks.document(judge_after_rule_fail=self.cleaned_data.get("judge_after_rule_fail", keep))

    def rules_document(self) -> dict | None:
        """The rules document as typed (drafts), with the formset rows it was built from remembered so that an
        error at `components.required.1` lands on the row the admin typed it in."""
        if not self.is_draft:
            return None
        data = _Typed(self.cleaned_data)
        self._character_rows = [f for f in self.characters.forms if not _dropped(f)]
        self._component_rows = [f for f in self.components.forms if not _dropped(f)]
        return {
            "schema_version": 1,
            "banned_words": {"severity": "fatal", "terms": _lines(data["banned_words"])},
            "filler_phrases": {"severity": "fatal", "terms": _lines(data["filler_phrases"])},
            "banned_characters": {
                "severity": data["banned_characters_severity"],
                "characters": [
                    {
                        "sequence": f.cleaned_data.get("sequence"),
                        "name": f.cleaned_data.get("name"),
                        "substitute": f.cleaned_data.get("substitute"),
                    }
                    for f in self._character_rows
                ],  # fmt: skip
            },
            "h2": {
                "severity": "fatal",
                "min_ratio": _percent(data["h2_min_percent"]),
                "min_count": data["h2_min_count"],
                "openings": _lines(data["h2_openings"]),
            },
            "internal_links": {
                "severity": data["internal_links_severity"],
                "pattern": data["internal_links_pattern"],
                "minimum": data["internal_links_minimum"],
                "related_reading_label": data["related_reading_label"],
            },
            "components": {
                "severity": data["components_severity"],
                "required": [
                    {
                        "name": f.cleaned_data.get("name"),
                        "template": _stripped(f.cleaned_data.get("template")),
                        "placement": f.cleaned_data.get("placement"),
                    }
                    for f in self._component_rows
                ],  # fmt: skip
            },
            "citation": {
                "severity": "fatal",
                "minimum": data["citation_minimum"],
                "require_sources": data["citation_require_sources"],
            },
            "proof_points": {"severity": "fatal", "minimum": data["proof_points_minimum"]},
            "threshold": data["threshold"],
            "band": data["band"],
            "max_judge_issues": data["max_judge_issues"],
            "repair": {
                "banned_character": data["repair_banned_character"],
                "internal_links_missing": data["repair_internal_links_missing"],
                "component_missing": data["repair_component_missing"],
            },
        }

    def add_service_errors(self, errors: dict[str, list[str]]) -> None:
        """Show each of the service's errors beside the field (or formset row) it names."""
        for path, messages in errors.items():
            if (path == "checks" or path.startswith("checks.")) and self.checks is not None:
                self.checks.add_service_errors({path: messages})
                continue
            for prefix, rows_name in _FORMSET_OF_PATH.items():
                if path == prefix or path.startswith(prefix + "."):
                    self._formset_error(rows_name, path.removeprefix(prefix).lstrip("."), messages)
                    break
            else:
                service_error(self, _field_for(path), messages)

    def _formset_error(self, rows_name: str, rest: str, messages: list[str]) -> None:
        formset = getattr(self, rows_name)
        rows = self._character_rows if rows_name == "characters" else self._component_rows
        index, _, field = rest.partition(".")
        if index.isdigit() and int(index) < len(rows):
            row = rows[int(index)]
            service_error(row, field if field in row.fields else None, messages)
        else:
            formset.service_errors = [*getattr(formset, "service_errors", []), *messages]


def _judge_choice(name: str) -> str:
    """`cheap: gpt-4o-mini at api.example.com`, or the offline heuristic for a `default` with no JUDGE_BASE_URL."""
    entry = settings.JUDGES[name]
    if not entry["base_url"]:
        return f"{name}: the offline heuristic judge"
    return f"{name}: {entry['model']} at {urlsplit(entry['base_url']).hostname}"


def _field_for(path: str) -> str | None:
    """The form field editing `path`, or its closest enclosing one; None (the form's own errors) if none does."""
    while path:
        if path in _FIELD_OF_PATH:
            return _FIELD_OF_PATH[path]
        path = path.rpartition(".")[0]
    return None


def _dropped(row: forms.Form) -> bool:
    return row.cleaned_data.get("DELETE", False) or row.is_blank()


def _draft_fields() -> dict[str, forms.Field]:
    severity = {"choices": SEVERITY_CHOICES, "widget": forms.Select}
    return {
        "banned_words": forms.CharField(required=False, widget=forms.Textarea(attrs=_LINES)),
        "filler_phrases": forms.CharField(required=False, widget=forms.Textarea(attrs=_LINES)),
        "banned_characters_severity": forms.ChoiceField(**severity),
        "h2_min_percent": forms.FloatField(min_value=0, max_value=100),
        "h2_min_count": forms.IntegerField(min_value=0, max_value=100),
        "h2_openings": forms.CharField(required=False, widget=forms.Textarea(attrs=_LINES | {"rows": 5})),
        "internal_links_pattern": forms.CharField(max_length=200, strip=False),
        "internal_links_minimum": forms.IntegerField(min_value=0, max_value=100),
        "related_reading_label": forms.CharField(max_length=100),
        "internal_links_severity": forms.ChoiceField(**severity),
        "components_severity": forms.ChoiceField(**severity),
        "citation_minimum": forms.IntegerField(min_value=0, max_value=100),
        "citation_require_sources": forms.BooleanField(required=False),
        "proof_points_minimum": forms.IntegerField(min_value=0, max_value=100),
        # The threshold and band are checked by the rules document, which says why (the 1-10 scale, the band
        # below the threshold); the form only asks for numbers.
        "threshold": forms.FloatField(),
        "band": forms.FloatField(),
        "max_judge_issues": forms.IntegerField(),
        "repair_banned_character": forms.BooleanField(required=False),
        "repair_internal_links_missing": forms.BooleanField(required=False),
        "repair_component_missing": forms.BooleanField(required=False),
    }


def _draft_initial(version: CriteriaVersion) -> dict:
    rules = version.draft_rules()
    return {
        "banned_words": "\n".join(rules.banned_words.terms),
        "filler_phrases": "\n".join(rules.filler_phrases.terms),
        "banned_characters_severity": rules.banned_characters.severity,
        "h2_min_percent": round(rules.h2.min_ratio * 100, 2),
        "h2_min_count": rules.h2.min_count,
        "h2_openings": "\n".join(rules.h2.openings),
        "internal_links_pattern": rules.internal_links.pattern,
        "internal_links_minimum": rules.internal_links.minimum,
        "related_reading_label": rules.internal_links.related_reading_label,
        "internal_links_severity": rules.internal_links.severity,
        "components_severity": rules.components.severity,
        "citation_minimum": rules.citation.minimum,
        "citation_require_sources": rules.citation.require_sources,
        "proof_points_minimum": rules.proof_points.minimum,
        "threshold": rules.threshold,
        "band": rules.band,
        "max_judge_issues": rules.max_judge_issues,
        "repair_banned_character": rules.repair.banned_character,
        "repair_internal_links_missing": rules.repair.internal_links_missing,
        "repair_component_missing": rules.repair.component_missing,
    }


class NewVersionForm(forms.Form):
    kind = forms.ChoiceField(choices=ItemKind.choices)
    org = forms.IntegerField(min_value=1)
    source = forms.IntegerField(min_value=1, required=False)  # empty: the active version


class DiffForm(forms.Form):
    old = forms.IntegerField(min_value=1)
    new = forms.IntegerField(min_value=1)


class PreviewForm(forms.Form):
    n = forms.IntegerField(min_value=1, max_value=PREVIEW_MAX, initial=PREVIEW_DEFAULT, label="drafts")

    def __init__(self, *args, item: str = "drafts", **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["n"].label = item


class TrialForm(forms.Form):
    source = forms.ChoiceField(
        choices=TrialSource.choices, initial=TrialSource.CURRENT, required=False, label="compared with"
    )
    k = forms.IntegerField(min_value=1, initial=TRIAL_DEFAULT, label="items")

    def clean_source(self) -> str:
        return self.cleaned_data["source"] or TrialSource.CURRENT  # a link from before there was a choice

    def clean_k(self) -> int:
        k = self.cleaned_data["k"]
        if k > settings.CRITERIA_TRIAL_MAX_ITEMS:
            raise forms.ValidationError(
                f"At most {settings.CRITERIA_TRIAL_MAX_ITEMS} items (CRITERIA_TRIAL_MAX_ITEMS): "
                "each is a paid judge call."
            )
        return k


class TrialRowsForm(forms.Form):
    """Which page of a scored trial's items and of its changed verdicts its page shows (1 when not given)."""

    page = forms.IntegerField(min_value=1, required=False)
    changed_page = forms.IntegerField(min_value=1, required=False)


class TrialStartForm(TrialForm):
    counted_calls = forms.IntegerField(min_value=0, widget=forms.HiddenInput)


class PublishForm(forms.Form):
    # The active version the plan was made against: publishing is refused if another was published since.
    plan_active = forms.IntegerField(min_value=1, widget=forms.HiddenInput)
    regrade_now = forms.BooleanField(required=False, label="Re-grade now: run a grading pass once it is published")


class ExampleAddForm(forms.Form):
    version = forms.IntegerField(min_value=1)
    kind = forms.ChoiceField(choices=ItemKind.choices)
    item = forms.IntegerField(min_value=1)
    check = forms.CharField(max_length=32)


class ExampleFromExpectedReplyForm(forms.Form):
    version = forms.IntegerField(min_value=1)
    correction = forms.IntegerField(min_value=1)
    check = forms.CharField(max_length=32)


class ExampleExplainForm(forms.Form):
    revision = forms.IntegerField(min_value=1)
    explanation = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}))


class ExampleRemoveForm(forms.Form):
    revision = forms.IntegerField(min_value=1)


class SpendCapForm(forms.Form):
    org = forms.IntegerField(widget=forms.HiddenInput)
    version = forms.IntegerField(required=False, label="criteria version", help_text="Empty: the whole org.")
    period = forms.ChoiceField(choices=SpendPeriod.choices)
    tokens = forms.IntegerField(required=False, min_value=0, max_value=CAP_MAX, label="tokens")
    # In money, to the micro (the ledger's unit): the page names the currency the judges' prices are in.
    cost = forms.DecimalField(required=False, min_value=0, max_value=CAP_MAX // MICROS, decimal_places=6)
    remove = forms.BooleanField(required=False)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["cost"].label = f"cost ({settings.SPEND_CURRENCY})"

    def clean(self) -> dict:
        data = super().clean()
        data["cost_micros"] = int(data["cost"] * MICROS) if data.get("cost") is not None else None
        nothing = data.get("tokens") is None and data.get("cost_micros") is None
        if nothing and not data.get("remove") and not self.errors:  # a figure refused has its own message
            self.add_error("tokens", "Give a cap on tokens, on cost, or both (or remove the cap).")
        return data


class CertifyTargetForm(forms.Form):
    """The certification target in percent: with `confidence` % probability, the items the machine decides alone
    agree with people at least `agreement` % of the time. Clearing it returns routing to the fixed bands."""

    agreement = forms.IntegerField(min_value=51, max_value=99, required=False, label="agreement with people (%)")
    confidence = forms.IntegerField(min_value=51, max_value=99, required=False, label="confidence (%)")
    clear = forms.BooleanField(required=False)

    def clean(self) -> dict:
        data = super().clean()
        if (
            not data.get("clear")
            and not self.errors
            and (data.get("agreement") is None or data.get("confidence") is None)
        ):
            raise forms.ValidationError("Give both the agreement and the confidence, from 51 to 99 %.")
        return data

    def target(self) -> tuple[float | None, float | None]:
        if self.cleaned_data.get("clear"):
            return None, None
        return self.cleaned_data["agreement"] / 100, self.cleaned_data["confidence"] / 100

"""Forms of the review queue: the filters, and the two decision forms (drafts and conversations)."""

from dataclasses import dataclass

from django import forms
from django.forms.boundfield import BoundWidget

from grading.checks.definitions import UNKNOWN, AnswerKind, CheckDefinition, CheckSet
from grading.models import Decision, ItemKind, Review
from grading.reviews.services import PersonVerdict
from reviewer.queue.display import REASON_LABELS
from reviewer.queue.reads import QueueFilters

KIND_CHOICES = [("", "all"), (ItemKind.DRAFT, "drafts"), (ItemKind.CONVERSATION, "conversations")]


class QueueFilterForm(forms.Form):
    """Filters and the keyset cursor. Junk values fall back to no filter rather than an error page: these
    arrive in links, and a stale bookmark should still open the queue."""

    kind = forms.ChoiceField(choices=KIND_CHOICES, required=False)
    application = forms.CharField(max_length=100, required=False)
    reason = forms.ChoiceField(choices=[("", "all"), *REASON_LABELS.items()], required=False)
    criteria = forms.IntegerField(required=False, min_value=1)
    overdue = forms.BooleanField(required=False, label="overdue only")
    mine = forms.BooleanField(required=False, label="assigned to me")
    slice = forms.CharField(max_length=220, required=False)  # "release=2.4"
    after = forms.IntegerField(required=False, min_value=1)
    before = forms.IntegerField(required=False, min_value=1)

    def filters(self) -> QueueFilters:
        data = self.cleaned_data if self.is_valid() else {}
        return QueueFilters(
            kind=data.get("kind") or "",
            application=data.get("application") or "",
            reason=data.get("reason") or "",
            criteria_version=data.get("criteria"),
            overdue=data.get("overdue") or False,
            mine=data.get("mine") or False,
            slice=_slice(data.get("slice") or ""),
        )

    def cursor(self) -> tuple[int | None, int | None]:
        data = self.cleaned_data if self.is_valid() else {}
        return data.get("after"), data.get("before")


def _slice(text: str) -> str:
    """A dimension value as `name=value`, or "" (no filter) for anything else."""
    name, equals, value = text.strip().partition("=")
    return f"{name}={value}" if name and equals and value else ""


class _DecisionForm(forms.Form):
    # The identity the page showed: a decision is bound to it, and refused if the item moved on.
    fingerprint = forms.CharField(max_length=80, widget=forms.HiddenInput)
    note = forms.CharField(
        required=False,
        max_length=10_000,
        widget=forms.Textarea(attrs={"rows": 2, "placeholder": "note (why)", "data-note": ""}),
    )
    keep_as_learning = forms.BooleanField(required=False, label="keep this note as an org learning")

    def clean(self):
        data = super().clean()
        if data.get("keep_as_learning") and not (data.get("note") or "").strip():
            self.add_error("note", "Write the note to keep it as an org learning.")
        return data


class DraftDecisionForm(_DecisionForm):
    outcome = forms.ChoiceField(
        choices=[
            (o.value, o.label) for o in (Decision.Outcome.APPROVE, Decision.Outcome.REJECT, Decision.Outcome.SEND_BACK)
        ]
    )

    def clean(self):
        data = super().clean()
        if (
            data.get("outcome") in (Decision.Outcome.REJECT, Decision.Outcome.SEND_BACK)
            and not (data.get("note") or "").strip()
        ):
            label = Decision.Outcome(data["outcome"]).label
            self.add_error("note", f"A note is required to {label}.")
        return data


# The key that gives each answer on the item page (reviewer/static/queue.js reads them from the page): p, f and u for
# a verdict; a category by its place, 1 to 8; a score by its number (0 for 10); u for unknown everywhere.
VERDICT_KEYS = {"pass": "p", "fail": "f", UNKNOWN: "u"}


def answer_key(check: CheckDefinition, answer: str) -> str:
    if answer == UNKNOWN or check.kind == AnswerKind.VERDICT:
        return VERDICT_KEYS[answer]
    if check.kind == AnswerKind.CATEGORY:
        return str(check.categories.index(answer) + 1)
    return answer[-1]  # a score: "1".."9", and "10" -> "0"


@dataclass(frozen=True)
class AnswerChoice:
    radio: BoundWidget
    key: str


@dataclass(frozen=True)
class CheckField:
    """One check of the version beside the person's answer to it: its name, question and guidance per answer, and
    each answer's radio with the key that gives it."""

    field: forms.BoundField
    check: CheckDefinition

    @property
    def guidance(self) -> list[tuple[str, str]]:
        return self.check.guidance_in_order()

    @property
    def choices(self) -> list[AnswerChoice]:
        return [AnswerChoice(radio, answer_key(self.check, radio.data["value"])) for radio in self.field]


def answer_choices(check: CheckDefinition) -> list[tuple[str, str]]:
    """The answers a check allows, as a select offers them: a score reads "3 of 5"."""
    if check.kind == AnswerKind.SCORE:
        return [(a, a if a == "unknown" else f"{a} of {check.scale}") for a in check.answers]
    return [(answer, answer) for answer in check.answers]


class ConversationDecisionForm(_DecisionForm):
    """An answer to every check of the review's criteria version, each field named by the check's key: one choice per
    answer, none chosen unless `start_from` gives it, so every answer is the person's own."""

    def __init__(self, *args, check_set: CheckSet, start_from: dict[str, str] | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.check_set = check_set
        for check in check_set.checks:
            initial = (start_from or {}).get(check.key)
            self.fields[check.key] = forms.ChoiceField(
                label=check.name,
                choices=answer_choices(check),
                initial=initial if initial in check.answers else None,
                widget=forms.RadioSelect,
                error_messages={"required": f"Answer {check.name}: {', '.join(check.answers)}."},
            )
        self.fields["note"].required = True
        self.fields["note"].widget.attrs["required"] = True

    def verdicts(self) -> dict[str, str]:
        """The answers given, by check key, in the version's order."""
        return {key: self.cleaned_data[key] for key in self.check_set.keys}

    def check_fields(self) -> list[CheckField]:
        return [CheckField(self[check.key], check) for check in self.check_set.checks]


DecisionForm = DraftDecisionForm | ConversationDecisionForm


def decision_form(review: Review, data=None, *, start_from: dict[str, str] | None = None) -> DecisionForm:
    """The form that decides `review`, bound to `data` when given. Unbound, a conversation's starts from no answer,
    never the machine's: the item came to a person because the machine was unsure (or to audit it), and its answers
    would anchor theirs. An adjudicator's starts from what the answers agree on (`start_from`)."""
    if review.kind == ItemKind.DRAFT:
        return DraftDecisionForm(data, initial={"fingerprint": review.fingerprint})
    return ConversationDecisionForm(
        data,
        initial={"fingerprint": review.fingerprint},
        check_set=review.criteria_version.check_set(),
        start_from=start_from,
    )


def decided(form: DecisionForm) -> dict:
    """A valid decision form's decision as `decision_create` takes it, whoever sent it (the page or the API)."""
    data = form.cleaned_data
    verdict = PersonVerdict(
        outcome=data.get("outcome", ""),
        checks=form.verdicts() if isinstance(form, ConversationDecisionForm) else None,
        note=data.get("note") or "",
    )
    return {
        "fingerprint": data["fingerprint"],
        "verdict": verdict,
        "keep_as_learning": data.get("keep_as_learning", False),
    }


class DeclineForm(forms.Form):
    reason = forms.CharField(
        max_length=2_000,
        error_messages={"required": "Say why you decline the item: the reason is recorded."},
        widget=forms.TextInput(attrs={"placeholder": "why you decline (recorded)", "required": True}),
    )


class AssignForm(forms.Form):
    """A lead's assignment of an item: to one of `people` or `pools`, for some hours or while it waits."""

    to = forms.ChoiceField(error_messages={"invalid_choice": "Pick someone who can work this item, or a pool."})
    hours = forms.IntegerField(
        required=False, min_value=1, max_value=24 * 30, help_text="Empty: reserved for as long as it waits."
    )

    def __init__(self, data=None, *, people=(), pools=()) -> None:
        super().__init__(data)
        self.people = {f"person:{person.pk}": person for person in people}
        self.pools = {f"pool:{pool.pk}": pool for pool in pools}
        self.fields["to"].choices = [(key, person.get_username()) for key, person in self.people.items()] + [
            (key, f"pool {pool.name}") for key, pool in self.pools.items()
        ]

    def assignee(self) -> dict:
        """`person=` or `pool=`, for assignment_set."""
        to = self.cleaned_data["to"]
        return {"person": self.people[to]} if to in self.people else {"pool": self.pools[to]}

    def assignee_name(self) -> str:
        to = self.cleaned_data["to"]
        return self.people[to].get_username() if to in self.people else f"pool {self.pools[to].name}"

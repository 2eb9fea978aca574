"""What a criteria version asks: its checks, each with a key, a name, the question, guidance for every answer, whether
it is required for a pass, an answer kind, and (conversations) the deterministic rules that may veto the judge.

`CheckSet` is what `CriteriaVersion.checks` stores as JSON (`model_dump(mode="json")`) and what every reader of a
version's checks goes through: the judge's prompt and answer schema, the grader, the queue's forms, the figures, the
exports. Pure Python: no Django.

How an answer is stored, for every kind, so that counters, figures and exports read one shape: a review's
`checks[key]["verdict"]` (and a person's answer, a label, a worked example) holds a string:
- `verdict`: "pass", "fail" or "unknown";
- `category`: one of the check's category keys, or "unknown";
- `score`: "1" to the scale's top ("5" or "10"), or "unknown".
`CheckDefinition.outcome` reads any of them as pass / fail / unknown for the item's outcome.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Literal

import re2
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from grading.core.evidence import Verdict

UNKNOWN = Verdict.UNKNOWN.value
MAX_CHECKS = 12
MAX_RULES_PER_CHECK = 8
MAX_PHRASES_PER_RULE = 200
MAX_TEXT = 2000  # a question, a piece of guidance, a phrase or a pattern
_KEY = re.compile(r"[a-z][a-z0-9_]{0,31}")
_CATEGORY = re.compile(r"[a-z][a-z0-9_]{0,31}")
# The queue's decision form posts each check's answer under its key, beside its own fields (reviewer/queue/forms.py);
# a draft judge answers "overall", "passed" and "issues" beside its checks (grading/judge/draft.py).
RESERVED_KEYS = frozenset(
    {"pass_fail", "outcome", "summary", UNKNOWN, "note", "fingerprint", "keep_as_learning", "csrfmiddlewaretoken"}
    | {"overall", "passed", "issues"}
)


class CheckFieldInvalid(ValueError):
    """A check's own rule broken, said of the check as a whole (its fields read together) and naming the field an
    editor changes to satisfy it, so the editor shows it there (grading/reviews/versions.py: checks_validate)."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


class AnswerKind(StrEnum):
    VERDICT = "verdict"
    CATEGORY = "category"
    SCORE = "score"


class Scope(StrEnum):
    """Which messages of a conversation's active path a text rule reads."""

    ASSISTANT = "assistant"
    TOOL = "tool"  # tool results
    USER = "user"


class _Rule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    # What a match sets its check to: a rule only ever lowers what the judge said (fail beats unknown beats pass).
    sets: Literal["fail", "unknown"] = "fail"
    note: str = Field(default="", max_length=MAX_TEXT, description="The admin's words on what the rule guards.")


class PhrasesRule(_Rule):
    """Any of the phrases in a message of the scopes (the drafts' whole-word, case-insensitive matching)."""

    kind: Literal["phrases"] = "phrases"
    phrases: list[Annotated[str, Field(min_length=1, max_length=200)]] = Field(
        min_length=1, max_length=MAX_PHRASES_PER_RULE
    )
    scopes: list[Scope] = Field(default=[Scope.ASSISTANT], min_length=1)


class PatternRule(_Rule):
    """A pattern in a linear-time engine (RE2) matching a message of the scopes; a pattern RE2 refuses is refused."""

    kind: Literal["pattern"] = "pattern"
    pattern: str = Field(min_length=1, max_length=MAX_TEXT)
    scopes: list[Scope] = Field(default=[Scope.ASSISTANT], min_length=1)
    case_sensitive: bool = False

    @field_validator("pattern")
    @classmethod
    def _linear_time(cls, pattern: str) -> str:
        compiled_pattern(pattern, case_sensitive=True)
        return pattern

    def compiled(self) -> re2._Regexp:
        return compiled_pattern(self.pattern, case_sensitive=self.case_sensitive)


def compiled_pattern(pattern: str, *, case_sensitive: bool) -> re2._Regexp:
    """A pattern compiled by RE2, which matches in time linear in the text; a pattern it cannot take (a back
    reference, a look-around) is refused with its reason, never handed to a backtracking engine."""
    options = re2.Options()
    options.log_errors = False
    options.case_sensitive = case_sensitive
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise ValueError(f"the pattern cannot be matched in linear time (RE2): {reason}") from None


class ToolCalledRule(_Rule):
    """A tool that must (or must not) be called on the active path."""

    kind: Literal["tool_called"] = "tool_called"
    tool: str = Field(min_length=1, max_length=200)
    must: bool = Field(True, description="True: must be called; False: must never be called.")


class ToolsAnsweredRule(_Rule):
    """Every tool call on the active path is answered by a tool message naming its id."""

    kind: Literal["tools_answered"] = "tools_answered"


ConversationRule = Annotated[
    PhrasesRule | PatternRule | ToolCalledRule | ToolsAnsweredRule, Field(discriminator="kind")
]


class CheckDefinition(BaseModel):
    """One question a version asks of every item of its kind."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str = Field(description="Stable: counters, exports and people's answers are kept by it.")
    name: str = Field(min_length=1, max_length=80)
    question: str = Field(min_length=1, max_length=MAX_TEXT)
    kind: AnswerKind = AnswerKind.VERDICT
    # Guidance for every answer the kind allows (unknown included): answer -> the words the judge and people read.
    guidance: dict[str, Annotated[str, Field(max_length=MAX_TEXT)]] = Field(default_factory=dict)
    required: bool = Field(True, description="An item passes only if every required check passes.")
    categories: list[str] = Field(default_factory=list, description="category: two to eight keys, in order.")
    scale: Literal[5, 10] = Field(5, description="score: answers 1 to scale.")
    # What counts as a pass of a required category or score check: the categories that pass, the lowest score.
    passing: list[str] = Field(default_factory=list)
    pass_from: int | None = None
    rules: list[ConversationRule] = Field(default_factory=list, max_length=MAX_RULES_PER_CHECK)

    @field_validator("key")
    @classmethod
    def _key(cls, key: str) -> str:
        if not _KEY.fullmatch(key):
            raise ValueError("a key is 1 to 32 lower-case letters, digits or underscores, starting with a letter")
        if key in RESERVED_KEYS:
            raise ValueError(f"{key!r} is reserved")
        return key

    @model_validator(mode="after")
    def _kind_fits(self) -> CheckDefinition:
        if self.kind == AnswerKind.CATEGORY:
            if not 2 <= len(self.categories) <= 8:
                raise CheckFieldInvalid("a category check has two to eight categories", field="categories")
            bad = [c for c in self.categories if not _CATEGORY.fullmatch(c) or c == UNKNOWN]
            if bad or len(set(self.categories)) != len(self.categories):
                raise CheckFieldInvalid(
                    "categories are distinct lower-case keys (letters, digits, _), and not 'unknown'",
                    field="categories",
                )
            if not set(self.passing) <= set(self.categories):
                raise CheckFieldInvalid("the passing categories must be among the categories", field="passing")
            if self.required and not self.passing:
                raise CheckFieldInvalid("a required category check names the categories that pass", field="passing")
        elif self.categories or self.passing:
            raise CheckFieldInvalid("only a category check has categories", field="categories")
        if self.kind == AnswerKind.SCORE:
            if self.pass_from is not None and not 1 <= self.pass_from <= self.scale:
                raise CheckFieldInvalid(f"the lowest passing score is 1 to {self.scale}", field="pass_from")
            if self.required and self.pass_from is None:
                raise CheckFieldInvalid("a required score check names its lowest passing score", field="pass_from")
        elif self.pass_from is not None:
            raise CheckFieldInvalid("only a score check has a lowest passing score", field="pass_from")
        unexpected = set(self.guidance) - set(self.answers)
        if unexpected:
            raise CheckFieldInvalid(
                f"guidance for answers the check does not have: {sorted(unexpected)}", field="guidance"
            )
        return self

    @property
    def answers(self) -> tuple[str, ...]:
        """Every answer the check allows, unknown last, as stored."""
        if self.kind == AnswerKind.VERDICT:
            return (Verdict.PASS, Verdict.FAIL, UNKNOWN)
        if self.kind == AnswerKind.CATEGORY:
            return (*self.categories, UNKNOWN)
        return (*(str(n) for n in range(1, self.scale + 1)), UNKNOWN)

    def guidance_in_order(self) -> list[tuple[str, str]]:
        """(answer, the admin's words on it) in the answers' order, for the answers that have guidance: what people
        read beside the check wherever they answer it or read its answer."""
        return [(answer, self.guidance[answer]) for answer in self.answers if self.guidance.get(answer)]

    def outcome(self, answer: str) -> Verdict:
        """An answer read as pass / fail / unknown: what a required check contributes to the item's outcome. A check
        that is not required never fails an item (its answer is still counted and shown)."""
        if answer == UNKNOWN or answer not in self.answers:
            return Verdict.UNKNOWN
        if self.kind == AnswerKind.VERDICT:
            return Verdict(answer)
        if self.kind == AnswerKind.CATEGORY:
            return Verdict.PASS if answer in self.passing else Verdict.FAIL
        return Verdict.PASS if self.pass_from is not None and int(answer) >= self.pass_from else Verdict.FAIL


class CheckSet(BaseModel):
    """A version's checks, in the order the judge and people read them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    checks: list[CheckDefinition] = Field(min_length=1, max_length=MAX_CHECKS)
    # When a rule has already failed a required check: ask the judge anyway (figures stay comparable), or not.
    judge_after_rule_fail: bool = True

    @model_validator(mode="after")
    def _distinct(self) -> CheckSet:
        keys = [check.key for check in self.checks]
        if len(set(keys)) != len(keys):
            raise ValueError("each check's key is used once")
        return self

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(check.key for check in self.checks)

    def __getitem__(self, key: str) -> CheckDefinition:
        for check in self.checks:
            if check.key == key:
                return check
        raise KeyError(key)


# --- the checks every version had before a version could define its own ---------------------------------------------
# (key, name, question): the conversations' are required verdicts, the drafts' optional scores.
CONVERSATION_DEFAULTS = CheckSet(
    checks=[
        CheckDefinition(key=key, name=name, question=question)
        for key, name, question in (
            (
                "grounded",
                "Grounded",
                "Is every claim the assistant makes supported by the conversation or its tool results?",
            ),
            ("complete", "Complete", "Did the assistant address everything the user asked?"),
            ("usable", "Usable", "Could the user act on the answer as given?"),
        )
    ]
)

DRAFT_DEFAULTS = CheckSet(
    checks=[
        CheckDefinition(key=key, name=name, question=question, kind=AnswerKind.SCORE, required=False)
        for key, name, question in (
            ("aeo", "AEO compliance", "How well does the draft answer the questions it names?"),
            ("writing", "Writing quality", "How good is the writing?"),
            ("org_fit", "Org fit", "How well does the draft fit the organisation?"),
        )
    ]
)

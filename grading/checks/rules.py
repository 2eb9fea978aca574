"""The rules document of a draft CriteriaVersion, and the seeded v1 defaults.

`DraftRules` is what a draft criteria version stores as JSON (`model_dump(mode="json")`) and what both the checks and
the writer pipeline read (`GET /api/v1/criteria/draft/writer-rules`, as JSON or as `rules_as_text`). Pure Python:
no Django.

Matching semantics the checks implement (and the writer text states):
- Terms (banned words, filler phrases, proof terms) match case-insensitively, as whole words: a term edge that is a
  letter, digit or underscore must not touch another such character. Hyphens and apostrophes are boundaries, as in a
  regex `\b`: "re-leverage" and "leverage's" contain the banned word "leverage"; "showcased" does not contain
  "showcase" (list "showcased" to ban it). Typographic apostrophes count as "'"; a line break inside a phrase counts
  as a space.
- Banned characters (the em dash, "--") match anywhere in prose; touching repeats are one occurrence ("---").
- Prose is the body minus fenced and inline code, comments, link destinations and bare URLs, front matter and Markdown
  syntax lines (thematic breaks, table delimiter rows, setext underlines): words inside a URL or a code sample are not
  writing.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from grading.checks import v1_vocabulary as vocabulary
from grading.core.schemas import editor_reason

Severity = Literal["fatal", "fixable"]
Placement = Literal["after_first_section", "before_last_section", "end"]

# Terms are stored normalised so that equality, de-duplication and the matcher all agree.
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'"})
_WHITESPACE = re.compile(r"\s+")
_COMPONENT_NAME = re.compile(r"[A-Z][A-Za-z0-9]*")
_SLUG_PLACEHOLDER = "{slug}"


def normalize_term(term: str) -> str:
    """The form a term is stored and matched in: lower case, straight apostrophes, single spaces."""
    return _WHITESPACE.sub(" ", term.translate(_APOSTROPHES)).strip().lower()


def _normalized_terms(terms: list[str]) -> list[str]:
    seen: dict[str, None] = {}
    for term in terms:
        normalized = normalize_term(term)
        if not normalized:
            raise ValueError("a term may not be empty")
        seen.setdefault(normalized, None)
    return list(seen)


# --- the seeded v1 vocabulary (grading/checks/v1_vocabulary.py) -----------------------------------------------------
def _words(*blocks: str) -> list[str]:
    return _normalized_terms([word for block in blocks for word in block.split()])


def _lines(*blocks: str) -> list[str]:
    return _normalized_terms([line for block in blocks for line in block.splitlines() if line.strip()])


V1_BANNED_WORDS = _words(
    vocabulary.VALE_OVERUSED,
    vocabulary.VALE_FORMAL,
    vocabulary.VALE_TRANSITIONS_AND_COMPOUNDS,
    vocabulary.ANTISLOP_WORDS,
    vocabulary.CLASSIC_WORDS,
)
V1_FILLER_PHRASES = _lines(vocabulary.VALE_PHRASES, vocabulary.ANTISLOP_PHRASES, vocabulary.CLASSIC_PHRASES)

# "Direct-answer openings": interrogatives and question-forming auxiliaries. A heading that starts with one names the
# question its section answers ("How to price a pilot", "What changed in 2025") even without a "?", and that question
# form is what answer engines match user queries against (AEO). A heading ending in "?" counts whatever its first word.
V1_H2_OPENINGS = [
    "How",
    "What",
    "Why",
    "When",
    "Where",
    "Which",
    "Who",
    "Whose",
    "Can",
    "Could",
    "Should",
    "Would",
    "Will",
    "Is",
    "Are",
    "Do",
    "Does",
    "Did",
]


# --- the document ---------------------------------------------------------------------------------------------------
class _Strict(BaseModel):
    # A typo in an admin's JSON is an error, not a silently ignored key.
    model_config = ConfigDict(extra="forbid")


class _TermsRule(_Strict):
    severity: Literal["fatal"] = "fatal"
    terms: list[str] = Field(default_factory=list)

    @field_validator("terms")
    @classmethod
    def _normalize(cls, terms: list[str]) -> list[str]:
        return _normalized_terms(terms)


class BannedWordsRule(_TermsRule):
    """AI-tell words, whole-word and case-insensitive. There is no honest mechanical rewrite of a word, so: fatal."""

    terms: list[str] = Field(default_factory=lambda: list(V1_BANNED_WORDS))


class FillerPhrasesRule(_TermsRule):
    """Filler and cliché phrases, matched like words. Fatal for the same reason as banned words."""

    terms: list[str] = Field(default_factory=lambda: list(V1_FILLER_PHRASES))


class BannedCharacter(_Strict):
    sequence: str = Field(min_length=1)
    name: str
    substitute: str


class BannedCharactersRule(_Strict):
    """Characters that mark machine prose. Fixable: the repair swaps each for its substitute."""

    severity: Severity = "fixable"
    characters: list[BannedCharacter] = Field(
        default_factory=lambda: [
            BannedCharacter(sequence="\u2014", name="em dash", substitute=", "),
            BannedCharacter(sequence="--", name="double hyphen", substitute=", "),
        ]
    )

    @model_validator(mode="after")
    def _substitutes_are_clean(self) -> BannedCharactersRule:
        # A substitute holding a banned sequence would make the repair produce the finding it fixes.
        sequences = [c.sequence for c in self.characters]
        if len(set(sequences)) != len(sequences):
            raise ValueError("each banned character may be listed once")
        for character in self.characters:
            if any(sequence in character.substitute for sequence in sequences):
                raise ValueError(f"the substitute for {character.sequence!r} contains a banned character")
        return self


class H2Rule(_Strict):
    """At least `min_ratio` of the H2s are questions or start with a direct-answer opening. Rephrasing a heading is
    writing, not a mechanical fix: fatal. Fewer than `min_count` H2s is its own finding (`h2_missing`)."""

    severity: Literal["fatal"] = "fatal"
    min_ratio: float = Field(0.8, ge=0.0, le=1.0)
    min_count: int = Field(1, ge=0)
    openings: list[str] = Field(default_factory=lambda: list(V1_H2_OPENINGS))

    @field_validator("openings")
    @classmethod
    def _strip_openings(cls, openings: list[str]) -> list[str]:
        cleaned = [_WHITESPACE.sub(" ", o).strip() for o in openings]
        if not all(cleaned):
            raise ValueError("an opening may not be empty")
        return cleaned


class InternalLinksRule(_Strict):
    """At least `minimum` distinct sibling articles linked as `[text](pattern)`. Fixable: the repair adds a
    related-reading line with the most similar articles not yet linked."""

    severity: Severity = "fixable"
    pattern: str = "/writing/{slug}"
    minimum: int = Field(2, ge=0)
    related_reading_label: str = "Related reading"

    @field_validator("pattern")
    @classmethod
    def _pattern_has_one_slug(cls, pattern: str) -> str:
        if pattern.count(_SLUG_PLACEHOLDER) != 1 or not pattern.startswith("/"):
            raise ValueError("the pattern is a site path holding {slug} once, e.g. /writing/{slug}")
        return pattern

    def href_for(self, slug: str) -> str:
        return self.pattern.replace(_SLUG_PLACEHOLDER, slug)


class RequiredComponent(_Strict):
    """An MDX component the article must use, the snippet the repair inserts, and where it goes."""

    name: str
    template: str
    placement: Placement

    @model_validator(mode="after")
    def _template_uses_component(self) -> RequiredComponent:
        if not _COMPONENT_NAME.fullmatch(self.name):
            raise ValueError(f"{self.name!r} is not a JSX component name")
        # Otherwise the repair would insert a snippet that does not satisfy the check.
        if not re.search(rf"<{self.name}(?=[\s/>])", self.template):
            raise ValueError(f"the template for {self.name} must contain <{self.name}")
        return self


class ComponentsRule(_Strict):
    """Components that must appear outside code. Fixable: the repair inserts the template. The v1 templates are
    self-closing so the site fills them: a repair never writes prose into the article."""

    severity: Severity = "fixable"
    required: list[RequiredComponent] = Field(
        default_factory=lambda: [
            RequiredComponent(
                name="ArticleCallout", template='<ArticleCallout variant="summary" />', placement="after_first_section"
            ),
            RequiredComponent(
                name="ArticleCaseStudyCallout", template="<ArticleCaseStudyCallout />", placement="before_last_section"
            ),
            RequiredComponent(name="ArticleCta", template="<ArticleCta />", placement="end"),
        ]
    )

    @field_validator("required")
    @classmethod
    def _names_unique(cls, required: list[RequiredComponent]) -> list[RequiredComponent]:
        names = [c.name for c in required]
        if len(set(names)) != len(names):
            raise ValueError("each component may be required once")
        return required


class CitationRule(_Strict):
    """At least `minimum` of the draft's submitted source URLs appear in the body (as a link or bare). With no sources
    submitted the rule has nothing to check unless `require_sources`. A citation cannot be invented: fatal."""

    severity: Literal["fatal"] = "fatal"
    minimum: int = Field(1, ge=0)
    require_sources: bool = False


class ProofPointRule(_Strict):
    """When the org has facts, at least `minimum` of their proof terms are referenced. Fatal."""

    severity: Literal["fatal"] = "fatal"
    minimum: int = Field(1, ge=0)


class RepairSwitches(_Strict):
    """Repair on/off per fixable finding code. Only fixable findings are ever repaired."""

    banned_character: bool = True
    internal_links_missing: bool = True
    component_missing: bool = True

    def allows(self, code: str) -> bool:
        return code in type(self).model_fields and bool(getattr(self, code))


class DraftRules(_Strict):
    """The rules document of a draft criteria version. `DraftRules()` is the seeded v1."""

    schema_version: Literal[1] = 1
    banned_words: BannedWordsRule = Field(default_factory=BannedWordsRule)
    filler_phrases: FillerPhrasesRule = Field(default_factory=FillerPhrasesRule)
    banned_characters: BannedCharactersRule = Field(default_factory=BannedCharactersRule)
    h2: H2Rule = Field(default_factory=H2Rule)
    internal_links: InternalLinksRule = Field(default_factory=InternalLinksRule)
    components: ComponentsRule = Field(default_factory=ComponentsRule)
    citation: CitationRule = Field(default_factory=CitationRule)
    proof_points: ProofPointRule = Field(default_factory=ProofPointRule)
    threshold: float = Field(7.0, ge=1.0, le=10.0)
    band: float = Field(0.5, ge=0.0, le=9.0)
    max_judge_issues: int = Field(5, ge=0, le=50)
    repair: RepairSwitches = Field(default_factory=RepairSwitches)

    @field_validator("band")
    @classmethod
    def _band_below_threshold(cls, band: float, info: ValidationInfo) -> float:
        # The marginal band is [threshold - band, threshold): it has to start on the 1-10 scale. Reported on the
        # band, where an editor shows it (a threshold that failed its own check is reported there instead).
        threshold = info.data.get("threshold")
        if threshold is not None and threshold - band < 1.0:
            raise ValueError(
                f"must be below the threshold and leave the band's start on the 1-10 scale: at most "
                f"{threshold - 1:g} with threshold {threshold:g}"
            )
        return band


def default_rules() -> DraftRules:
    """The seeded v1 rules."""
    return DraftRules()


# --- validating an edit ---------------------------------------------------------------------------------------------
class RulesInvalid(ValueError):
    """A rules document an editor may not save. `errors` maps a field's path in the document ("banned_words.terms",
    "components.required.1.template", "band"; "" for the whole document) to what is wrong with it."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        super().__init__("; ".join(f"{path or 'rules'}: {' '.join(messages)}" for path, messages in errors.items()))
        self.errors = errors


# Characters that cannot stand in a Markdown link destination written as [text](pattern).
_LINK_BREAKERS = re.compile(r"[\s()<>\[\]`]")


def rules_validate(document: object) -> DraftRules:
    """The rules document an editor asked to save, or RulesInvalid naming each field that is wrong.

    1. The edit checks, on the document as given (before terms are normalised, which would hide duplicates): an
       empty required list, an entry listed twice, an entry the matcher can never match, a link pattern that does
       not compile into a link, a banned character without a name.
    2. The document's own validation (types, ranges, the band under the threshold, component templates, ...),
       except where step 1 already said what is wrong with that field.
    Reading a stored version (`DraftRules.model_validate`) applies only step 2, so a published version stays
    readable whatever later editors are asked to check.
    """
    edit_errors = _edit_errors(document) if isinstance(document, dict) else {}
    try:
        rules = DraftRules.model_validate(document)
    except ValidationError as exc:
        errors = edit_errors | {
            path: messages
            for path, messages in rules_field_errors(exc).items()
            if not any(_within(edited, path) for edited in edit_errors)
        }
        raise RulesInvalid(errors) from None
    if edit_errors:
        raise RulesInvalid(edit_errors)
    return rules


def _within(path: str, ancestor: str) -> bool:
    return path == ancestor or path.startswith(ancestor + ".") or ancestor == ""


def rules_field_errors(exc: ValidationError) -> dict[str, list[str]]:
    """Pydantic's errors as messages per field path, in words an editor can act on."""
    errors: dict[str, list[str]] = {}
    for error in exc.errors():
        path = ".".join(str(part) for part in error["loc"])
        messages = errors.setdefault(path, [])
        message = _message(error)
        if message not in messages:
            messages.append(message)
    return errors


def _message(error: dict) -> str:
    context = error.get("ctx") or {}
    match error["type"]:
        case "greater_than_equal":
            return f"must be at least {context['ge']:g}"
        case "less_than_equal":
            return f"must be at most {context['le']:g}"
        case "extra_forbidden":
            return "is not a field of the rules document"
        case "float_parsing" | "float_type":
            return "must be a number"
        case "bool_parsing" | "bool_type":
            return "must be true or false"
    return editor_reason(error)


def _edit_errors(document: dict) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    # Both vocabulary lists are required: emptied, their checks would silently check nothing.
    for section, noun in (("banned_words", "banned word"), ("filler_phrases", "filler phrase")):
        terms = _section(document, section).get("terms")
        if isinstance(terms, list):
            _list_errors(errors, f"{section}.terms", terms, noun, required=True)
    openings = _section(document, "h2").get("openings")
    if isinstance(openings, list):
        _list_errors(errors, "h2.openings", openings, "heading opening", required=False)
    characters = _section(document, "banned_characters").get("characters")
    if isinstance(characters, list):
        _character_errors(errors, characters)
    required = _section(document, "components").get("required")
    if isinstance(required, list):
        names = [c.get("name") if isinstance(c, dict) else None for c in required]
        for index, name in enumerate(names):
            if isinstance(name, str) and name and names.index(name) < index:
                errors.setdefault(f"components.required.{index}.name", []).append(f"{name} is required twice")
    pattern = _section(document, "internal_links").get("pattern")
    if isinstance(pattern, str):
        _pattern_errors(errors, pattern)
    _vocabulary_depth_errors(errors, document)
    return errors


# The checks find every vocabulary entry in one scan whose work at each character grows with the number of entries
# ending there. Entries that end inside each other ("a", "aa", "aaa", ...) would make that work per character as
# large as their number; a term longer than any word or phrase makes the check that no entry ends inside it dear.
MAX_TERM_LENGTH = 100
MAX_ENTRIES_ENDING_ALIKE = 8


def _vocabulary_depth_errors(errors: dict[str, list[str]], document: dict) -> None:
    entries: dict[str, str] = {}  # the entry as the matcher reads it -> the field it is listed under
    for section in ("banned_words", "filler_phrases"):
        terms = _section(document, section).get("terms")
        for term in terms if isinstance(terms, list) else []:
            if not isinstance(term, str):
                continue
            if len(term.strip()) > MAX_TERM_LENGTH:
                errors.setdefault(f"{section}.terms", []).append(
                    f"{term.strip()[:40]!r}... is longer than {MAX_TERM_LENGTH} characters."
                )
            else:
                entries.setdefault(normalize_term(term).lower(), f"{section}.terms")
    characters = _section(document, "banned_characters").get("characters")
    for character in characters if isinstance(characters, list) else []:
        sequence = character.get("sequence") if isinstance(character, dict) else None
        if isinstance(sequence, str) and 0 < len(sequence) <= MAX_TERM_LENGTH:
            entries.setdefault(sequence.lower(), "banned_characters.characters")
    for entry, path in entries.items():
        ending_alike = [entry[start:] for start in range(len(entry)) if entry[start:] in entries]
        if len(ending_alike) > MAX_ENTRIES_ENDING_ALIKE:
            shown = ", ".join(repr(other) for other in sorted(ending_alike, key=len)[:4])
            errors.setdefault(path, []).append(
                f"{len(ending_alike)} entries end the same way as {entry!r} ({shown}, ...): at most "
                f"{MAX_ENTRIES_ENDING_ALIKE} may, or every check of a draft slows by as many times."
            )
            return


def _section(document: dict, name: str) -> dict:
    section = document.get(name)
    return section if isinstance(section, dict) else {}


def _list_errors(errors: dict[str, list[str]], path: str, entries: list, noun: str, *, required: bool) -> None:
    """Entries as an editor typed them: an empty required list, duplicates (as the matcher reads them: any case,
    either apostrophe, any run of spaces) and entries with no letter or digit, which can never be matched as a
    whole word (punctuation belongs under banned characters)."""
    messages: list[str] = []
    if required and not entries:
        messages.append(f"List at least one {noun}: an empty list would switch this check off.")
    seen: dict[str, str] = {}
    for entry in entries:
        if not isinstance(entry, str):
            continue  # the document's own validation names the type
        key = normalize_term(entry)
        if key and not any(char.isalnum() for char in key):
            messages.append(
                f"{entry.strip()!r} has no letter or digit, so it can never be matched as a {noun}"
                + (" (list punctuation under banned characters)." if noun != "heading opening" else ".")
            )
        elif key in seen:
            messages.append(f"{entry.strip()!r} is listed twice (as {seen[key]!r} too).")
        elif key:
            seen[key] = entry.strip()
    if messages:
        errors.setdefault(path, []).extend(messages)


def _character_errors(errors: dict[str, list[str]], characters: list) -> None:
    seen: set[str] = set()
    for index, character in enumerate(characters):
        if not isinstance(character, dict):
            continue
        sequence, name = character.get("sequence"), character.get("name")
        path = f"banned_characters.characters.{index}"
        if isinstance(sequence, str) and sequence:
            if not sequence.strip():
                errors.setdefault(f"{path}.sequence", []).append(
                    "Whitespace can never be a banned character: prose reads every run of it as one space."
                )
            elif any(char.isalnum() for char in sequence):
                errors.setdefault(f"{path}.sequence", []).append(
                    f"{sequence!r} has letters or digits: list words under banned words."
                )
            elif sequence.lower() in seen:
                errors.setdefault(f"{path}.sequence", []).append(f"{sequence!r} is listed twice.")
            seen.add(sequence.lower())
        if isinstance(name, str) and not name.strip():
            errors.setdefault(f"{path}.name", []).append("Give it a name: the finding says it.")


def _pattern_errors(errors: dict[str, list[str]], pattern: str) -> None:
    """The pattern compiles into the link the checks look for, `[text](pattern)` with {slug} a slug: nothing in it
    may end the link's destination, and {slug} is its only placeholder."""
    problems = []
    if _LINK_BREAKERS.search(pattern):
        problems.append("it may not contain spaces, brackets, parentheses or backticks, which end a Markdown link")
    rest = pattern.replace(_SLUG_PLACEHOLDER, "")
    if "{" in rest or "}" in rest:
        problems.append("{slug} is the only placeholder it may hold")
    if problems:
        errors.setdefault("internal_links.pattern", []).append(
            "The pattern does not compile into a link: " + "; ".join(problems) + "."
        )


# --- the writer's copy ----------------------------------------------------------------------------------------------
def rules_as_text(rules: DraftRules) -> str:
    """The rules as plain text for a writer prompt: the same document the checks enforce, so one source serves both."""
    sections = [
        "Rules for this article. Drafts that break a rule marked (fatal) are rejected; (fixable) ones are patched "
        "automatically, but it is better to get them right. Fenced code blocks and inline code are not checked "
        "for words or characters.",
        *_vocabulary_lines(rules),
        *_structure_lines(rules),
        *_evidence_lines(rules),
    ]
    return "\n\n".join(section for section in sections if section) + "\n"


def _vocabulary_lines(rules: DraftRules) -> list[str]:
    lines = []
    if rules.banned_words.terms:
        lines.append(
            f"Banned words ({rules.banned_words.severity}). Never use these words, in any capitalisation. Only the "
            "exact word is banned: other forms are allowed unless listed.\n" + ", ".join(rules.banned_words.terms)
        )
    if rules.filler_phrases.terms:
        lines.append(
            f"Filler phrases ({rules.filler_phrases.severity}). Never use these phrases:\n"
            + "\n".join(f"- {phrase}" for phrase in rules.filler_phrases.terms)
        )
    if rules.banned_characters.characters:
        characters = "\n".join(
            f'- "{c.sequence}" ({c.name}): write "{c.substitute}" or restructure the sentence'
            for c in rules.banned_characters.characters
        )
        lines.append(f"Banned characters ({rules.banned_characters.severity}):\n{characters}")
    return lines


def _structure_lines(rules: DraftRules) -> list[str]:
    lines = []
    h2 = rules.h2
    if h2.min_ratio > 0 or h2.min_count > 0:
        lines.append(
            f"Headings ({h2.severity}). Use at least {h2.min_count} H2 heading(s) (`## `). At least "
            f"{h2.min_ratio:.0%} of the H2s must be questions (ending in '?') or start with one of: "
            f"{', '.join(h2.openings)}."
        )
    links = rules.internal_links
    if links.minimum > 0:
        lines.append(
            f"Internal links ({links.severity}). Link at least {links.minimum} different articles of ours as "
            f"Markdown links: [descriptive text]({links.pattern})."
        )
    if rules.components.required:
        components = "\n".join(f"- {c.name}, e.g. {c.template}" for c in rules.components.required)
        lines.append(
            f"Components ({rules.components.severity}). Use each of these MDX components, outside code:\n{components}"
        )
    return lines


def _evidence_lines(rules: DraftRules) -> list[str]:
    lines = []
    if rules.citation.minimum > 0:
        lines.append(
            f"Citations ({rules.citation.severity}). Cite at least {rules.citation.minimum} of the source URLs you "
            "were given, as a link in the body."
        )
    if rules.proof_points.minimum > 0:
        lines.append(
            f"Proof points ({rules.proof_points.severity}). When the organisation's facts are provided, reference at "
            f"least {rules.proof_points.minimum} of them by name or figure."
        )
    return lines

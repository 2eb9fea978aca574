"""Deterministic checks of a draft against the rules of its criteria version. Pure Python: no Django.

The checks state facts the judge may not overrule, so they must be exact about what counts as writing. A draft is
read once (grading/checks/structure.py) as a reader sees it. Words, phrases and banned characters are then found
in one pass of an Aho-Corasick automaton over the lower-cased prose, followed by a whole-word test (rules.py states
the semantics).

One finding per rule and distinct term, carrying every span of that term: the UI highlights them all, and the
dashboard counts a term once per draft.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Literal
from urllib.parse import unquote

import ahocorasick

from grading.checks.budget import checkpoint
from grading.checks.prose import is_word_char
from grading.checks.rules import DraftRules, InternalLinksRule, Severity, normalize_term
from grading.checks.structure import (
    DraftStructure,
    Span,
    is_question_heading,
    lowered_for_matching,
    parse_draft,
)

BANNED_WORD = "banned_word"
FILLER_PHRASE = "filler_phrase"
BANNED_CHARACTER = "banned_character"
H2_MISSING = "h2_missing"
H2_NOT_QUESTION = "h2_not_question"
INTERNAL_LINKS_MISSING = "internal_links_missing"
COMPONENT_MISSING = "component_missing"
CITATION_MISSING = "citation_missing"
PROOF_POINT_MISSING = "proof_point_missing"
FINDING_CODES = (
    BANNED_WORD,
    FILLER_PHRASE,
    BANNED_CHARACTER,
    H2_MISSING,
    H2_NOT_QUESTION,
    INTERNAL_LINKS_MISSING,
    COMPONENT_MISSING,
    CITATION_MISSING,
    PROOF_POINT_MISSING,
)


@dataclass(frozen=True)
class Finding:
    """A broken rule. `spans` are character offsets into the checked body; `subject` names what the finding is about
    (the term, the character, the component) so findings can be counted across drafts."""

    code: str
    message: str
    severity: Severity
    spans: tuple[Span, ...] = ()
    subject: str = ""

    def as_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "message": self.message,
            "severity": self.severity,
            "spans": [list(span) for span in self.spans],
            "subject": self.subject,
        }


# --- vocabulary -----------------------------------------------------------------------------------------------------
Kind = Literal["word", "phrase", "character"]


@dataclass(frozen=True)
class _Entry:
    kind: Kind
    term: str  # the configured term or character sequence
    length: int  # of the matched key (an entity for a character can be longer than the character)
    bounded_left: bool
    bounded_right: bool


class VocabularyMatcher:
    """Every banned word, filler phrase and banned character of a rules document in one Aho-Corasick automaton."""

    def __init__(self, words: Sequence[str], phrases: Sequence[str], characters: Sequence[str]) -> None:
        keyed: dict[str, list[_Entry]] = {}
        for kind, terms in (("word", words), ("phrase", phrases)):
            for term in terms:
                entry = _Entry(kind, term, len(term), is_word_char(term[0]), is_word_char(term[-1]))  # type: ignore[arg-type]
                keyed.setdefault(term, []).append(entry)
        for sequence in characters:
            for key in _character_keys(sequence):
                keyed.setdefault(key, []).append(_Entry("character", sequence, len(key), False, False))
        self._automaton = ahocorasick.Automaton()
        for key, entries in keyed.items():
            self._automaton.add_word(key, tuple(entries))
        self._empty = not keyed
        if not self._empty:
            self._automaton.make_automaton()

    def scan(self, prose: str, haystack: str | None = None) -> dict[tuple[Kind, str], list[Span]]:
        """Spans per (kind, term) in the order found. A term's matches never overlap (leftmost first, as a regex
        scan would report them); touching or overlapping occurrences of a character merge into one span.
        `haystack` is `lowered_for_matching(prose)` when the caller already has it."""
        found: dict[tuple[Kind, str], list[Span]] = {}
        if self._empty:
            return found
        for last, entries in self._automaton.iter(lowered_for_matching(prose) if haystack is None else haystack):
            for entry in entries:
                start, end = last - entry.length + 1, last + 1
                if entry.bounded_left and start > 0 and is_word_char(prose[start - 1]):
                    continue
                if entry.bounded_right and end < len(prose) and is_word_char(prose[end]):
                    continue
                spans = found.setdefault((entry.kind, entry.term), [])
                if spans and start < spans[-1][1]:
                    if entry.kind == "character":
                        spans[-1] = (spans[-1][0], max(end, spans[-1][1]))
                    continue
                if spans and entry.kind == "character" and start == spans[-1][1]:
                    spans[-1] = (spans[-1][0], end)
                    continue
                spans.append((start, end))
        return found


def _character_keys(sequence: str) -> list[str]:
    """A banned character as matched: references that render as it (`&mdash;`) are decoded in the visible prose."""
    return [sequence.lower()]


# Built once in a process: a version's drafts' vocabulary, and each phrase rule of its conversation checks.
@lru_cache(maxsize=128)
def _matcher(words: tuple[str, ...], phrases: tuple[str, ...], characters: tuple[str, ...]) -> VocabularyMatcher:
    return VocabularyMatcher(words, phrases, characters)


def vocabulary_matcher(rules: DraftRules) -> VocabularyMatcher:
    """The (cached) matcher of a rules document."""
    return _matcher(
        tuple(rules.banned_words.terms),
        tuple(rules.filler_phrases.terms),
        tuple(c.sequence for c in rules.banned_characters.characters),
    )


def phrase_matcher(phrases: tuple[str, ...]) -> VocabularyMatcher:
    """The (cached) matcher of normalised phrases (`rules.normalize_term`), matched as a draft's filler phrases are:
    whole words, in any case (a conversation rule's phrases: grading/checks/conversation_rules.py)."""
    return _matcher((), phrases, ())


# --- the checks -----------------------------------------------------------------------------------------------------
def check_draft(*, body: str, rules: DraftRules, source_urls: list[str], proof_terms: list[str]) -> list[Finding]:
    """Every broken rule of `rules` in `body`, in rule order: vocabulary, characters, headings, links, components,
    citations, proof points. Spans are offsets into `body` as given, whatever its line endings."""
    structure = parse_draft(unix_newlines(body))
    checks: list[Callable[[], list[Finding]]] = [
        lambda: _vocabulary_findings(structure, rules),
        lambda: _h2_findings(structure, rules),
        lambda: _internal_link_findings(structure, rules),
        lambda: _component_findings(structure, rules),
        lambda: _citation_findings(structure, rules, source_urls),
        lambda: _proof_point_findings(structure, rules, proof_terms),
    ]
    findings: list[Finding] = []
    for check in checks:
        checkpoint()
        findings += check()
    return _spans_into(body, findings) if "\r\n" in body else findings


def unix_newlines(body: str) -> str:
    """The body with CRLF line ends as LF: a phrase broken across a CRLF line end is then one space apart, as it is
    across an LF one. Checks and repairs work on this form; `_spans_into` maps spans back."""
    return body.replace("\r\n", "\n")


def _spans_into(body: str, findings: list[Finding]) -> list[Finding]:
    """Findings on `unix_newlines(body)` with their spans moved to offsets into `body`: an offset moves by the number
    of CRLF line ends before it."""
    # Where each CRLF line end's "\n" sits in the LF form: every earlier CRLF lost its "\r".
    crlf_ends = [m.start() - earlier for earlier, m in enumerate(re.finditer("\r\n", body))]

    def moved(offset: int) -> int:
        return offset + bisect_left(crlf_ends, offset)

    return [replace(f, spans=tuple((moved(s), moved(e)) for s, e in f.spans)) for f in findings]


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _vocabulary_findings(structure: DraftStructure, rules: DraftRules) -> list[Finding]:
    found = vocabulary_matcher(rules).scan(structure.visible.text, structure.haystack)
    findings = []
    for (kind, term), visible_spans in sorted(found.items(), key=lambda item: (_KIND_ORDER[item[0][0]], item[1][0])):
        spans = structure.visible.body_spans(visible_spans)
        times = _plural(len(spans), "time")
        if kind == "word":
            message = f'"{term}" is a banned word ({times}): rewrite the sentence without it.'
            findings.append(Finding(BANNED_WORD, message, rules.banned_words.severity, tuple(spans), term))
        elif kind == "phrase":
            message = f'"{term}" is a filler phrase ({times}): cut it or say the concrete thing.'
            findings.append(Finding(FILLER_PHRASE, message, rules.filler_phrases.severity, tuple(spans), term))
        else:
            character = next(c for c in rules.banned_characters.characters if c.sequence == term)
            message = f'The {character.name} "{term}" is banned ({times}): write "{character.substitute}" instead.'
            findings.append(Finding(BANNED_CHARACTER, message, rules.banned_characters.severity, tuple(spans), term))
    return findings


_KIND_ORDER: dict[str, int] = {"word": 0, "phrase": 1, "character": 2}


def _h2_findings(structure: DraftStructure, rules: DraftRules) -> list[Finding]:
    rule, h2s = rules.h2, structure.h2s
    if len(h2s) < rule.min_count:
        message = f"The draft has {_plural(len(h2s), 'H2 heading')}; at least {rule.min_count} required."
        return [Finding(H2_MISSING, message, rule.severity)]
    if not h2s:
        return []
    offending = [h2 for h2 in h2s if not is_question_heading(h2.text, rule.openings)]
    questions = len(h2s) - len(offending)
    if questions / len(h2s) >= rule.min_ratio:
        return []
    examples = ", ".join(f'"{h2.text}"' for h2 in offending[:5])
    message = (
        f"{questions} of {len(h2s)} H2s ({questions / len(h2s):.0%}) are questions or start with a direct-answer "
        f"opening; at least {rule.min_ratio:.0%} must be. Rephrase: {examples}."
    )
    return [Finding(H2_NOT_QUESTION, message, rule.severity, tuple(h2.span for h2 in offending))]


def internal_link_slugs(structure: DraftStructure, rule: InternalLinksRule) -> list[str]:
    """Distinct slugs of the sibling articles the draft links to, in order of first link."""
    pattern = _internal_link_pattern(rule.pattern)
    slugs = (m.group("slug") for href in structure.link_hrefs if (m := pattern.match(href)))
    return list(dict.fromkeys(slugs))


@lru_cache(maxsize=16)
def _internal_link_pattern(pattern: str) -> re.Pattern[str]:
    prefix, suffix = pattern.split("{slug}")
    return re.compile(
        rf"^{re.escape(prefix)}(?P<slug>[A-Za-z0-9][A-Za-z0-9_-]*){re.escape(suffix)}/?(?:[?#].*)?$", re.DOTALL
    )


def _internal_link_findings(structure: DraftStructure, rules: DraftRules) -> list[Finding]:
    rule = rules.internal_links
    linked = internal_link_slugs(structure, rule)
    if len(linked) >= rule.minimum:
        return []
    message = (
        f"{_plural(len(linked), 'internal link')} to distinct articles ({rule.pattern}); "
        f"at least {rule.minimum} required."
    )
    return [Finding(INTERNAL_LINKS_MISSING, message, rule.severity)]


def _component_findings(structure: DraftStructure, rules: DraftRules) -> list[Finding]:
    rule = rules.components
    return [
        Finding(COMPONENT_MISSING, f"The <{c.name}> component is missing (outside code).", rule.severity, (), c.name)
        for c in rule.required
        if c.name not in structure.components
    ]


_URL_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*://", re.IGNORECASE)


def url_key(url: str) -> str:
    """A URL as compared for citations: no scheme, no `www.`, no fragment, no trailing slash, lower-case host."""
    bare = _URL_SCHEME.sub("", unquote(url.strip())).split("#", 1)[0]
    host, slash, path = bare.partition("/")
    path = path.rstrip("/")
    return host.lower().removeprefix("www.") + (slash + path if path else "")


def _citation_findings(structure: DraftStructure, rules: DraftRules, source_urls: list[str]) -> list[Finding]:
    rule = rules.citation
    sources = list(dict.fromkeys(url_key(url) for url in source_urls if url.strip()))
    if not sources:
        if rule.require_sources and rule.minimum > 0:
            message = "No source URLs were submitted with the draft; the rules require cited sources."
            return [Finding(CITATION_MISSING, message, rule.severity)]
        return []
    required = min(rule.minimum, len(sources))
    cited = {url_key(url) for url in structure.urls} & set(sources)
    if len(cited) >= required:
        return []
    message = (
        f"{_plural(len(cited), 'submitted source')} cited in the body; at least {required} of these required: "
        + ", ".join(url for url in source_urls if url.strip())
    )
    return [Finding(CITATION_MISSING, message, rule.severity)]


def proof_terms_referenced(body: str, proof_terms: list[str]) -> list[str]:
    """The proof terms (customer names, figures) the body's prose references: case-insensitive, whole words where a
    term's edge is a word character ("42%" needs no boundary after the "%"). Code and URLs do not count."""
    return _referenced(parse_draft(unix_newlines(body)), proof_terms)


def _referenced(structure: DraftStructure, proof_terms: list[str]) -> list[str]:
    terms = [term for term in dict.fromkeys(proof_terms) if normalize_term(term)]
    if not terms:
        return []
    matcher = _matcher(tuple(dict.fromkeys(normalize_term(t) for t in terms)), (), ())
    found = matcher.scan(structure.visible.text, structure.haystack)
    return [term for term in terms if ("word", normalize_term(term)) in found]


def _proof_point_findings(structure: DraftStructure, rules: DraftRules, proof_terms: list[str]) -> list[Finding]:
    rule = rules.proof_points
    terms = [term for term in dict.fromkeys(proof_terms) if normalize_term(term)]
    if not terms or rule.minimum == 0:
        return []
    required = min(rule.minimum, len(terms))
    referenced = _referenced(structure, terms)
    if len(referenced) >= required:
        return []
    examples = ", ".join(f'"{term}"' for term in terms[:5])
    message = (
        f"{_plural(len(referenced), 'org proof point')} referenced; at least {required} required (for example "
        f"{examples})."
    )
    return [Finding(PROOF_POINT_MISSING, message, rule.severity)]

"""Deterministic checks of a draft against the rules of its criteria version (DESIGN 5.1). Pure Python: no Django.

The checks state facts the judge may not overrule, so they must be exact about what counts as writing. A draft is
parsed once (`parse_draft`): markdown-it gives the block structure (fences, headings, tables, HTML/JSX blocks) and the
links; the prose (`DraftStructure.prose`) is the body with everything that is not writing masked by spaces, same
length, so every span found in the prose is a span of the body. Words, phrases and banned characters are then found
in one pass of an Aho-Corasick automaton over the lower-cased prose, followed by a whole-word test (rules.py states
the semantics).

One finding per rule and distinct term, carrying every span of that term: the UI highlights them all, and the
dashboard counts a term once per draft.
"""

from __future__ import annotations

import re
import threading
import time
import unicodedata
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from typing import Any, Literal
from urllib.parse import unquote

import ahocorasick
from markdown_it import MarkdownIt
from markdown_it.common.utils import normalizeReference
from markdown_it.token import Token

from grading.drafts.prose import HTML_COMMENT, MDX_COMMENT, VisibleProse, comment_spans, is_word_char, visible_prose
from grading.drafts.rules import DraftRules, InternalLinksRule, Severity, normalize_term

Span = tuple[int, int]

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


# --- structure ------------------------------------------------------------------------------------------------------
# MDX has no indented code blocks (indentation is for JSX children), so neither do we: indented text is prose.
_BLOCKS = MarkdownIt("commonmark").enable("table").disable("code")
_BLOCKS.core.ruler.disable("inline")  # inline parsing is done only where it can find something (_inline_children)
_INLINE = MarkdownIt("commonmark").enable("table").disable("code")
# Links only: emphasis, entities and line breaks cannot make or unmake a link, so those rules are not run.
_LINKS = MarkdownIt("commonmark").disable(["code", "emphasis", "newline", "entity", "text_join"])

_NEWLINE = re.compile(r"\r\n?|\n")
_NOT_NEWLINE = re.compile(r"[^\r\n]")
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n.*?^(?:---|\.\.\.)[ \t]*$", re.DOTALL | re.MULTILINE)
_BACKTICKS = re.compile(r"`+")
_HEADING_ID = re.compile(r"\{#[^{}\s]*\}")  # `{` is no part of an id: `{#{#{#...` would be retried to the end
_DESTINATION_MARK = re.compile(r"\\.|[()]|\n\n", re.DOTALL)  # an escape, a parenthesis, a blank line
_DESTINATION_LIMIT = 4096
_BRACKET = re.compile(r"\\.|!?\[|\]", re.DOTALL)  # an escape, a link (or image) text's opening, a closing
_AUTOLINK = re.compile(r"<(?:[A-Za-z][A-Za-z0-9+.-]{1,31}:[^\s<>]*|[^\s<>@]+@[^\s<>@]+)>")
_URL_MARK = re.compile(r"://|[Ww]{3}\.")  # search for what every URL holds, then read the URL around it
_URL_REST = re.compile(r"[^\s<>\"'`]*")
_URL_SCHEMES = frozenset({"http", "https", "ftp"})
_JSX_TAG = re.compile(r"<([A-Z][A-Za-z0-9]*)(?=[\s/>])")
_URL_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*://", re.IGNORECASE)


@dataclass(frozen=True)
class H2Heading:
    text: str  # the heading as read: inline markup, anchors, emoji and numbering removed
    span: Span  # the heading's source text in the body
    line_start: int  # where the heading's line starts: the insertion point in front of its section
    top_level: bool  # not inside a list, blockquote or JSX block


@dataclass(frozen=True)
class DraftStructure:
    """What the checks and repairs read from a body. `prose` has the body's length; non-prose is masked by spaces."""

    body: str
    prose: str
    code_spans: tuple[Span, ...]
    h2s: tuple[H2Heading, ...]
    link_hrefs: tuple[str, ...]  # Markdown link destinations outside code, in order
    urls: tuple[str, ...]  # every URL outside code: link destinations, autolinks, bare URLs
    components: Mapping[str, tuple[Span, ...]]  # JSX component tags outside code and comments, by name
    tail_start: int  # start of the trailing run of top-level component blocks (len(body) if there is none)
    link_syntax: tuple[Span, ...] = ()  # a link's brackets, destination and label: a reader sees only its text

    @cached_property
    def visible(self) -> VisibleProse:
        """The prose as a reader sees it (grading/drafts/prose.py), with the map back to the body: vocabulary is read
        here."""
        return visible_prose(self.body, self.prose, hidden=self.link_syntax)

    @cached_property
    def haystack(self) -> str:
        """The visible prose lower-cased for matching (same length as it)."""
        return _haystack(self.visible.text)


def parse_draft(body: str) -> DraftStructure:
    """Parse a draft body once for every check, and once for every caller: the gate checks a body, the repairs
    read it, and each repaired body is read again by the next repair and by the second check. So each thread
    keeps its last few parses (a draft is graded on one thread; one cache shared by 32 grading threads lost them to
    the other threads' drafts, and a fifth of a draft's parses were repeats). A DraftStructure is immutable.
    """
    recent = _RECENT.parses
    if (structure := recent.get(body)) is not None:
        recent.move_to_end(body)
        return structure
    structure = recent[body] = _parse(body)
    if len(recent) > _RECENT_PARSES_KEPT:
        recent.popitem(last=False)
    return structure


class _RecentParses(threading.local):
    def __init__(self) -> None:  # runs once in each thread that reads `parses`
        self.parses: OrderedDict[str, DraftStructure] = OrderedDict()


_RECENT = _RecentParses()
_RECENT_PARSES_KEPT = 8


def _parse(body: str) -> DraftStructure:
    """What `parse_draft` returns, read afresh.

    1. Blank out front matter (metadata, not prose) and parse the blocks with markdown-it.
    2. Walk the blocks: fences are code; thematic breaks, table delimiter rows, setext underlines and reference
       definitions are syntax; heading, paragraph, table and JSX blocks are scanned for inline code spans.
    3. Mask the code, then find comments, link destinations and URLs in what is left, and mask those too.
    4. Read H2s, links and components from the blocks and the masked text.
    """
    line_starts = _line_starts(body)
    front_matter = _FRONT_MATTER.match(body)
    env: dict[str, Any] = {}
    tokens = _BLOCKS.parse(_masked(body, [front_matter.span()]) if front_matter else body, env)
    checkpoint()
    blocks = _walk_blocks(body, line_starts, tokens, env)
    code, syntax = blocks.code, [*([front_matter.span()] if front_matter else []), *blocks.syntax]

    code_masked = _masked(body, code)
    destinations = _link_destinations(code_masked) if "](" in code_masked else []
    bare_urls = _bare_url_spans(_masked(code_masked, destinations) if destinations else code_masked)
    checkpoint()
    links, urls = _links_and_urls(code_masked, blocks.inline, env, bare_urls)
    checkpoint()
    comments = [
        *comment_spans(code_masked, [HTML_COMMENT], unclosed_to_end=True),  # an HTML block runs on as CommonMark's
        *comment_spans(code_masked, [MDX_COMMENT]),
    ]
    prose = _masked(body, [*code, *syntax, *comments, *bare_urls, *destinations, *_non_prose_spans(code_masked)])
    commentless = _masked(code_masked, comments)
    return DraftStructure(
        body=body,
        prose=prose,
        code_spans=tuple(sorted(code)),
        h2s=tuple(_h2(body, line_starts, heading, inline, env) for heading, inline in blocks.h2s),
        link_hrefs=tuple(links),
        urls=tuple(urls),
        components=_components(commentless),
        tail_start=_tail_start(body, line_starts, tokens),
        link_syntax=tuple(_link_syntax(code_masked, destinations, env.get("references", {}))),
    )


@dataclass
class _Blocks:
    code: list[Span] = field(default_factory=list)  # fences and inline code spans
    syntax: list[Span] = field(default_factory=list)  # Markdown syntax lines that are not prose
    inline: list[Token] = field(default_factory=list)  # blocks whose text may hold links
    h2s: list[tuple[Token, Token]] = field(default_factory=list)  # (heading_open, its inline token)


def _walk_blocks(body: str, line_starts: list[int], tokens: list[Token], env: dict[str, Any]) -> _Blocks:
    """Fences are code; thematic breaks, table delimiter rows, setext underlines and reference definitions are
    syntax; heading, paragraph, table and JSX blocks are scanned for inline code spans."""
    blocks = _Blocks()
    for index, token in enumerate(tokens):
        if token.map is None:
            continue
        first, end = token.map
        if token.type == "fence":
            blocks.code.append(_line_range(line_starts, body, first, end))
        elif token.type == "hr":
            blocks.syntax.append(_line_range(line_starts, body, first, end))
        elif token.type in ("table_open", "paragraph_open", "heading_open", "html_block"):
            blocks.code.extend(_code_spans(body, *_line_range(line_starts, body, first, end)))
        if token.type == "table_open":
            blocks.syntax.append(_line_range(line_starts, body, first + 1, first + 2))
        if token.type == "heading_open":
            inline = tokens[index + 1]
            if token.markup in ("-", "=") and inline.map:  # setext: the underline is syntax
                blocks.syntax.append(_line_range(line_starts, body, inline.map[1], end))
            if token.tag == "h2":
                blocks.h2s.append((token, inline))
        if token.type in ("inline", "html_block"):
            blocks.inline.append(token)
    for reference in env.get("references", {}).values():
        if reference.get("map"):
            blocks.syntax.append(_line_range(line_starts, body, *reference["map"]))
    return blocks


def _line_starts(body: str) -> list[int]:
    # markdown-it counts lines after normalising \r\n and \r to \n; count them the same way.
    return [0, *(m.end() for m in _NEWLINE.finditer(body))]


def _line_range(line_starts: list[int], body: str, first: int, end: int) -> Span:
    """Offsets of lines [first, end), without the final line break."""
    start = line_starts[first] if first < len(line_starts) else len(body)
    stop = line_starts[end] if end < len(line_starts) else len(body)
    while stop > start and body[stop - 1] in "\r\n":
        stop -= 1
    return start, max(start, stop)


def _masked(text: str, spans: Iterable[Span]) -> str:
    """`text` with the spans replaced by spaces, line breaks kept so line numbers and offsets survive."""
    pieces, cursor = [], 0
    for start, end in sorted(spans):
        start = max(start, cursor)
        if end <= start:
            continue
        pieces.append(text[cursor:start])
        pieces.append(_NOT_NEWLINE.sub(" ", text[start:end]))
        cursor = end
    pieces.append(text[cursor:])
    return "".join(pieces)


def _code_spans(text: str, start: int, end: int) -> list[Span]:
    """CommonMark code spans in text[start:end] (one block): a backtick run opens, the next run of the same length
    closes (backslashes mean nothing inside code, so a closer is never escaped), an unmatched run is literal, and
    a backslash-escaped backtick is literal while the rest of its run may still open."""
    runs = [m.span() for m in _BACKTICKS.finditer(text, start, end)]
    spans: list[Span] = []
    i = 0
    while i < len(runs):
        open_start, open_end = runs[i]
        i += 1
        if _escaped(text, open_start):
            open_start += 1
        width = open_end - open_start
        closer = next((j for j in range(i, len(runs)) if runs[j][1] - runs[j][0] == width), None) if width else None
        if closer is not None:
            spans.append((open_start, runs[closer][1]))
            i = closer + 1
    return spans


def _escaped(text: str, index: int) -> bool:
    backslashes = 0
    while index - backslashes - 1 >= 0 and text[index - backslashes - 1] == "\\":
        backslashes += 1
    return backslashes % 2 == 1


def _non_prose_spans(code_masked: str) -> list[Span]:
    """Heading ids and autolinks: rendered as nothing, or not as words."""
    return [m.span() for pattern in (_HEADING_ID, _AUTOLINK) for m in pattern.finditer(code_masked)]


def _link_destinations(text: str) -> list[Span]:
    """Every parenthesised link destination (and title) after a `]`: from its `(` to the `)` that balances it,
    unless a blank line (the paragraph's end) or `_DESTINATION_LIMIT` characters come first. One pass matching
    parentheses on a stack, skipping escaped characters: scanning ahead from each `](` separately read the same
    characters again for every opener (`](` repeated is a quadratic input up to the limit).
    """
    spans: list[Span] = []
    open_parens: list[int] = []
    for mark in _DESTINATION_MARK.finditer(text):
        char, at = mark.group(), mark.start()
        if char == "(":
            open_parens.append(at)
        elif char == ")":
            if open_parens:
                start = open_parens.pop()
                if start > 0 and text[start - 1] == "]" and at - start < _DESTINATION_LIMIT:
                    spans.append((start, at + 1))
        elif char == "\n\n":
            open_parens.clear()  # a blank line ends the paragraph: an open parenthesis before it opened no link
    return spans


def _link_syntax(text: str, destinations: list[Span], references: Mapping[str, Any]) -> list[Span]:
    """What renders as nothing around a link's text: its `[`, and its `](destination)` or `][label]` (a label the
    draft defines, or `[]` after a text it defines). A reader sees `de[lve](/x)` and `[de][1]lve` as one word.
    One pass matching brackets on a stack; an image's `![alt](src)` is left as written (it shows no text).
    """
    destination_ends = {start: end for start, end in destinations}
    spans: list[Span] = []
    opens: list[int] = []
    for mark in _BRACKET.finditer(text):
        bracket, at = mark.group(), mark.start()
        if bracket in ("[", "!["):
            opens.append(-1 if bracket == "![" else at)
            continue
        if bracket != "]" or not opens:
            continue  # an escaped character, or a bracket that opens nothing
        start = opens.pop()
        if start < 0:
            continue
        syntax_end = destination_ends.get(at + 1) or _reference_end(text, start, at, references)
        if syntax_end is not None:
            spans += [(start, start + 1), (at, syntax_end)]
    return spans


def _reference_end(text: str, start: int, close: int, references: Mapping[str, Any]) -> int | None:
    """The end of `][label]` after the link text text[start + 1:close] when it makes a reference link."""
    if not references or not text.startswith("[", close + 1):
        return None
    label_end = text.find("]", close + 2, close + 2 + 1000)
    if label_end < 0 or "[" in text[close + 2 : label_end]:
        return None
    label = text[close + 2 : label_end] or text[start + 1 : close]
    return label_end + 1 if normalizeReference(label) in references else None


def _links_and_urls(
    code_masked: str, blocks: list[Token], env: dict[str, Any], bare_urls: list[Span]
) -> tuple[list[str], list[str]]:
    links = [
        child.attrs["href"]
        for block in blocks
        if "]" in block.content
        for child in _LINKS.parseInline(block.content, env)[0].children or []
        if child.type == "link_open" and isinstance(child.attrs.get("href"), str)
    ]
    autolinks = [m.group()[1:-1] for m in _AUTOLINK.finditer(code_masked)]
    return links, [*links, *autolinks, *(_trim_url(code_masked[start:end]) for start, end in bare_urls)]


def _bare_url_spans(text: str) -> list[Span]:
    """URLs written out in the text (`https://...`, `www....`), up to the next space, quote or angle bracket."""
    spans: list[Span] = []
    for mark in _URL_MARK.finditer(text):
        start = mark.start()
        if spans and start < spans[-1][1]:
            continue
        if mark.group() == "://":
            while start > 0 and text[start - 1].isascii() and text[start - 1].isalpha():
                start -= 1
            if text[start : mark.start()].lower() not in _URL_SCHEMES:
                continue
        if start > 0 and is_word_char(text[start - 1]):
            continue
        spans.append((start, _URL_REST.match(text, mark.end()).end()))  # type: ignore[union-attr]
    return spans


def _trim_url(url: str) -> str:
    # A bare URL at the end of a sentence or inside parentheses does not own the punctuation after it.
    url = url.rstrip(".,;:!?'\"")
    while url.endswith(")") and url.count("(") < url.count(")"):
        url = url[:-1]
    return url


def _components(commentless: str) -> dict[str, tuple[Span, ...]]:
    found: dict[str, list[Span]] = {}
    for m in _JSX_TAG.finditer(commentless):
        found.setdefault(m.group(1), []).append(m.span())
    return {name: tuple(spans) for name, spans in found.items()}


def _tail_start(body: str, line_starts: list[int], tokens: list[Token]) -> int:
    """Where the trailing top-level component blocks begin (`<ArticleCta />` at the end): text appended "at the end"
    of the article goes in front of them."""
    tail = len(body)
    for token in reversed([t for t in tokens if t.level == 0 and t.map is not None]):
        if token.type != "html_block" or not _JSX_TAG.match(token.content.lstrip()):
            break
        tail = _line_range(line_starts, body, token.map[0], token.map[1])[0]  # type: ignore[index]
    return tail


# --- H2 headings ----------------------------------------------------------------------------------------------------
_ENUMERATOR = re.compile(r"^\d+[.):]\s+")
_EMOJI_SHORTCODE = re.compile(r"^(?::[a-z0-9_+-]+:\s*)+|(?:\s*:[a-z0-9_+-]+:)+$")
_NOISE_CATEGORIES = frozenset({"So", "Sk", "Cf", "Mn", "Me", "Co", "Cs", "Zs"})
_CLOSING_PUNCTUATION = "\"'\u201d\u2019)]*_ "


def _h2(body: str, line_starts: list[int], heading: Token, inline: Token, env: dict) -> H2Heading:
    first = inline.map[0] if inline.map else heading.map[0]  # type: ignore[index]
    lines = inline.content.split("\n")
    line_start = _line_range(line_starts, body, first, first + 1)[0]
    start = body.find(lines[0], line_start) if lines[0] else line_start
    last_line_start = _line_range(line_starts, body, first + len(lines) - 1, first + len(lines))[0]
    end = body.find(lines[-1], last_line_start) + len(lines[-1])
    span = (start, end) if 0 <= start <= end else _line_range(line_starts, body, first, first + len(lines))
    text = heading_text(inline.content, env)
    return H2Heading(text=text, span=span, line_start=line_start, top_level=heading.level == 0)


def heading_text(source: str, env: dict | None = None) -> str:
    """A heading as a reader sees it: MDX anchors (`{/*anchor*/}`, `{#id}`), inline markup, leading numbering and
    emoji stripped. Anchors go before inline parsing because `*anchor*` would otherwise read as emphasis."""
    pieces, cursor = [], 0
    for start, end in comment_spans(source, [MDX_COMMENT]):
        pieces.append(source[cursor:start])
        cursor = end
    source = _HEADING_ID.sub(" ", " ".join([*pieces, source[cursor:]]))
    children = _INLINE.parseInline(source, env or {})[0].children or []
    text = "".join(
        child.content if child.type in ("text", "code_inline") else " " if child.type.endswith("break") else ""
        for child in children
    )
    text = _EMOJI_SHORTCODE.sub("", _strip_noise(text))
    return _ENUMERATOR.sub("", _strip_noise(text))


def _strip_noise(text: str) -> str:
    start, end = 0, len(text)
    while start < end and (text[start].isspace() or unicodedata.category(text[start]) in _NOISE_CATEGORIES):
        start += 1
    while end > start and (text[end - 1].isspace() or unicodedata.category(text[end - 1]) in _NOISE_CATEGORIES):
        end -= 1
    return text[start:end]


def is_question_heading(text: str, openings: Sequence[str]) -> bool:
    """A question ("...?") or a heading that starts with a direct-answer opening, as a whole word."""
    if text.rstrip(_CLOSING_PUNCTUATION).endswith("?"):
        return True
    lowered = text.lower()
    for opening in openings:
        opening = opening.lower()
        if lowered.startswith(opening) and not is_word_char(lowered[len(opening) : len(opening) + 1]):
            return True
    return False


# --- vocabulary -----------------------------------------------------------------------------------------------------
Kind = Literal["word", "phrase", "character"]
# Typographic apostrophes read as "'"; a line break (or tab, or no-break space) inside a phrase reads as a space.
_HAYSTACK_FOLDS = (("\u2019", "'"), ("\u2018", "'"), ("\n", " "), ("\r", " "), ("\t", " "), ("\u00a0", " "))


def _haystack(prose: str) -> str:
    """Lower-cased prose of the same length: offsets found in it are offsets in the body."""
    lowered = prose.lower()
    if len(lowered) != len(prose):  # a few characters lower-case to two ("İ"): leave those as they are
        lowered = "".join(c.lower() if len(c.lower()) == 1 else c for c in prose)
    for folded, reading in _HAYSTACK_FOLDS:  # str.replace per character beats str.translate with a dict tenfold
        if folded in lowered:
            lowered = lowered.replace(folded, reading)
    return lowered


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
        `haystack` is `_haystack(prose)` when the caller already has it."""
        found: dict[tuple[Kind, str], list[Span]] = {}
        if self._empty:
            return found
        for last, entries in self._automaton.iter(_haystack(prose) if haystack is None else haystack):
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


@lru_cache(maxsize=32)
def _matcher(words: tuple[str, ...], phrases: tuple[str, ...], characters: tuple[str, ...]) -> VocabularyMatcher:
    return VocabularyMatcher(words, phrases, characters)


def vocabulary_matcher(rules: DraftRules) -> VocabularyMatcher:
    """The (cached) matcher of a rules document."""
    return _matcher(
        tuple(rules.banned_words.terms),
        tuple(rules.filler_phrases.terms),
        tuple(c.sequence for c in rules.banned_characters.characters),
    )


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


class ChecksOverBudget(Exception):
    """The checks of a draft spent more of their thread's CPU time than their budget allows."""


_DEADLINE: ContextVar[float | None] = ContextVar("checks_deadline", default=None)


@contextmanager
def checks_budget(seconds: float) -> Iterator[None]:
    """Checks and repairs run inside stop with ChecksOverBudget at their first checkpoint past `seconds` of this
    thread's CPU time. Every pattern they run is linear in the body (tests/grading/drafts/test_checks_linear.py), so the
    work between two checkpoints is bounded; the budget bounds what a legal but costly body takes from a worker
    shared by every org, and from a web request (the preview). CPU time, not wall time: a thread waiting for the
    interpreter while others run is not charged for their work.
    """
    token = _DEADLINE.set(time.thread_time() + seconds)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def checkpoint() -> None:
    """Raise ChecksOverBudget when the budget of the `checks_budget` block this runs in is spent."""
    deadline = _DEADLINE.get()
    if deadline is not None and time.thread_time() > deadline:
        raise ChecksOverBudget("the checks of this draft spent more CPU time than their budget")


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

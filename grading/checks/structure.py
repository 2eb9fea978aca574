"""A draft as a reader sees it, parsed once (`parse_draft`): markdown-it gives the block structure (fences, headings,
tables, HTML/JSX blocks) and the links; the prose (`DraftStructure.prose`) is the body with everything that is not
writing masked by spaces, same length, so every span found in the prose is a span of the body. Pure Python: no
Django. The checks and the repairs read a draft through it."""

from __future__ import annotations

import re
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.common.utils import normalizeReference
from markdown_it.token import Token

from grading.checks.budget import checkpoint
from grading.checks.prose import HTML_COMMENT, MDX_COMMENT, VisibleProse, comment_spans, is_word_char, visible_prose

Span = tuple[int, int]  # [start, end) offsets into a body


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
        """The prose as a reader sees it (grading/checks/prose.py), with the map back to the body: vocabulary is read
        here."""
        return visible_prose(self.body, self.prose, hidden=self.link_syntax)

    @cached_property
    def haystack(self) -> str:
        """The visible prose lower-cased for matching (same length as it)."""
        return lowered_for_matching(self.visible.text)


def parse_draft(body: str) -> DraftStructure:
    """Parse a draft body once for every check, and once for every caller: the gate checks a body, the repairs
    read it, and each repaired body is read again by the next repair and by the second check. So each thread
    keeps its last few parses: a draft is graded on one thread, and a cache shared by every grading thread would
    lose them to the other threads' drafts. A DraftStructure is immutable.
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


# Typographic apostrophes read as "'"; a line break (or tab, or no-break space) inside a phrase reads as a space.
_HAYSTACK_FOLDS = (("\u2019", "'"), ("\u2018", "'"), ("\n", " "), ("\r", " "), ("\t", " "), ("\u00a0", " "))


def lowered_for_matching(prose: str) -> str:
    """Lower-cased prose of the same length: offsets found in it are offsets in the body."""
    lowered = prose.lower()
    if len(lowered) != len(prose):  # a few characters lower-case to two ("İ"): leave those as they are
        lowered = "".join(c.lower() if len(c.lower()) == 1 else c for c in prose)
    for folded, reading in _HAYSTACK_FOLDS:  # str.replace per character: cheaper than translate
        if folded in lowered:
            lowered = lowered.replace(folded, reading)
    return lowered

"""Rendering a draft for an operator: Markdown sanitized with nh3, findings and proof points marked in place,
and a repair diff as lines. The draft is untrusted text: nothing of it reaches the page unescaped."""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from html.parser import HTMLParser

import nh3
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

_MARKDOWN = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table").disable("image")
_ALLOWED_TAGS = {
    "p", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "a", "em", "strong", "code", "pre", "blockquote",
    "hr", "br", "table", "thead", "tbody", "tr", "th", "td", "del", "s",
}  # fmt: skip
_VOID_TAGS = {"br", "hr"}
# Highlight boundaries travel through Markdown rendering and sanitizing as private-use characters:
# start of highlight i is U+F0000 + i, its end U+100000 + i (planes 15 and 16; the body's own are replaced).
_START, _END, _LIMIT = 0xF0000, 0x100000, 0xFFFD
_SENTINELS = re.compile("([\U000f0000-\U0010ffff])")
_COMPONENT = re.compile(r"</?[A-Z][A-Za-z0-9]*(?:\s[^<>]*)?/?>")


@dataclass(frozen=True)
class Highlight:
    start: int
    end: int
    css: str  # fatal | fixable | proof
    title: str


def render_markdown(body: str, highlights: Sequence[Highlight] = ()) -> SafeString:
    """The draft rendered as the reader would see it, sanitized, with `highlights` marked in place.

    1. Replace private-use characters of planes 15-16 in the body (one for one: offsets stay valid) and
       insert a start and an end sentinel for each highlight, at its character offsets.
    2. Render Markdown with raw HTML off (MDX components and any markup show as text) and images off.
    3. Sanitize with nh3 to a small allowlist: links keep only http(s)/mailto or relative hrefs.
    4. Re-serialize the sanitized tree, escaping every text and attribute again, turning sentinels into
       `<mark>` elements (closed and reopened at tag boundaries, so they always nest) and component tags
       into chips. Only fixed markup is ever added; no input reaches the output unescaped.
    """
    text = _SENTINELS.sub("\ufffd", body)
    events = []
    for index, highlight in enumerate(highlights[:_LIMIT]):
        start, end = max(0, highlight.start), min(len(text), highlight.end)
        if start < end:
            events.append((start, 1, chr(_START + index)))
            events.append((end, 0, chr(_END + index)))
    for position, _, sentinel in sorted(events, reverse=True):
        text = text[:position] + sentinel + text[position:]
    rendered = _MARKDOWN.render(text)
    cleaned = nh3.clean(
        rendered,
        tags=_ALLOWED_TAGS,
        attributes={"a": {"href"}},
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )
    serializer = _HighlightSerializer(list(highlights))
    serializer.feed(cleaned)
    serializer.close()
    return mark_safe("".join(serializer.out))  # noqa: S308 - every piece is escaped by the serializer


class _HighlightSerializer(HTMLParser):
    def __init__(self, highlights: list[Highlight]) -> None:
        super().__init__(convert_charrefs=True)
        self.highlights = highlights
        self.out: list[str] = []
        self.active: dict[int, None] = {}
        self.mark_open = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _ALLOWED_TAGS:
            return
        self._close_mark()
        kept = "".join(
            f' {name}="{html.escape(value or "", quote=True)}"'
            for name, value in attrs
            if (tag, name) in {("a", "href"), ("a", "rel")}
        )
        self.out.append(f"<{tag}{kept}>")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if tag not in _ALLOWED_TAGS or tag in _VOID_TAGS:
            return
        self._close_mark()
        self.out.append(f"</{tag}>")

    def handle_data(self, data: str) -> None:
        for piece in _SENTINELS.split(data):
            if not piece:
                continue
            if len(piece) == 1 and _SENTINELS.fullmatch(piece):
                code = ord(piece)
                self._close_mark()
                if _START <= code < _START + _LIMIT:
                    self.active[code - _START] = None
                elif _END <= code < _END + _LIMIT:
                    self.active.pop(code - _END, None)
                continue
            position = 0
            for match in _COMPONENT.finditer(piece):
                self._text(piece[position : match.start()])
                self._close_mark()
                self.out.append('<span class="comp">')
                self._text(match.group())
                self._close_mark()
                self.out.append("</span>")
                position = match.end()
            self._text(piece[position:])

    def _text(self, text: str) -> None:
        if not text:
            return
        if self.active and not self.mark_open and text.strip():
            marks = [self.highlights[i] for i in self.active if i < len(self.highlights)]
            css = min((m.css for m in marks), key=["fatal", "fixable", "proof"].index, default="fatal")
            title = "; ".join(dict.fromkeys(m.title for m in marks))
            self.out.append(f'<mark class="{css}" title="{html.escape(title, quote=True)}">')
            self.mark_open = True
        self.out.append(html.escape(text, quote=False))

    def _close_mark(self) -> None:
        if self.mark_open:
            self.out.append("</mark>")
            self.mark_open = False

    def close(self) -> None:
        super().close()
        self._close_mark()


def proof_highlights(body: str, terms: Iterable[str]) -> list[Highlight]:
    """Where the org's proof terms (customer names, figures) appear in the body: shown in green."""
    found = []
    for term in dict.fromkeys(t for t in terms if t.strip()):
        pattern = re.compile(rf"(?<!\w){re.escape(term)}(?!\w)", re.IGNORECASE)
        found += [Highlight(m.start(), m.end(), "proof", f"proof point: {term}") for m in pattern.finditer(body)]
    return found


def finding_highlights(findings: Iterable[dict]) -> list[Highlight]:
    found = []
    for finding in findings:
        if not isinstance(finding, dict):
            continue
        css = "fixable" if finding.get("severity") == "fixable" else "fatal"
        for span in finding.get("spans") or []:
            if isinstance(span, list | tuple) and len(span) == 2 and all(isinstance(x, int) for x in span):
                found.append(Highlight(span[0], span[1], css, str(finding.get("message") or finding.get("code", ""))))
    return found


@dataclass(frozen=True)
class DiffLine:
    css: str
    text: str


def diff_lines(diff: str) -> list[DiffLine]:
    lines = []
    for line in diff.splitlines():
        if line.startswith(("+++", "---")):
            css = "meta"
        elif line.startswith("+"):
            css = "add"
        elif line.startswith("-"):
            css = "del"
        elif line.startswith("@@"):
            css = "meta"
        else:
            css = ""
        lines.append(DiffLine(css, line))
    return lines

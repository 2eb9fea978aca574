"""Untrusted text where people read it: ids, titles and names that pipelines and agents chose (issue 11).

Escaping keeps markup out, but not spoofing: a right-to-left override in a conversation id reverses the rest of
the line it is shown in (`cv-`, U+202E, `gnp.exe` reads as `cv-exe.png`), a zero-width space makes two different
ids look the same, and a long unbroken id pushes the page sideways. `{{ value|untrusted }}` shows such characters
as what they are, a marker like ⟨U+202E⟩ (named in its tooltip), inside a `<bdi>` so that right-to-left text in it
cannot reorder the text around it, with the class `untrusted` (CSS lets it break anywhere).
`{{ value|untrusted_plain }}` gives the same text without markup, for where markup cannot go (`<title>`, `<option>`,
attributes).
"""

import unicodedata
from html import escape

from django import template
from django.utils.safestring import SafeString, mark_safe

from grading.checks.prose import is_invisible

register = template.Library()


def _hidden(char: str) -> bool:
    # Control characters and line or paragraph separators too: none of them belongs in a one-line label.
    return is_invisible(char) or unicodedata.category(char) in ("Cc", "Zl", "Zp")


def _marker(char: str) -> str:
    return f"⟨U+{ord(char):04X}⟩"


def _plain_ascii(text: str) -> bool:
    """No character of `text` is hidden: of ASCII, only the control characters are (the ones not printable)."""
    return text.isascii() and text.isprintable()


@register.filter
def untrusted(value: object) -> SafeString:
    text = "" if value is None else str(value)
    if _plain_ascii(text):  # nearly every id and title: nothing to look at character by character
        return mark_safe(f'<bdi class="untrusted">{escape(text)}</bdi>')  # noqa: S308 - escaped
    pieces: list[str] = []
    run: list[str] = []
    for char in text:
        if not _hidden(char):
            run.append(char)
            continue
        pieces.append(escape("".join(run)))
        run = []
        name = escape(unicodedata.name(char, "control character").lower())
        pieces.append(f'<span class="ctl" title="{name}">{_marker(char)}</span>')
    pieces.append(escape("".join(run)))
    return mark_safe(f'<bdi class="untrusted">{"".join(pieces)}</bdi>')  # noqa: S308 - every piece is escaped


@register.filter
def untrusted_plain(value: object) -> str:
    text = "" if value is None else str(value)
    if _plain_ascii(text):
        return text
    return "".join(_marker(char) if _hidden(char) else char for char in text)

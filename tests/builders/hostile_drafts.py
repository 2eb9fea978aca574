"""Drafts of n characters built to make text processing superlinear: each a long run of something the checks or the
prose reading look for (tests/grading/checks/test_checks_linear.py, bench/bench_hostile_checks.py). Pure Python."""

from __future__ import annotations

from collections.abc import Callable

LOOK_ALIKE = "\u0435"  # Cyrillic e

HOSTILE: dict[str, Callable[[int], str]] = {
    "a long word with a look-alike at its start": lambda n: LOOK_ALIKE + "a" * n,
    "a long word with a look-alike in its middle": lambda n: "a" * (n // 2) + LOOK_ALIKE + "a" * (n // 2),
    "a long word with a look-alike at its end": lambda n: "a" * n + LOOK_ALIKE,
    "a long word and a look-alike elsewhere": lambda n: "a" * n + " " + LOOK_ALIKE,
    "look-alikes between letters": lambda n: ("a" + LOOK_ALIKE) * (n // 2),
    "unclosed HTML comment openers": lambda n: "<!--" * (n // 4),
    "unclosed MDX comment openers": lambda n: "{/*" * (n // 3),
    "MDX comment openers in prose": lambda n: "x {/* y " * (n // 8),
    "one closed comment after unclosed openers": lambda n: "{/*" * (n // 3) + "*/}",
    "heading anchors": lambda n: "## " + "{#a" * (n // 3),
    "heading emoji shortcodes": lambda n: "## " + ":a:" * (n // 3) + " x",
    "link destination openers": lambda n: "](" * (n // 2),
    "link openers": lambda n: "[a](" * (n // 4),
    "reference link openers": lambda n: "[a][" * (n // 4) + "\n\n[a]: /x",
    "brackets": lambda n: "[" * n,
    "closing brackets": lambda n: "]" * n,
    "parentheses": lambda n: "(" * n,
    "backticks of growing width": lambda n: " ".join("`" * width for width in range(1, 40)) + " `x" * (n // 3),
    "backslashes": lambda n: "\\" * n,
    "angle brackets": lambda n: "<" * n,
    "inline tag openers": lambda n: "<b " * (n // 3),
    "component openers": lambda n: "<A" * (n // 2),
    "autolink openers": lambda n: "<a@" * (n // 3),
    "ampersands": lambda n: "&" * n,
    "numeric reference openers": lambda n: "&#" * (n // 2),
    "emphasis inside a word": lambda n: "a*" * (n // 2),
    "tildes": lambda n: "~" * n,
    "URL marks": lambda n: "://" * (n // 3),
    "www marks": lambda n: "www." * (n // 4),
    "invisible characters inside a word": lambda n: "a\u200b" * (n // 2),
    "fullwidth letters": lambda n: "\uff44" * n,
    "mathematical letters": lambda n: "\U0001d41d" * (n // 2),
    "character references": lambda n: "&mdash;" * (n // 7),
    "an unclosed front matter": lambda n: "---\n" + "a\n" * (n // 2),
    "pipes": lambda n: "|" * n,
    "CRLF line ends": lambda n: "a\r\n" * (n // 3),
}

"""The checks of one draft run in time linear in its length, whatever it holds (issue 20, Build 1).

A draft is untrusted text checked inside a grading worker and inside the criteria preview's web request: one pattern
that is quadratic in some input held a worker's interpreter for minutes. Each hostile family below is a long run of
something the checks or the prose reading look for. The work is the checking thread's CPU time; a family passes
when doubling the input less than triples it (linear work doubles, quadratic work quadruples). A ratio, never a
wall-clock limit. Pure Python: runs without Django (`pytest -p no:django --noconftest tests/grading/test_checks_linear.py`).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

import pytest

from grading.checks import check_draft
from grading.rules import default_rules, rules_validate

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
N = 12_000
URL = "https://example.com/a"
MIN_SAMPLE_SECONDS = 0.02


def check_cpu_seconds(body: str) -> float:
    """The checking thread's CPU time per check of `body`, the least of three samples, each long enough to read.
    Each check reads a body of its own (a space more): the parse of a body is kept per thread."""
    rules, samples, spaces = default_rules(), [], 0
    gc.collect()
    gc.disable()  # a collection landing in one sample and not the other is not work the checks did
    try:
        for _ in range(3):
            runs, started = 0, time.thread_time()
            while (spent := time.thread_time() - started) < MIN_SAMPLE_SECONDS:
                spaces += 1
                check_draft(body=body + " " * spaces, rules=rules, source_urls=[URL], proof_terms=["x"])
                runs += 1
            samples.append(spent / runs)
    finally:
        gc.enable()
    return min(samples)


@pytest.mark.parametrize("family", HOSTILE)
def test_it_checks_a_hostile_draft_in_time_linear_in_its_length(family):
    make = HOSTILE[family]
    at_n, at_2n = check_cpu_seconds(make(N)), check_cpu_seconds(make(2 * N))
    assert at_2n / at_n < 3, f"{family}: {at_n * 1000:.1f} ms at n, {at_2n * 1000:.1f} ms at 2n"


def test_it_refuses_a_vocabulary_whose_terms_end_inside_each_other_too_deeply():
    # "a", "aa", "aaa", ...: every letter of a run of a's ends every term, so a scan does work for each at each.
    nested = ["a" * length for length in range(1, 40)]
    with pytest.raises(ValueError, match="end the same way"):
        rules_validate({"banned_words": {"terms": nested}})

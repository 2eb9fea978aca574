"""What readers see is what is checked (issue 11, Build 3): grading/checks/prose.py and the checks that read through it.

A banned word or dash that renders as itself is a finding however it is spelt (character references, invisible
characters, look-alike letters, inline markup), at the body span that renders it; text in other languages is not.
Pure Python: runs without Django (`pytest -p no:django --noconftest tests/grading/checks/test_prose.py`).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grading.checks.checks import BANNED_CHARACTER, BANNED_WORD, FILLER_PHRASE, Finding, check_draft
from grading.checks.prose import visible_prose
from grading.checks.repairs import repair_draft
from grading.checks.rules import default_rules
from grading.checks.structure import parse_draft


def vocabulary(body: str) -> list[tuple[str, str, list[str]]]:
    """(code, term, the body text of each span) of the vocabulary findings: the spans are what the UI highlights."""
    findings = check_draft(body=body, rules=default_rules(), source_urls=[], proof_terms=[])
    return [
        (f.code, f.subject, [body[start:end] for start, end in f.spans])
        for f in findings
        if f.code in (BANNED_WORD, FILLER_PHRASE, BANNED_CHARACTER)
    ]


# --- a dash that renders as a dash ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "dash",
    [
        "&mdash;", "&#8212;", "&#x2014;", "&#X2014;", "&#x02014;", "&#008212;",
        "&#151;",  # HTML reads 128-159 as windows-1252, where 151 is the em dash
        "\ufe58",  # small em dash: NFKC is the em dash
        "\ufe31",  # vertical em dash
    ],
)  # fmt: skip
def test_a_dash_written_any_way_that_renders_as_one_is_a_finding_at_its_spelling(dash):
    body = f"Fast{dash}and cheap."
    assert vocabulary(body) == [(BANNED_CHARACTER, "\u2014", [dash])]


@pytest.mark.parametrize("hyphens", ["&#45;&#45;", "&#x2d;-", "\uff0d\uff0d", "\ufe63-", "-\u00ad-", "-<b></b>-"])
def test_a_double_hyphen_spelt_otherwise_is_a_finding(hyphens):
    assert vocabulary(f"Slow{hyphens}and dear.") == [(BANNED_CHARACTER, "--", [hyphens])]


@pytest.mark.parametrize("text", ["&MDASH;", "&mdash", "&amp;mdash;", "&#8212", "`&mdash;`"])
def test_a_reference_commonmark_shows_as_typed_is_not_a_dash(text):
    # Names are case-sensitive and need their ";"; "&amp;mdash;" reads "&mdash;"; code is not prose.
    assert vocabulary(f"Fast {text} and cheap.") == []


# --- a banned word that reads as one -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "spelling",
    [
        "de\u200blve", "de\u200clve", "de\u200dlve", "de\u2060lve", "de\ufefflve",
        "de\u00adlve", "de&shy;lve", "de&#173;lve", "d&#x200B;elve", "del\u202eve", "de\u2066l\u2069ve",
        "d&#101;lve", "&#100;&#101;&#108;&#118;&#101;", "d&#x65;lve",
        "d\u0435lve",  # Cyrillic e
        "d\u0435lv\u0435", "\u0501\u0435\u04cf\u03bd\u0435",  # Cyrillic and Greek only, but mixing the two
        "DELV\u0415", "D\u0415LVE",  # Cyrillic capital E
        "de<b></b>lve", "d<span>e</span>lve", "de<span class=\"x\">lv</span>e", "de<em>lv</em>e", "de<wbr>lve",
        "de**lv**e", "de*lv*e", "de~~lv~~e", "de<!-- hidden -->lve", "de{/* hidden */}lve",
        "\uff44\uff45\uff4c\uff56\uff45",  # fullwidth
        "\U0001d41d\U0001d41e\U0001d425\U0001d42f\U0001d41e",  # mathematical bold
        "d\u0435<b>l</b>\u200bve",  # several at once
    ],
)  # fmt: skip
def test_a_banned_word_a_reader_reads_is_a_finding_spanning_its_whole_spelling(spelling):
    body = f"In this guide we {spelling} into pricing."
    assert vocabulary(body) == [(BANNED_WORD, "delve", [spelling])]


def test_a_filler_phrase_joined_by_non_breaking_thin_or_ideographic_spaces_is_a_finding():
    for space in ("&nbsp;", "\u2009", "\u202f", "\u3000", "&ensp;"):
        phrase = space.join(["at", "the", "end", "of", "the", "day"])
        assert vocabulary(f"Well, {phrase}, it works.") == [(FILLER_PHRASE, "at the end of the day", [phrase])]


def test_markup_that_separates_words_on_the_page_still_separates_them():
    # A line break, a paragraph, a component or a quotation renders a gap or something of its own.
    for joined in ("de<br>lve", "de<br/>lve", "de<p>lve", "de<Tooltip />lve", "de<q>lv</q>e", "de lve", "de_lve"):
        assert vocabulary(f"We {joined} here.") == [], joined


@pytest.mark.parametrize(
    ("body", "spelling"),
    [
        ("We de[lve](https://example.com/x) here.", "de[lve"),
        ("We [del](https://example.com/)ve here.", "del](https://example.com/)ve"),
        ('We [de](/x "a title")lve here.', 'de](/x "a title")lve'),
        ("We [de][1]lve here.\n\n[1]: https://example.com/", "de][1]lve"),
        ("We [de][]lve here.\n\n[de]: https://example.com/", "de][]lve"),
    ],
)
def test_a_banned_word_split_by_a_link_reads_as_one_word_as_a_reader_sees_it(body, spelling):
    # A link's brackets, destination and label render as nothing: the reader sees its text joined to the letters.
    assert vocabulary(body) == [(BANNED_WORD, "delve", [spelling])]


@pytest.mark.parametrize(
    "body",
    [
        "We [de][1]lve here.",  # no reference [1]: shown as typed, brackets and all
        "We de\\[lve](/x) here.",  # an escaped bracket opens no link
        "We `de[lve](/x)` here.",  # code
        "We ![de](/x.png)lve here.",  # an image shows no text
        "We [de](/x) lve here.",  # a space is a space
        "We [de](/x)\n\nlve here.",  # so is a paragraph
        "We [d[e]l](/x)ve here.",  # brackets inside a link's text are shown: "d[e]lve"
    ],
)
def test_link_syntax_a_reader_sees_or_that_is_no_link_does_not_join_words(body):
    assert vocabulary(body) == []


# --- text in other languages is not read as English ----------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        "Мы сору всё, а ещё рано.",  # Russian: сору is a Russian word, in Cyrillic letters that look like "copy"
        "Все ресурсы: сеть, тест.",
        "Αθήνα, ο κόσμος, τα νέα.",
        "délve, delvé, naïve, façade, résumé, Straße",
        "دلف وتعمق",
        "深入研究",
        "emoji 👩\u200d💻 and flags 🇫🇷",
    ],
)
def test_whole_words_of_other_scripts_and_accented_latin_are_not_flagged(text):
    assert vocabulary(text) == []


def test_a_banned_word_beside_other_scripts_is_still_found_at_its_own_span():
    body = "Мы delve в детали, Αθήνα delves."
    assert vocabulary(body) == [(BANNED_WORD, "delve", ["delve"]), (BANNED_WORD, "delves", ["delves"])]


# --- the map back to the body --------------------------------------------------------------------------------------
def test_plain_prose_is_seen_as_written_and_maps_to_itself():
    prose = "We ship **bold** claims, weekly -- see <ArticleCta /> and [a link](/writing/x).\n"
    seen = visible_prose(prose)
    assert seen.text == prose
    assert [seen.body_span(s, e) for s, e in [(0, 2), (9, 13), (40, 51)]] == [(0, 2), (9, 13), (40, 51)]


def test_every_visible_character_maps_into_the_body_in_order():
    body = "A&mdash;b de<b>l</b>ve\u200b c&#x44;d **x** e\u0435f &nbsp; <!-- c --> end"
    seen = visible_prose(body, parse_draft(body).prose)
    assert seen.text == "A\u2014b delve cDd **x** eef    end"
    starts = [seen.body_offset(i) for i in range(len(seen.text))]
    assert starts == sorted(starts)
    assert all(body[seen.body_offset(i)] == "&" for i, c in enumerate(seen.text) if c in "\u2014D")


invisible = st.sampled_from(["\u200b", "\u00ad", "&shy;", "<b></b>", "**", "\u2060", "&#8203;", "<!--x-->", "\u202e"])


@settings(max_examples=200, deadline=None)
@given(
    word=st.sampled_from(default_rules().banned_words.terms),
    inserts=st.dictionaries(st.integers(min_value=1, max_value=30), invisible, max_size=4),
    before=st.sampled_from(["", "Then ", "(", "\u201c", "**"]),
    after=st.sampled_from(["", " now.", ")", "\u201d", ", so"]),
)
def test_a_banned_word_split_anywhere_inside_is_found_at_exactly_its_span(word, inserts, before, after):
    spelled = word
    for cut, piece in sorted(inserts.items(), reverse=True):  # distinct places, so no two pieces touch
        if cut < len(word) and word[cut - 1].isalnum() and word[cut].isalnum():
            spelled = spelled[:cut] + piece + spelled[cut:]
    body = f"{before}{spelled}{after}"
    findings = [f for f in vocabulary(body) if f[1] == word]
    assert findings == [(BANNED_WORD, word, [spelled])]


def test_prose_the_checks_mask_is_not_unmasked_by_reading():
    body = "Run `de<b></b>lve` and see https://example.com/delve--x or [text](/writing/delve)."
    assert vocabulary(body) == []
    assert visible_prose(body, parse_draft(body).prose).text.count("delve") == 0


# --- repairs read the same text -----------------------------------------------------------------------------------
def test_a_dash_spelt_as_a_reference_or_a_compatibility_form_is_repaired_away():
    rules = default_rules()
    body = "Fast&#x2014;and cheap, slow\ufe58and dear, odd&mdash;too.\n"
    findings = [Finding(BANNED_CHARACTER, "", "fixable")]
    repaired = repair_draft(body=body, findings=findings, rules=rules, related_articles=lambda *a, **k: [])
    assert repaired.body == "Fast, and cheap, slow, and dear, odd, too.\n"
    assert vocabulary(repaired.body) == []


def test_every_character_that_reads_differently_is_one_the_scan_stops_at():
    # The scan looks for a class of first characters, not at every character: one missing from it would go unread.
    from grading.checks.prose import _candidates, _fold

    missed = [
        f"U+{point:04X}"
        for point in range(0x80, 0x10000)
        if not 0xD800 <= point <= 0xDFFF and _fold(chr(point)) != chr(point) and not _candidates().match(chr(point))
    ]
    assert missed == []

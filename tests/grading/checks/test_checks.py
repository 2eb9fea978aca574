"""The draft gate's deterministic checks and its rules document (grading/checks/checks.py, grading/checks/rules.py).

Pure Python: runs without Django (`pytest -p no:django --noconftest tests/grading/checks/test_checks.py`).
"""

from __future__ import annotations

import random
import re
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from pydantic import ValidationError

from grading.checks import structure
from grading.checks.checks import (
    BANNED_CHARACTER,
    BANNED_WORD,
    CITATION_MISSING,
    COMPONENT_MISSING,
    FILLER_PHRASE,
    FINDING_CODES,
    H2_MISSING,
    H2_NOT_QUESTION,
    INTERNAL_LINKS_MISSING,
    PROOF_POINT_MISSING,
    Finding,
    check_draft,
    proof_terms_referenced,
)
from grading.checks.rules import DraftRules, default_rules, rules_as_text
from grading.checks.structure import parse_draft

SOURCE = "https://research.example.org/reports/churn-2025"
PROOF_TERMS = ["Northwind", "3.4 million"]


def clean_draft(*, intro: str = "Teams cut churn when they answer the first question fast.", extra: str = "") -> str:
    """A draft that passes every v1 rule with SOURCE and PROOF_TERMS."""
    return f"""{intro}

## How do teams cut churn?

Northwind cut churn by a third in one quarter, per [the 2025 study]({SOURCE}).

<ArticleCallout variant="summary" />

## What should you measure first?

Measure weekly active accounts. See [our pricing guide](/writing/pricing-guide) and
[the onboarding checklist](/writing/onboarding-checklist).
{extra}
<ArticleCaseStudyCallout />

## Why does onboarding matter?

Accounts that finish onboarding stay longer.

<ArticleCta />
"""


def check(body: str, rules: DraftRules | None = None, **kwargs: list[str]) -> list[Finding]:
    return check_draft(
        body=body,
        rules=rules or default_rules(),
        source_urls=kwargs.get("source_urls", [SOURCE]),
        proof_terms=kwargs.get("proof_terms", PROOF_TERMS),
    )


def codes(findings: list[Finding]) -> list[str]:
    return [f.code for f in findings]


def only(findings: list[Finding], code: str) -> list[Finding]:
    return [f for f in findings if f.code == code]


def custom_rules(**changes: object) -> DraftRules:
    document = default_rules().model_dump(mode="json")
    for path, value in changes.items():
        section, _, key = path.partition("__")
        document[section][key] = value
    return DraftRules.model_validate(document)


# --- the rules document ---------------------------------------------------------------------------------------------
def test_it_round_trips_the_v1_rules_through_json() -> None:
    rules = default_rules()
    assert DraftRules.model_validate(rules.model_dump(mode="json")) == rules
    assert DraftRules.model_validate_json(rules.model_dump_json()) == rules


def test_it_seeds_a_substantial_ai_tell_vocabulary() -> None:
    rules = default_rules()
    assert len(rules.banned_words.terms) >= 150
    assert len(rules.filler_phrases.terms) >= 50
    for tell in ["delve", "leverage", "seamless", "robust", "tapestry", "showcase", "elevate", "unlock"]:
        assert tell in rules.banned_words.terms
    assert all(term == term.strip().lower() and not term.endswith("-") for term in rules.banned_words.terms)


def test_it_keeps_v1_phrases_free_of_v1_banned_words_so_nothing_is_reported_twice() -> None:
    rules = default_rules()
    banned = set(rules.banned_words.terms)
    for phrase in rules.filler_phrases.terms:
        assert not banned & set(re.findall(r"[\w'-]+", phrase)), phrase


def test_it_seeds_the_v1_defaults_of_the_design() -> None:
    rules = default_rules()
    assert (rules.threshold, rules.band, rules.h2.min_ratio, rules.internal_links.minimum) == (7.0, 0.5, 0.8, 2)
    assert [c.name for c in rules.components.required] == ["ArticleCallout", "ArticleCaseStudyCallout", "ArticleCta"]
    assert {c.sequence for c in rules.banned_characters.characters} == {"\u2014", "--"}
    severities = {
        "banned_words": rules.banned_words.severity,
        "filler_phrases": rules.filler_phrases.severity,
        "banned_characters": rules.banned_characters.severity,
        "h2": rules.h2.severity,
        "internal_links": rules.internal_links.severity,
        "components": rules.components.severity,
        "citation": rules.citation.severity,
        "proof_points": rules.proof_points.severity,
    }
    fixable = {name for name, severity in severities.items() if severity == "fixable"}
    assert fixable == {"banned_characters", "internal_links", "components"}


def test_it_rejects_an_unknown_key_in_the_rules_document() -> None:
    document = default_rules().model_dump(mode="json")
    document["banned_words"]["term"] = ["typo"]
    with pytest.raises(ValidationError):
        DraftRules.model_validate(document)


def test_it_rejects_a_fixable_severity_for_a_rule_no_repair_can_fix() -> None:
    with pytest.raises(ValidationError):
        custom_rules(banned_words__severity="fixable")


def test_it_rejects_a_substitute_that_holds_a_banned_character() -> None:
    characters = [
        {"sequence": "\u2014", "name": "em dash", "substitute": " -- "},
        {"sequence": "--", "name": "dd", "substitute": ", "},
    ]
    with pytest.raises(ValidationError):
        custom_rules(banned_characters__characters=characters)


def test_it_rejects_a_component_template_that_does_not_use_the_component() -> None:
    with pytest.raises(ValidationError):
        custom_rules(components__required=[{"name": "ArticleCta", "template": "<Other />", "placement": "end"}])


def test_it_rejects_a_link_pattern_without_a_slug() -> None:
    with pytest.raises(ValidationError):
        custom_rules(internal_links__pattern="/writing/")


def test_it_stores_terms_lower_cased_with_straight_apostrophes() -> None:
    rules = custom_rules(banned_words__terms=["  Leverage ", "leverage", "It\u2019s  Crucial"])
    assert rules.banned_words.terms == ["leverage", "it's crucial"]


def test_it_serves_the_rules_as_text_for_a_writer_prompt() -> None:
    rules = default_rules()
    text = rules_as_text(rules)
    assert "delve" in text and "at the end of the day" in text
    assert "[descriptive text](/writing/{slug})" in text
    assert "80%" in text and "How" in text
    assert "<ArticleCta />" in text
    assert "source URLs" in text and "proof points" in text.lower()


# --- a clean draft --------------------------------------------------------------------------------------------------
def test_it_finds_nothing_in_a_clean_draft() -> None:
    assert check(clean_draft()) == []


# --- banned words ---------------------------------------------------------------------------------------------------
def test_it_flags_a_banned_word_case_insensitively_with_every_span() -> None:
    body = clean_draft(intro="We Leverage data. Then we LEVERAGE it again, and leverage wins.")
    [finding] = only(check(body), BANNED_WORD)
    assert (finding.subject, finding.severity) == ("leverage", "fatal")
    assert len(finding.spans) == 3
    assert all(body[s:e].lower() == "leverage" for s, e in finding.spans)


def test_it_reports_one_finding_per_distinct_term() -> None:
    body = clean_draft(intro="A robust, seamless plan. A robust team.")
    findings = only(check(body), BANNED_WORD)
    assert [(f.subject, len(f.spans)) for f in findings] == [("robust", 2), ("seamless", 1)]


def test_it_does_not_flag_showcased_when_only_showcase_is_configured() -> None:
    rules = custom_rules(banned_words__terms=["showcase"])
    body = clean_draft(intro="The demo showcased the tool. Showcases too.")
    assert only(check(body, rules), BANNED_WORD) == []


def test_it_flags_showcased_when_showcased_is_configured() -> None:
    rules = custom_rules(banned_words__terms=["showcase", "showcased"])
    body = clean_draft(intro="The demo showcased the tool; we showcase it.")
    findings = only(check(body, rules), BANNED_WORD)
    assert sorted(f.subject for f in findings) == ["showcase", "showcased"]


def test_it_does_not_flag_a_longer_word_that_contains_a_banned_word() -> None:
    body = clean_draft(intro="Robustness, the elevator, catalysts and testaments are all fine.")
    assert only(check(body), BANNED_WORD) == []


def test_it_treats_hyphens_and_apostrophes_as_word_boundaries() -> None:
    body = clean_draft(intro="A re-leverage plan, leverage's cost, a leverage-first mindset.")
    [finding] = only(check(body), BANNED_WORD)
    assert len(finding.spans) == 3


def test_it_matches_a_hyphenated_banned_word_whole() -> None:
    body = clean_draft(intro="A cutting-edge tool. The cutting edge of a knife.")
    [finding] = only(check(body), BANNED_WORD)
    assert finding.subject == "cutting-edge" and len(finding.spans) == 1


def test_it_does_not_flag_banned_words_inside_fenced_or_inline_code() -> None:
    body = clean_draft(
        intro="Call `leverage()` here.\n\n```python\nrobust = seamless()  # delve\n```\n\n~~~\ndelve\n~~~"
    )
    assert only(check(body), BANNED_WORD) == []


def test_it_flags_banned_words_in_link_text_but_not_in_urls() -> None:
    body = clean_draft(intro="Read [a robust guide](/writing/seamless-setup) and https://example.com/delve-deeper.")
    [finding] = only(check(body), BANNED_WORD)
    assert finding.subject == "robust"


def test_it_flags_banned_words_in_an_indented_paragraph_because_mdx_has_no_indented_code() -> None:
    body = clean_draft(intro="<ArticleCallout>\n\n    This robust paragraph is indented.\n\n</ArticleCallout>")
    assert [f.subject for f in only(check(body), BANNED_WORD)] == ["robust"]


def test_it_points_every_vocabulary_span_at_the_offending_text() -> None:
    body = clean_draft(intro="We delve into a robust tapestry. In order\nto win, here\u2019s the thing: unlock it.")
    findings = [f for f in check(body) if f.code in (BANNED_WORD, FILLER_PHRASE)]
    assert {f.subject for f in findings} >= {"delve", "robust", "tapestry", "unlock", "in order to", "here's the thing"}
    for finding in findings:
        for start, end in finding.spans:
            assert " ".join(body[start:end].replace("\u2019", "'").lower().split()) == finding.subject


# --- filler phrases -------------------------------------------------------------------------------------------------
def test_it_flags_a_filler_phrase_across_a_line_break_and_with_a_curly_apostrophe() -> None:
    body = clean_draft(intro="At the end\nof the day, it\u2019s worth noting that we ship.")
    findings = only(check(body), FILLER_PHRASE)
    assert sorted(f.subject for f in findings) == ["at the end of the day", "it's worth noting that"]
    assert all(f.severity == "fatal" for f in findings)


def test_it_does_not_flag_a_near_miss_phrase() -> None:
    body = clean_draft(intro="In order of size: at the end of the week, the truth was plain.")
    assert only(check(body), FILLER_PHRASE) == []


# --- banned characters ----------------------------------------------------------------------------------------------
def test_it_flags_em_dashes_and_double_hyphens_as_fixable() -> None:
    body = clean_draft(intro="Fast \u2014 and cheap. Slow--and dear. Odd---too.")
    findings = only(check(body), BANNED_CHARACTER)
    spans = {f.subject: [body[s:e] for s, e in f.spans] for f in findings}
    assert spans == {"\u2014": ["\u2014"], "--": ["--", "---"]}
    assert {f.severity for f in findings} == {"fixable"}


def test_it_flags_an_em_dash_written_as_an_html_entity() -> None:
    body = clean_draft(intro="Fast&mdash;and cheap, or &#8212; slow.")
    [finding] = only(check(body), BANNED_CHARACTER)
    assert [body[s:e] for s, e in finding.spans] == ["&mdash;", "&#8212;"]


def test_it_does_not_flag_dashes_in_code_comments_urls_or_markdown_syntax() -> None:
    intro = (
        "Run `ls --all` or:\n\n```sh\ngit log -- file \u2014 x\n```\n\n<!-- draft -- note -->\n\n---\n\n"
        "| a | b |\n|---|---|\n| 1 | 2 |\n\nSee https://example.com/a--b and [x](https://example.com/c--d)."
    )
    assert only(check(clean_draft(intro=intro)), BANNED_CHARACTER) == []


def test_it_does_not_read_front_matter_as_prose_or_as_a_heading() -> None:
    body = "---\ntitle: A robust -- title\n---\n" + clean_draft()
    assert check(body) == []


# --- H2 headings ----------------------------------------------------------------------------------------------------
def test_it_passes_h2s_at_exactly_the_minimum_ratio() -> None:
    headings = ["How does it work?", "What it costs", "Why teams switch", "Is it safe?", "Our results"]
    body = clean_draft() + "".join(f"\n## {h}\n\nText.\n" for h in headings)
    # 3 of the clean draft's + 4 of these 5 = 7 of 8 >= 80%
    assert only(check(body), H2_NOT_QUESTION) == []


def test_it_flags_h2s_below_the_ratio_with_the_offending_headings_spans() -> None:
    body = clean_draft() + "\n## Our results\n\nText.\n\n## Lessons learned {#lessons}\n\nText.\n"
    [finding] = only(check(body), H2_NOT_QUESTION)
    assert finding.severity == "fatal"
    assert [body[s:e] for s, e in finding.spans] == ["Our results", "Lessons learned {#lessons}"]
    assert "3 of 5" in finding.message


def test_it_reads_questions_and_direct_answer_openings_behind_anchors_emoji_and_numbering() -> None:
    headings = [
        "Why it matters {/*why-it-matters*/}",
        "Is it worth it? {/*worth*/}",
        "\U0001f680 How we ship",
        "1. What to do first",
        "**Can** it scale",
        "Pricing, explained?",
    ]
    body = "Intro.\n\n" + "".join(f"## {h}\n\nText.\n\n" for h in headings)
    assert only(check(body), H2_NOT_QUESTION) == []


def test_it_matches_openings_as_whole_words_only() -> None:
    rules = custom_rules(h2__min_ratio=1.0)
    body = clean_draft() + "\n## Whatever happened next\n\nText.\n"
    [finding] = only(check(body, rules), H2_NOT_QUESTION)
    assert [body[s:e] for s, e in finding.spans] == ["Whatever happened next"]


def test_it_ignores_headings_in_code_and_other_levels() -> None:
    body = clean_draft(intro="```md\n## Our results\n```\n\n### Our results\n\n# Title")
    assert only(check(body), H2_NOT_QUESTION) == []


def test_it_flags_a_draft_without_h2s() -> None:
    findings = check("Just a paragraph about [a](/writing/a) and [b](/writing/b).", proof_terms=[], source_urls=[])
    assert H2_MISSING in codes(findings) and H2_NOT_QUESTION not in codes(findings)


# --- internal links -------------------------------------------------------------------------------------------------
def test_it_flags_fewer_internal_links_than_the_minimum_as_fixable() -> None:
    body = clean_draft().replace("[the onboarding checklist](/writing/onboarding-checklist)", "the checklist")
    [finding] = only(check(body), INTERNAL_LINKS_MISSING)
    assert finding.severity == "fixable" and "1 internal link" in finding.message


def test_it_counts_distinct_articles_not_links() -> None:
    body = clean_draft().replace("/writing/onboarding-checklist", "/writing/pricing-guide")
    assert codes(check(body)) == [INTERNAL_LINKS_MISSING]


def test_it_does_not_count_links_in_code_or_bare_paths() -> None:
    body = clean_draft().replace(
        "[the onboarding checklist](/writing/onboarding-checklist)",
        "`[c](/writing/c)` and /writing/onboarding-checklist",
    )
    assert codes(check(body)) == [INTERNAL_LINKS_MISSING]


def test_it_counts_reference_links_and_links_inside_jsx_blocks() -> None:
    body = clean_draft().replace(
        "[the onboarding checklist](/writing/onboarding-checklist).",
        "[the checklist][list].\n\n[list]: /writing/onboarding-checklist",
    )
    assert check(body) == []
    body = clean_draft().replace("[the onboarding checklist](/writing/onboarding-checklist).", "it.")
    body = body.replace(
        '<ArticleCallout variant="summary" />', "<ArticleCallout>\nSee [the list](/writing/list).\n</ArticleCallout>"
    )
    assert check(body) == []


# --- components -----------------------------------------------------------------------------------------------------
def test_it_flags_each_missing_component_as_fixable() -> None:
    body = clean_draft().replace("<ArticleCta />", "").replace("<ArticleCaseStudyCallout />", "")
    findings = only(check(body), COMPONENT_MISSING)
    assert [(f.subject, f.severity) for f in findings] == [
        ("ArticleCaseStudyCallout", "fixable"),
        ("ArticleCta", "fixable"),
    ]


def test_it_does_not_count_a_component_inside_code_or_comments() -> None:
    body = clean_draft().replace("<ArticleCta />", "```mdx\n<ArticleCta />\n```\n\n`<ArticleCta />`")
    assert [f.subject for f in only(check(body), COMPONENT_MISSING)] == ["ArticleCta"]
    body = clean_draft().replace("<ArticleCta />", "<!-- <ArticleCta /> -->\n\n{/* <ArticleCta /> */}")
    assert [f.subject for f in only(check(body), COMPONENT_MISSING)] == ["ArticleCta"]


def test_it_counts_a_component_with_children_and_attributes() -> None:
    body = clean_draft().replace("<ArticleCta />", '<ArticleCta href="/demo">\nBook a demo.\n</ArticleCta>')
    assert check(body) == []


# --- citations and proof points -------------------------------------------------------------------------------------
def test_it_flags_a_draft_that_cites_none_of_its_sources() -> None:
    [finding] = only(check(clean_draft(), source_urls=["https://other.example.org/paper"]), CITATION_MISSING)
    assert finding.severity == "fatal" and "https://other.example.org/paper" in finding.message


def test_it_accepts_a_citation_that_differs_only_in_scheme_www_fragment_or_slash() -> None:
    variant = "http://www.research.example.org/reports/churn-2025/#method"
    assert check(clean_draft().replace(SOURCE, variant)) == []


def test_it_does_not_take_a_longer_url_or_a_url_in_code_as_a_citation() -> None:
    body = clean_draft().replace(SOURCE, SOURCE + "-appendix")
    assert codes(check(body)) == [CITATION_MISSING]
    body = clean_draft().replace(f"[the 2025 study]({SOURCE})", f"`{SOURCE}`")
    assert codes(check(body)) == [CITATION_MISSING]


def test_it_accepts_a_bare_source_url_at_the_end_of_a_sentence() -> None:
    body = clean_draft().replace(f"[the 2025 study]({SOURCE})", f"the study at {SOURCE}.")
    assert check(body) == []


def test_it_has_nothing_to_cite_without_sources_unless_the_rules_require_them() -> None:
    assert check(clean_draft(), source_urls=[]) == []
    rules = custom_rules(citation__require_sources=True)
    assert codes(check(clean_draft(), rules, source_urls=[])) == [CITATION_MISSING]


def test_it_flags_a_draft_that_references_no_proof_point() -> None:
    body = clean_draft().replace("Northwind", "One customer")
    [finding] = only(check(body), PROOF_POINT_MISSING)
    assert finding.severity == "fatal"
    assert check(body, proof_terms=[]) == []


def test_it_finds_proof_terms_case_insensitively_as_whole_words_in_prose() -> None:
    body = "NORTHWIND grew 42% to 3.4\nmillion users; Acmeville is not Acme; `Fabrikam` is code."
    terms = ["Northwind", "42%", "3.4 million", "Acme", "Fabrikam", "Contoso"]
    assert proof_terms_referenced(body, terms) == ["Northwind", "42%", "3.4 million", "Acme"]
    assert proof_terms_referenced("Acmeville only.", ["Acme"]) == []


# --- structure ------------------------------------------------------------------------------------------------------
def test_it_masks_non_prose_without_moving_any_offset() -> None:
    body = "Text `code` [link](/writing/x)\n\n```\nfenced\n```\n<!-- c -->\nend"
    mask = parse_draft(body).prose
    assert len(mask) == len(body)
    assert [i for i, c in enumerate(mask) if c == "\n"] == [i for i, c in enumerate(body) if c == "\n"]
    assert "code" not in mask and "fenced" not in mask and "/writing/x" not in mask
    assert mask.startswith("Text ") and "[link]" in mask and mask.endswith("end")


def test_it_serializes_a_finding_for_the_api() -> None:
    finding = Finding(BANNED_WORD, "m", "fatal", ((1, 4),), "x")
    assert finding.as_json() == {
        "code": BANNED_WORD,
        "message": "m",
        "severity": "fatal",
        "spans": [[1, 4]],
        "subject": "x",
    }


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["`", "``", "\\`", "```\n", "robust", " ", "x", "\n", "\n\n", "    "]), max_size=24))
def test_it_finds_the_code_spans_markdown_it_finds(parts: list[str]) -> None:
    body = "".join(parts)
    tokens = MarkdownIt("commonmark").disable("code").parse(body)  # MDX: no indented code
    expected = sum(t.type == "fence" for t in tokens) + sum(
        child.type == "code_inline" for t in tokens for child in t.children or []
    )
    assert len(parse_draft(body).code_spans) == expected


# --- equivalence with the plain regex loop --------------------------------------------------------------------------
_SPACE = r"[ \t\r\n\u00a0]"
_NOT_PROSE = re.compile(r"\]\([^)]*\)|https?://\S+|\{/\*.*?\*/\}|\{#[^}\s]*\}")
_EMOJI = re.compile(r"[\U0001F300-\U0001FAFF\u2600-\u27BF\uFE0F]")
Key = tuple[str, str, tuple[tuple[int, int], ...]]


def plain_findings(body: str, rules: DraftRules, sources: list[str], proof_terms: list[str]) -> list[Key]:
    """The original rules, written the obvious way: a regex per word, the H2 ratio over `^## ` lines, links by regex.
    Prose is the body with link destinations, URLs and heading anchors blanked (as the rules define it)."""
    prose = _NOT_PROSE.sub(lambda m: " " * len(m.group()), body).replace("\u2019", "'")

    def term(text: str) -> re.Pattern[str]:
        return re.compile(r"\b" + _SPACE.join(map(re.escape, text.split(" "))) + r"\b", re.IGNORECASE)

    found: list[Key] = []
    for code, terms in ((BANNED_WORD, rules.banned_words.terms), (FILLER_PHRASE, rules.filler_phrases.terms)):
        for text in terms:
            spans = tuple(m.span() for m in term(text).finditer(prose))
            if spans:
                found.append((code, text, spans))
    for character in rules.banned_characters.characters:
        run = "-{2,}" if character.sequence == "--" else f"(?:{re.escape(character.sequence)})+"
        spans = tuple(m.span() for m in re.finditer(run, prose))
        if spans:
            found.append((BANNED_CHARACTER, character.sequence, spans))
    openings = re.compile(rf"^(?:{'|'.join(rules.h2.openings)})\b", re.IGNORECASE)
    headings = [(m.span(1), m.group(1)) for m in re.finditer(r"^## (.*?)[ \t]*$", body, re.MULTILINE)]
    texts = [_EMOJI.sub("", _NOT_PROSE.sub("", text)).strip() for _, text in headings]
    offending = tuple(
        span
        for (span, _), text in zip(headings, texts, strict=True)
        if not (text.endswith("?") or openings.match(text))
    )
    if not headings:
        found.append((H2_MISSING, "", ()))
    elif (len(headings) - len(offending)) / len(headings) < rules.h2.min_ratio:
        found.append((H2_NOT_QUESTION, "", offending))
    if len(set(re.findall(r"\[[^\]]*\]\(/writing/([a-z0-9-]+)\)", body))) < rules.internal_links.minimum:
        found.append((INTERNAL_LINKS_MISSING, "", ()))
    for component in rules.components.required:
        if not re.search(rf"<{component.name}[\s/>]", body):
            found.append((COMPONENT_MISSING, component.name, ()))
    if sources and not any(source in body for source in sources):
        found.append((CITATION_MISSING, "", ()))
    if proof_terms and not any(term(t).search(prose) for t in proof_terms):
        found.append((PROOF_POINT_MISSING, "", ()))
    return sorted(found)


def words(text: str) -> list[str]:
    return text.split()


def generated_draft(rng: random.Random, rules: DraftRules) -> tuple[str, list[str]]:
    """A prose-only draft built from a vocabulary of banned words, near misses, headings, links, dashes, components,
    sources and proof terms, wrapped so that phrases sometimes cross a line break."""
    plain = words("the team we data churn pricing plan ships because when with for after each most clear fast")
    near_misses = words("robustness elevator catalysts unlockable testaments notable important re-leverage synergy's")
    near_phrases = ["in order of", "at the end of the week", "the truth was", "dive in"]
    sources = rng.sample([f"https://data.example.org/r/{n}-study" for n in range(1, 6)], rng.randint(0, 2))

    def token() -> str:
        roll = rng.random()
        if roll < 0.02:
            return (
                rng.choice(rules.banned_words.terms).upper()
                if rng.random() < 0.2
                else rng.choice(rules.banned_words.terms)
            )
        if roll < 0.03:
            phrase = rng.choice(rules.filler_phrases.terms)
            return phrase.replace("'", "\u2019") if rng.random() < 0.3 else phrase.capitalize()
        if roll < 0.06:
            return rng.choice(near_misses + near_phrases)
        if roll < 0.075:
            return rng.choice(["\u2014", " \u2014 ", "--", "---"])
        if roll < 0.09:
            return f"[{rng.choice(plain)}](/writing/{rng.choice(plain)}-{rng.choice(['guide', 'robust', 'delve'])})"
        if roll < 0.1 and sources:
            return rng.choice([f"[study]({rng.choice(sources)})", f"{rng.choice(sources)}."])
        if roll < 0.105:
            return rng.choice(PROOF_TERMS)
        return rng.choice(plain)

    blocks = []
    for _ in range(rng.randint(2, 7)):
        if rng.random() < 0.8:
            heading = rng.choice(
                ["How does {} work?", "What is {}", "Why {} matters", "Our {}", "{} results", "Is {} fast"]
            )
            emoji = rng.choice(["", "\U0001f680 "])
            decoration = rng.choice(["", "", " {/*anchor*/}", " {#anchor}", " \u2705"])
            blocks.append(f"## {emoji}{heading.format(rng.choice(plain))}{decoration}")
        tokens = [token() for _ in range(rng.randint(15, 60))]
        lines, line = [], ""
        for word in " ".join(tokens).split(" "):
            if line and len(line) + len(word) > rng.randint(30, 90):
                lines.append(line)
                line = word
            else:
                line = f"{line} {word}".strip()
        blocks.append("\n".join([*lines, line]) + ".")
        if rng.random() < 0.3:
            blocks.append(rng.choice(["<ArticleCallout />", "<ArticleCta />", "<ArticleCaseStudyCallout />"]))
    return "\n\n".join(blocks) + "\n", sources


def test_it_finds_what_the_plain_regex_loop_finds_on_prose() -> None:
    rules = default_rules()
    rng = random.Random(4)
    seen: set[str] = set()
    for _ in range(300):
        body, sources = generated_draft(rng, rules)
        ours = sorted(
            (f.code, f.subject, f.spans)
            for f in check_draft(body=body, rules=rules, source_urls=sources, proof_terms=PROOF_TERMS)
        )
        assert ours == plain_findings(body, rules, sources, PROOF_TERMS), body
        seen.update(f[0] for f in ours)
    assert seen == set(FINDING_CODES)  # every rule was exercised, not only the easy ones


def test_it_reads_crlf_line_endings_like_lf_with_spans_into_the_crlf_body() -> None:
    body = clean_draft(intro="A robust plan \u2014 at the end\nof the day.") + "\n## Our results\n\nText.\n"
    crlf_body = body.replace("\n", "\r\n")
    lf, crlf = check(body), check(crlf_body)
    assert [(f.code, f.subject) for f in crlf] == [(f.code, f.subject) for f in lf]
    assert [crlf_body[s:e].replace("\r\n", "\n") for f in crlf for s, e in f.spans] == [
        body[s:e] for f in lf for s, e in f.spans
    ]
    assert FILLER_PHRASE in codes(crlf)


def test_a_thread_s_recent_parses_survive_other_threads_parsing_their_drafts(monkeypatch):
    """The gate and the repairs read each body several times on one thread; 31 other grading threads parsing their
    own drafts meanwhile must not make it parse them again."""
    parsed: list[str] = []
    parse = structure._parse
    monkeypatch.setattr(structure, "_parse", lambda body: parsed.append(body) or parse(body))
    mine = "## Mine\n\nA body this thread reads again.\n"
    first = parse_draft(mine)
    others = threading.Thread(target=lambda: [parse_draft(f"## Other {n}\n\nText {n}.\n") for n in range(64)])
    others.start()
    others.join()
    assert parse_draft(mine) is first and parsed.count(mine) == 1

"""An editor's rules document is refused per field, with a message that says what to change."""

import pytest

from grading.checks.rules import DraftRules, RulesInvalid, default_rules, rules_validate


def document(**changes: object) -> dict:
    """The v1 document with `section__key=value` (or `key=value` at the top) changed."""
    rules = default_rules().model_dump(mode="json")
    for path, value in changes.items():
        section, _, key = path.partition("__")
        if key:
            rules[section][key] = value
        else:
            rules[section] = value
    return rules


def errors_of(rules: dict) -> dict[str, list[str]]:
    with pytest.raises(RulesInvalid) as invalid:
        rules_validate(rules)
    return invalid.value.errors


def test_the_v1_document_is_valid_and_comes_back_as_it_was():
    assert rules_validate(document()) == default_rules()


def test_a_banned_word_listed_twice_in_any_case_is_refused():
    terms = [*default_rules().banned_words.terms, "Gizmo", "gizmo"]
    assert errors_of(document(banned_words__terms=terms)) == {
        "banned_words.terms": ["'gizmo' is listed twice (as 'Gizmo' too)."]
    }


def test_a_filler_phrase_listed_twice_with_another_apostrophe_and_spacing_is_refused():
    terms = ["it's a deal", "It\u2019s  a deal"]
    assert errors_of(document(filler_phrases__terms=terms)) == {
        "filler_phrases.terms": ["'It\u2019s  a deal' is listed twice (as \"it's a deal\" too)."]
    }


@pytest.mark.parametrize("section, noun", [("banned_words", "banned word"), ("filler_phrases", "filler phrase")])
def test_an_empty_required_list_is_refused(section, noun):
    assert errors_of(document(**{f"{section}__terms": []})) == {
        f"{section}.terms": [f"List at least one {noun}: an empty list would switch this check off."]
    }


@pytest.mark.parametrize("entry", ["!!!", "...", "—", "* *"])
def test_a_banned_word_the_matcher_can_never_match_is_refused(entry):
    errors = errors_of(document(banned_words__terms=["leverage", entry]))
    assert errors == {
        "banned_words.terms": [
            f"{entry!r} has no letter or digit, so it can never be matched as a banned word "
            "(list punctuation under banned characters)."
        ]
    }


def test_a_heading_opening_that_can_never_match_or_is_listed_twice_is_refused():
    errors = errors_of(document(h2__openings=["How", "how", "?!"]))
    assert errors == {
        "h2.openings": [
            "'how' is listed twice (as 'How' too).",
            "'?!' has no letter or digit, so it can never be matched as a heading opening.",
        ]
    }


def test_a_banned_character_that_is_whitespace_a_word_or_listed_twice_is_refused():
    characters = [
        {"sequence": "\u2014", "name": "em dash", "substitute": ", "},
        {"sequence": "\t", "name": "tab", "substitute": " "},
        {"sequence": "ok", "name": "letters", "substitute": ""},
        {"sequence": "\u2014", "name": "", "substitute": "-"},
    ]
    errors = errors_of(document(banned_characters__characters=characters))
    assert errors == {
        "banned_characters.characters.1.sequence": [
            "Whitespace can never be a banned character: prose reads every run of it as one space."
        ],
        "banned_characters.characters.2.sequence": ["'ok' has letters or digits: list words under banned words."],
        "banned_characters.characters.3.sequence": ["'—' is listed twice."],
        "banned_characters.characters.3.name": ["Give it a name: the finding says it."],
    }


def test_a_component_required_twice_or_whose_template_does_not_use_it_is_refused():
    required = [
        {"name": "ArticleCta", "template": "<ArticleCta />", "placement": "end"},
        {"name": "ArticleCta", "template": "<ArticleCta />", "placement": "end"},
        {"name": "ArticleCallout", "template": "<Other />", "placement": "end"},
    ]
    errors = errors_of(document(components__required=required))
    assert errors == {
        "components.required.1.name": ["ArticleCta is required twice"],
        "components.required.2": ["the template for ArticleCallout must contain <ArticleCallout"],
    }


ENDS_A_LINK = "it may not contain spaces, brackets, parentheses or backticks, which end a Markdown link"


@pytest.mark.parametrize(
    "pattern, message",
    [
        ("/writing/ {slug}", ENDS_A_LINK),
        ("/writing/({slug})", ENDS_A_LINK),
        ("/writing/{category}/{slug}", "{slug} is the only placeholder it may hold"),
    ],
)
def test_a_link_pattern_that_does_not_compile_into_a_link_is_refused(pattern, message):
    assert errors_of(document(internal_links__pattern=pattern)) == {
        "internal_links.pattern": [f"The pattern does not compile into a link: {message}."]
    }


def test_a_link_pattern_without_its_slug_is_refused_by_the_document_itself():
    assert errors_of(document(internal_links__pattern="/writing/")) == {
        "internal_links.pattern": ["the pattern is a site path holding {slug} once, e.g. /writing/{slug}"]
    }


@pytest.mark.parametrize("threshold, message", [(0.5, "must be at least 1"), (10.5, "must be at most 10")])
def test_a_threshold_outside_the_judges_1_to_10_scale_is_refused(threshold, message):
    assert errors_of(document(threshold=threshold)) == {"threshold": [message]}


def test_a_negative_band_is_refused():
    assert errors_of(document(band=-0.5)) == {"band": ["must be at least 0"]}


@pytest.mark.parametrize("band", [7.0, 6.5])
def test_a_band_not_below_the_threshold_or_reaching_under_1_is_refused(band):
    assert errors_of(document(threshold=7.0, band=band)) == {
        "band": ["must be below the threshold and leave the band's start on the 1-10 scale: at most 6 with threshold 7"]
    }


def test_a_band_just_inside_the_scale_is_accepted():
    assert rules_validate(document(threshold=7.0, band=6.0)).band == 6.0


def test_a_stored_document_stays_readable_whatever_the_editor_checks():
    """Reading a published version applies only the document's own validation: it normalises and keeps it."""
    stored = document(banned_words__terms=["Gizmo", "gizmo"])
    assert DraftRules.model_validate(stored).banned_words.terms == ["gizmo"]

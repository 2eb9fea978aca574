"""Auto-repair of a draft's fixable findings (grading/checks/repairs.py). Pure Python: runs without Django."""

from __future__ import annotations

from collections.abc import Sequence

from grading.checks.checks import (
    BANNED_CHARACTER,
    BANNED_WORD,
    COMPONENT_MISSING,
    INTERNAL_LINKS_MISSING,
    Finding,
    check_draft,
)
from grading.checks.repairs import RelatedArticle, RepairResult, repair_draft
from grading.checks.rules import DraftRules, default_rules

SOURCE = "https://research.example.org/reports/churn-2025"
PROOF_TERMS = ["Northwind"]
SIBLINGS = [
    RelatedArticle("pricing-guide", "How to price a pilot"),
    RelatedArticle("onboarding-checklist", "The onboarding checklist \u2014 2025 edition"),
    RelatedArticle("churn-playbook", "Churn playbook"),
]

NEEDS_REPAIR = f"""Teams cut churn when they answer the first question fast \u2014 and Northwind did.

## How do teams cut churn?

Northwind cut churn by a third, per [the study]({SOURCE}). Run `deploy --force` first.

```sh
echo "keep -- this \u2014 as is"
```

## What should you measure first?

Weekly active accounts--nothing else. See [our pricing guide](/writing/pricing-guide).

## Why does onboarding matter?

Accounts that finish onboarding stay longer.
"""


class FakeSimilarArticles:
    """Stands in for the pgvector lookup: the siblings in a fixed similarity order, honouring `exclude` and `limit`."""

    def __init__(self, articles: Sequence[RelatedArticle] = SIBLINGS) -> None:
        self.articles = list(articles)
        self.calls: list[tuple[int, frozenset[str]]] = []

    def __call__(self, body: str, *, limit: int, exclude: frozenset[str]) -> list[RelatedArticle]:
        self.calls.append((limit, exclude))
        return [article for article in self.articles if article.slug not in exclude][:limit]


def check(body: str, rules: DraftRules) -> list[Finding]:
    return check_draft(body=body, rules=rules, source_urls=[SOURCE], proof_terms=PROOF_TERMS)


def repair(body: str, rules: DraftRules | None = None, related: FakeSimilarArticles | None = None) -> RepairResult:
    rules = rules or default_rules()
    return repair_draft(
        body=body,
        findings=check(body, rules),
        rules=rules,
        related_articles=related or FakeSimilarArticles(),
        draft_slug="this-draft",
    )


def custom_rules(**changes: object) -> DraftRules:
    document = default_rules().model_dump(mode="json")
    for path, value in changes.items():
        section, _, key = path.partition("__")
        document[section][key] = value
    return DraftRules.model_validate(document)


def test_it_repairs_a_draft_until_it_passes_the_repaired_rules() -> None:
    rules = default_rules()
    assert {f.code for f in check(NEEDS_REPAIR, rules)} == {BANNED_CHARACTER, INTERNAL_LINKS_MISSING, COMPONENT_MISSING}

    result = repair(NEEDS_REPAIR, rules)

    assert check(result.body, rules) == []
    assert {a.code for a in result.applied} == {BANNED_CHARACTER, INTERNAL_LINKS_MISSING, COMPONENT_MISSING}
    assert result.skipped == [] and result.changed


def test_it_returns_the_change_as_a_unified_diff_from_draft_to_repaired() -> None:
    result = repair(NEEDS_REPAIR)
    assert result.diff.startswith("--- draft\n+++ repaired\n@@ ")
    assert "-Teams cut churn when they answer the first question fast \u2014 and Northwind did.\n" in result.diff
    assert "+Teams cut churn when they answer the first question fast, and Northwind did.\n" in result.diff
    assert "+<ArticleCta />\n" in result.diff


def test_it_replaces_dashes_in_prose_but_not_in_code() -> None:
    body = repair(NEEDS_REPAIR).body
    assert "Weekly active accounts, nothing else." in body
    assert 'echo "keep -- this \u2014 as is"' in body and "`deploy --force`" in body


def test_it_fits_the_substitute_to_where_the_dash_stands() -> None:
    rules = custom_rules(repair__internal_links_missing=False, repair__component_missing=False)
    body = "\u2014 Jane, on stage\nIt ends \u2014\nFast\u2014cheap; slow \u2014, dear; a \u2014 b.\n"
    assert repair(body, rules).body == "Jane, on stage\nIt ends,\nFast, cheap; slow, dear; a, b.\n"


def test_it_never_patches_a_fatal_finding() -> None:
    body = NEEDS_REPAIR.replace("Weekly active", "Leverage weekly active")
    result = repair(body)
    assert "Leverage weekly active" in result.body
    assert [f.code for f in check(result.body, default_rules())] == [BANNED_WORD]
    assert BANNED_WORD not in {a.code for a in result.applied}


def test_it_does_not_repair_a_rule_switched_off_in_the_repair_map() -> None:
    rules = custom_rules(repair__banned_character=False)
    result = repair(NEEDS_REPAIR, rules)
    assert "\u2014 and Northwind" in result.body
    assert BANNED_CHARACTER not in {a.code for a in result.applied}
    assert {f.subject for f in check(result.body, rules)} == {"\u2014", "--"}


def test_it_does_not_repair_a_rule_the_criteria_made_fatal() -> None:
    rules = custom_rules(internal_links__severity="fatal")
    result = repair(NEEDS_REPAIR, rules)
    assert "Related reading" not in result.body
    assert [f.code for f in check(result.body, rules)] == [INTERNAL_LINKS_MISSING]


def test_it_links_the_most_similar_articles_not_yet_linked() -> None:
    related = FakeSimilarArticles()
    result = repair(NEEDS_REPAIR, related=related)
    # One link exists and the minimum is two: ask for one more (plus spares), excluding what is linked and the draft.
    limit, exclude = related.calls[0]
    assert limit >= 1 and exclude == frozenset({"pricing-guide", "this-draft"})
    assert (
        "Related reading: [The onboarding checklist, 2025 edition](/writing/onboarding-checklist)\n\n<ArticleCta />\n"
    ) in result.body


def test_it_passes_over_a_sibling_whose_title_would_break_a_rule() -> None:
    related = FakeSimilarArticles(
        [RelatedArticle("seamless-setup", "A seamless setup"), RelatedArticle("churn-playbook", "Churn [playbook]")]
    )
    body = repair(NEEDS_REPAIR, related=related).body
    assert "/writing/seamless-setup" not in body
    assert "Related reading: [Churn \\[playbook\\]](/writing/churn-playbook)" in body


def test_it_skips_the_link_repair_when_no_related_article_is_found() -> None:
    result = repair(NEEDS_REPAIR, related=FakeSimilarArticles([]))
    assert "Related reading" not in result.body
    assert [s.code for s in result.skipped] == [INTERNAL_LINKS_MISSING]
    assert [f.code for f in check(result.body, default_rules())] == [INTERNAL_LINKS_MISSING]


def test_it_adds_as_many_links_as_the_minimum_needs() -> None:
    rules = custom_rules(internal_links__minimum=3)
    result = repair(NEEDS_REPAIR, rules)
    assert "[How to price a pilot]" not in result.body.split("Related reading")[1]  # already linked: not again
    assert "(/writing/onboarding-checklist), [Churn playbook](/writing/churn-playbook)" in result.body
    assert check(result.body, rules) == []


def test_it_inserts_each_component_at_its_configured_place() -> None:
    body = repair(NEEDS_REPAIR).body
    sections = body.split("\n## ")
    assert '<ArticleCallout variant="summary" />' in sections[1]  # the end of the first section
    assert sections[3].startswith("Why does onboarding matter?")
    assert sections[2].rstrip().endswith("<ArticleCaseStudyCallout />")  # just before the last section
    assert body.endswith("<ArticleCta />\n")


def test_it_skips_a_component_that_would_land_inside_an_unclosed_code_fence() -> None:
    rules = custom_rules(repair__internal_links_missing=False)
    body = NEEDS_REPAIR + "\n```sh\nnever closed\n"
    result = repair(body, rules)
    assert [(s.code, "inside code" in s.reason) for s in result.skipped] == [(COMPONENT_MISSING, True)]
    assert "<ArticleCta />" not in result.body


def test_it_changes_nothing_and_returns_no_diff_when_nothing_is_due() -> None:
    body = repair(NEEDS_REPAIR).body
    result = repair(body)
    assert (result.body, result.applied, result.diff, result.changed) == (body, [], "", False)


def test_it_keeps_a_windows_edited_draft_in_crlf_line_endings() -> None:
    body = NEEDS_REPAIR.replace("\n", "\r\n")
    result = repair(body)
    assert "\n" not in result.body.replace("\r\n", "")
    assert check(result.body, default_rules()) == []

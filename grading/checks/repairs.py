"""Auto-repair of a draft's fixable findings. Pure Python: no Django.

A repair only does what a careful editor would do without reading for meaning: swap a banned character for its
substitute, link the most similar sibling articles, insert a required component from the criteria's template. Fatal
findings (banned words, headings, citations, proof points) need writing and are never patched. Every repair is checked
against a fresh parse before it is kept, and the whole change is returned as a unified diff for the review.
Re-checking the repaired body is the caller's job (the gate), as is recording the diff.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from grading.checks.checks import (
    BANNED_CHARACTER,
    COMPONENT_MISSING,
    INTERNAL_LINKS_MISSING,
    Finding,
    internal_link_slugs,
    unix_newlines,
    vocabulary_matcher,
)
from grading.checks.prose import visible_prose
from grading.checks.rules import BannedCharacter, DraftRules, RequiredComponent
from grading.checks.structure import DraftStructure, parse_draft

# Ask the similarity lookup for a few more articles than needed: a candidate whose title would itself break a rule
# (a banned word in an old title) is passed over rather than written into the draft.
_SPARE_CANDIDATES = 5
_SLUG = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
_LINK_TEXT_SPECIALS = re.compile(r"([\\\[\]*_`<>])")
_PLACEMENT_WORDS = {
    "after_first_section": "after the first section",
    "before_last_section": "before the last section",
    "end": "at the end",
}


class RelatedArticle(NamedTuple):
    slug: str
    title: str


class RelatedArticles(Protocol):
    """The sibling articles most similar to `body`, most similar first, at most `limit`, none whose slug is in
    `exclude` (already linked, or the draft itself). The gate passes a pgvector lookup over the org's Articles."""

    def __call__(self, body: str, *, limit: int, exclude: frozenset[str]) -> Sequence[tuple[str, str]]: ...


@dataclass(frozen=True)
class AppliedRepair:
    code: str
    description: str


@dataclass(frozen=True)
class SkippedRepair:
    code: str
    reason: str


@dataclass(frozen=True)
class RepairResult:
    body: str
    applied: list[AppliedRepair] = field(default_factory=list)
    diff: str = ""  # unified diff draft -> repaired; empty when nothing changed
    skipped: list[SkippedRepair] = field(default_factory=list)  # repairs that were due but could not be made

    @property
    def changed(self) -> bool:
        return bool(self.applied)


def repair_draft(
    *,
    body: str,
    findings: list[Finding],
    rules: DraftRules,
    related_articles: RelatedArticles,
    draft_slug: str | None = None,
) -> RepairResult:
    """Patch the fixable findings of `body` that the rules' repair map allows.

    1. Banned characters, each swapped for its substitute (never inside code).
    2. Internal links: one "Related reading" line with the most similar articles not yet linked, enough to reach
       the minimum, placed before any trailing components (a closing call to action stays last).
    3. Missing components, in the rules' order, each at its configured place.
    `findings` say which repairs are due; where to patch is read from the current body, so no repair acts on offsets
    an earlier one moved. `draft_slug` keeps the draft from linking to itself.
    """
    due = {f.code for f in findings if f.severity == "fixable" and rules.repair.allows(f.code)}
    outcomes: list[AppliedRepair | SkippedRepair | None] = []
    repaired = unix_newlines(body)  # as the checks read it; a CRLF draft gets its CRLF back below
    if BANNED_CHARACTER in due:
        repaired, replaced = replace_banned_characters(repaired, rules)
        outcomes += replaced
    if INTERNAL_LINKS_MISSING in due:
        repaired, outcome = _add_related_reading(repaired, rules, related_articles, draft_slug)
        outcomes.append(outcome)
    if COMPONENT_MISSING in due:
        for name in [f.subject for f in findings if f.code == COMPONENT_MISSING]:
            repaired, outcome = _insert_component(repaired, rules, name)
            outcomes.append(outcome)
    applied = [outcome for outcome in outcomes if isinstance(outcome, AppliedRepair)]
    skipped = [outcome for outcome in outcomes if isinstance(outcome, SkippedRepair)]
    if not applied:
        repaired = body
    elif "\r\n" in body:
        repaired = repaired.replace("\n", "\r\n")
    return RepairResult(body=repaired, applied=applied, diff=unified_diff(body, repaired), skipped=skipped)


# --- banned characters ----------------------------------------------------------------------------------------------
def replace_banned_characters(body: str, rules: DraftRules) -> tuple[str, list[AppliedRepair]]:
    """Every banned character in the prose (never in code) swapped for its substitute, one repair per character."""
    characters = {c.sequence: c for c in rules.banned_characters.characters}
    structure = parse_draft(body)
    found = vocabulary_matcher(rules).scan(structure.visible.text, structure.haystack)
    edits = sorted(
        (start, end, characters[term])
        for (kind, term), spans in found.items()
        if kind == "character"
        for start, end in structure.visible.body_spans(spans)
    )
    if not edits:
        return body, []
    counts: dict[str, int] = {}
    pieces, cursor = [], 0
    for start, end, character in edits:
        if start < cursor:
            continue
        left, right, replacement = _dash_edit(body, start, end, character)
        pieces += [body[cursor:left], replacement]
        cursor = right
        counts[character.sequence] = counts.get(character.sequence, 0) + 1
    pieces.append(body[cursor:])
    applied = [
        AppliedRepair(
            BANNED_CHARACTER, f'Replaced {count} × {characters[seq].name} "{seq}" with "{characters[seq].substitute}".'
        )
        for seq, count in counts.items()
    ]
    return "".join(pieces), applied


def _dash_edit(body: str, start: int, end: int, character: BannedCharacter) -> tuple[int, int, str]:
    """The range to replace and its replacement. The spaces around a dash belong to it ("a — b" -> "a, b"); at the
    start of a line the dash just goes (no line opens with a comma); before a line end or next to punctuation the
    substitute loses the spaces or the punctuation it would double."""
    left, right = start, end
    while left > 0 and body[left - 1] in " \t":
        left -= 1
    while right < len(body) and body[right] in " \t":
        right += 1
    substitute = character.substitute
    if left == 0 or body[left - 1] in "\r\n":
        return start, right, ""
    if right == len(body) or body[right] in "\r\n":
        return left, right, substitute.rstrip()
    if body[right] in ",.;:!?)":
        return left, right, ""
    if body[left - 1] in ",.;:!?(":
        return left, right, " "
    return left, right, substitute


# --- internal links -------------------------------------------------------------------------------------------------
def _add_related_reading(
    body: str, rules: DraftRules, related_articles: RelatedArticles, draft_slug: str | None
) -> tuple[str, AppliedRepair | SkippedRepair | None]:
    rule = rules.internal_links
    structure = parse_draft(body)
    linked = internal_link_slugs(structure, rule)
    needed = rule.minimum - len(linked)
    if needed <= 0:
        return body, None  # the findings were older than the body
    exclude = frozenset([*linked, *([draft_slug] if draft_slug else [])])
    candidates = related_articles(body, limit=needed + _SPARE_CANDIDATES, exclude=exclude)
    chosen = _usable_articles(candidates, exclude, rules)[:needed]
    if not chosen:
        return body, SkippedRepair(INTERNAL_LINKS_MISSING, "No related article that is not linked yet was found.")
    links = ", ".join(f"[{_escape_link_text(article.title)}]({rule.href_for(article.slug)})" for article in chosen)
    repaired = insert_block(body, structure.tail_start, f"{rule.related_reading_label}: {links}")
    now_linked = set(internal_link_slugs(parse_draft(repaired), rule))
    if not {article.slug for article in chosen} <= now_linked:
        return body, SkippedRepair(INTERNAL_LINKS_MISSING, "The related-reading line would not parse as links.")
    targets = ", ".join(f"{rule.href_for(a.slug)} ({a.title})" for a in chosen)
    shortfall = f" Only {len(chosen)} of the {needed} needed articles were available." if len(chosen) < needed else ""
    return repaired, AppliedRepair(INTERNAL_LINKS_MISSING, f"Added {rule.related_reading_label}: {targets}.{shortfall}")


def _usable_articles(
    candidates: Iterable[tuple[str, str]], exclude: frozenset[str], rules: DraftRules
) -> list[RelatedArticle]:
    """Candidates in order, minus duplicates, excluded or malformed slugs, and titles that would break a vocabulary
    rule; titles get banned characters swapped, since this text is ours to write."""
    usable: dict[str, RelatedArticle] = {}
    for slug, title in candidates:
        if slug in exclude or slug in usable or not _SLUG.fullmatch(slug) or not title.strip():
            continue
        clean_title, _ = replace_banned_characters(" ".join(title.split()), rules)
        if vocabulary_matcher(rules).scan(visible_prose(clean_title).text):
            continue
        usable[slug] = RelatedArticle(slug, clean_title)
    return list(usable.values())


def _escape_link_text(text: str) -> str:
    return _LINK_TEXT_SPECIALS.sub(r"\\\1", text)


# --- components -----------------------------------------------------------------------------------------------------
def _insert_component(body: str, rules: DraftRules, name: str) -> tuple[str, AppliedRepair | SkippedRepair | None]:
    component = next((c for c in rules.components.required if c.name == name), None)
    if component is None:
        return body, SkippedRepair(COMPONENT_MISSING, f"<{name}> is not a required component of these rules.")
    structure = parse_draft(body)
    if name in structure.components:
        return body, None  # the findings were older than the body
    repaired = insert_block(body, _placement_offset(structure, component), component.template)
    if name not in parse_draft(repaired).components:
        return body, SkippedRepair(COMPONENT_MISSING, f"<{name}> would land inside code at its configured place.")
    where = _PLACEMENT_WORDS[component.placement]
    return repaired, AppliedRepair(COMPONENT_MISSING, f"Inserted <{name}> {where}: {component.template}")


def _placement_offset(structure: DraftStructure, component: RequiredComponent) -> int:
    """Where a component goes. Sections are top-level H2s; without enough of them the component goes at the end,
    in front of trailing components."""
    sections = [h2.line_start for h2 in structure.h2s if h2.top_level]
    if component.placement == "end":
        return len(structure.body)
    if component.placement == "after_first_section" and len(sections) >= 2:
        return sections[1]
    if component.placement == "before_last_section" and sections:
        return sections[-1]
    return structure.tail_start


def insert_block(body: str, offset: int, block: str) -> str:
    """`block` as its own Markdown block at `offset` (a line start or the end): blank lines around it, so MDX reads a
    component as a block and a line of links as a paragraph."""
    before = body[:offset].rstrip("\r\n")
    after = body[offset:].lstrip("\r\n")
    block = "\n".join(block.strip("\r\n").splitlines())
    return (before + "\n\n" if before else "") + block + ("\n\n" + after if after else "\n")


# --- the record -----------------------------------------------------------------------------------------------------
def unified_diff(before: str, after: str) -> str:
    """A unified diff labelled draft -> repaired, as operators read it on the review; empty when nothing changed."""
    if before == after:
        return ""
    return "".join(difflib.unified_diff(_diff_lines(before), _diff_lines(after), fromfile="draft", tofile="repaired"))


def _diff_lines(text: str) -> list[str]:
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += "\n"  # a missing final newline is not a change worth a diff line
    return lines

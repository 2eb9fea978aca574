"""Draft checks over 10,000 generated ~1,500-word drafts with the full v1 rules, against the plain per-word regex loop.

Also timed alone, in the same run: reading the prose as a reader sees it (grading/checks/prose.py: references decoded,
invisible characters and inline tags dropped, look-alike letters read as Latin), the step the checks added so that
spelling cannot hide a finding. Its share of the checks' time is what the step costs per draft.

The plain loop is what the rules say, written the obvious way: one `re.finditer` per banned word, phrase and
character over the body (link destinations and URLs blanked, as the rules define prose), the H2 ratio by regex over
`^## ` lines, links, components, citations and proof terms by regex. It is slow, so it is timed on a subset and its
per-draft time extrapolated; the findings of both are compared on that subset and must be identical.

Also reported, in the same run: a bare markdown-it parse, a bare automaton pass over the prose and the
vocabulary part of the plain loop alone, so the pipeline can be read against one pass over the text.

Run: `make bench BENCH=checks`.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable

from markdown_it import MarkdownIt

from grading.checks.checks import Finding, check_draft, vocabulary_matcher
from grading.checks.prose import visible_prose
from grading.checks.rules import DraftRules, default_rules
from grading.checks.structure import parse_draft

DRAFTS = 10_000
COMPARED = 1_000  # drafts the plain loop runs on (timed, then extrapolated to DRAFTS)
WORDS_PER_DRAFT = 1_500
SEED = 20250407


def _words(text: str) -> list[str]:
    return text.split()


SOURCES = [f"https://research.example.org/reports/{n}-study" for n in range(1, 9)]
PROOF_TERMS = ["Northwind", "Contoso Retail", "3.4 million", "Fabrikam"]
FILLER_WORDS = _words(
    """
    the a our team we customers data pipeline quarter revenue churn pricing onboarding support product launch
    metrics cost time week month report plan choose build ship test measure review write call email dashboard
    because when with for from into about after before while which that this those their its more less fewer faster
    cheaper simpler clear direct useful honest small large first second last every each most some
    """
)
NEAR_MISSES = _words(  # contain a banned word but are not one: never a finding
    """
    robustness elevator catalysts unlockable paradigmatic testaments seamlessness beacons enigmas symphonies notable
    additional important fundamental realmless
    """
)
BOUNDARY_TRAPS = _words("showcasing's re-leverage Leverage's DELVE Robust synergy's")  # banned words all the same
NEAR_MISS_PHRASES = ["in order of", "at the end of the week", "the truth was", "dive in", "deep diving", "fun facts"]
EMOJI = ["🚀 ", "", "", "✅ ", ""]
QUESTION_HEADINGS = ["How does {} work?", "What is {}", "Why {} matters", "When should you {}?", "Can {} scale?"]
PLAIN_HEADINGS = ["Our approach to {}", "Results", "{} in practice", "Lessons from {}"]


def generate_draft(rng: random.Random, banned: list[str], phrases: list[str], words: int) -> tuple[str, list[str]]:
    """A prose-only MDX draft (no code): headings with anchors and emoji, internal and source links, bare URLs, dashes,
    components, banned words, filler phrases, near misses and boundary traps, wrapped at 60-100 columns so phrases
    cross line breaks."""
    blocks: list[str] = []
    sources = rng.sample(SOURCES, rng.randint(0, 3))
    slop = rng.choice([0.0, 0.0, 0.5, 1.0, 2.0])  # how often this draft's writer slips: some drafts never do
    written = 0
    while written < words:
        if rng.random() < 0.18:
            template = rng.choice(QUESTION_HEADINGS if rng.random() < 0.75 else PLAIN_HEADINGS)
            anchor = rng.choice(["", "", " {/*section*/}", " {#section-id}"])
            blocks.append(f"## {rng.choice(EMOJI)}{template.format(rng.choice(FILLER_WORDS))}{anchor}")
        paragraph, count = _paragraph(rng, banned, phrases, sources, slop)
        blocks.append(paragraph)
        written += count
        if rng.random() < 0.05:
            blocks.append(rng.choice(['<ArticleCallout variant="summary" />', "<ArticleCaseStudyCallout />"]))
    if rng.random() < 0.6:
        blocks.append("<ArticleCta />")
    return "\n\n".join(blocks) + "\n", sources


def _paragraph(
    rng: random.Random, banned: list[str], phrases: list[str], sources: list[str], slop: float
) -> tuple[str, int]:
    tokens: list[str] = []
    for _ in range(rng.randint(40, 90)):
        if rng.random() < 0.005 * slop:
            tokens.append(_slip(rng, banned, phrases))
            continue
        roll = rng.random()
        if roll < 0.006:
            tokens.append(rng.choice(NEAR_MISSES + NEAR_MISS_PHRASES))
        elif roll < 0.009:
            tokens.append(rng.choice(["—", " — ", "--", "---"]))
        elif roll < 0.014:
            tokens.append(f"[{rng.choice(FILLER_WORDS)} guide](/writing/{rng.choice(FILLER_WORDS)}-guide)")
        elif roll < 0.016 and sources:
            tokens.append(rng.choice([f"[the study]({rng.choice(sources)})", f"{rng.choice(sources)}."]))
        elif roll < 0.018:
            tokens.append(rng.choice(PROOF_TERMS))
        else:
            tokens.append(rng.choice(FILLER_WORDS))
    text = " ".join(tokens).replace(" — ", "—" if rng.random() < 0.5 else " — ") + "."
    return _wrap(text, rng.randint(60, 100)), len(tokens)


def _slip(rng: random.Random, banned: list[str], phrases: list[str]) -> str:
    """A banned word or a filler phrase, in the case and apostrophes a writer might use."""
    if rng.random() < 0.1:
        return rng.choice(BOUNDARY_TRAPS)
    if rng.random() < 0.6:
        word = rng.choice(banned)
        return word.upper() if rng.random() < 0.1 else word
    phrase = rng.choice(phrases)
    return phrase.replace("'", "\u2019") if rng.random() < 0.3 else phrase.capitalize()


def _wrap(text: str, width: int) -> str:
    lines, line = [], ""
    for word in text.split(" "):
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return "\n".join([*lines, line])


# --- the plain loop -------------------------------------------------------------------------------------------------
Key = tuple[str, str, tuple[tuple[int, int], ...]]


def plain_checker(rules: DraftRules) -> Callable[[str, list[str], list[str]], list[Key]]:
    """The rules as one regex per term, compiled once (the loop, not the compilation, is what is timed)."""
    words = [(w, _term_pattern(w)) for w in rules.banned_words.terms]
    phrases = [(p, _term_pattern(p)) for p in rules.filler_phrases.terms]
    characters = [(c.sequence, re.compile(_run_of(c.sequence))) for c in rules.banned_characters.characters]
    openings = re.compile(rf"^(?:{'|'.join(re.escape(o) for o in rules.h2.openings)})\b", re.IGNORECASE)
    h2_line = re.compile(r"^## (.*?)[ \t]*$", re.MULTILINE)
    link = re.compile(r"\[[^\]]*\]\(/writing/([A-Za-z0-9][A-Za-z0-9_-]*)\)")
    not_prose = re.compile(r"\]\([^)]*\)|https?://\S+|\{/\*.*?\*/\}|\{#[^}\s]*\}")
    emoji = re.compile(r"[\U0001F300-\U0001FAFF\u2600-\u27BF\uFE0F]")

    def check(body: str, sources: list[str], proof_terms: list[str]) -> list[Key]:
        prose = not_prose.sub(lambda m: " " * len(m.group()), body).replace("\u2019", "'")
        found: list[Key] = []
        for code, terms in (("banned_word", words), ("filler_phrase", phrases), ("banned_character", characters)):
            for term, pattern in terms:
                spans = tuple(m.span() for m in pattern.finditer(prose))
                if spans:
                    found.append((code, term, spans))
        headings = [(m.span(1), emoji.sub("", not_prose.sub("", m.group(1))).strip()) for m in h2_line.finditer(body)]
        if len(headings) < rules.h2.min_count:
            found.append(("h2_missing", "", ()))
        offending = tuple(span for span, text in headings if not (text.endswith("?") or openings.match(text)))
        if headings and (len(headings) - len(offending)) / len(headings) < rules.h2.min_ratio:
            found.append(("h2_not_question", "", offending))
        if len(set(link.findall(body))) < rules.internal_links.minimum:
            found.append(("internal_links_missing", "", ()))
        for component in rules.components.required:
            if not re.search(rf"<{component.name}[\s/>]", body):
                found.append(("component_missing", component.name, ()))
        if sources and not any(source in body for source in sources):
            found.append(("citation_missing", "", ()))
        if proof_terms and not any(_term_pattern(term).search(prose) for term in proof_terms):
            found.append(("proof_point_missing", "", ()))
        return sorted(found)

    return check


def _term_pattern(term: str) -> re.Pattern[str]:
    """A whole-word, case-insensitive term; a line break may stand for a space between its words."""
    return re.compile(r"\b" + r"[ \t\r\n\u00a0]".join(map(re.escape, term.split(" "))) + r"\b", re.IGNORECASE)


def _run_of(sequence: str) -> str:
    """A banned character and its touching repeats ("---" is one occurrence of "--")."""
    if len(set(sequence)) == 1:
        return f"{re.escape(sequence[0])}{{{len(sequence)},}}"
    return f"(?:{re.escape(sequence)})+"


def finding_keys(findings: list[Finding]) -> list[Key]:
    return sorted((f.code, f.subject, f.spans) for f in findings)


def plain_vocabulary(rules: DraftRules) -> Callable[[str], list[Key]]:
    """The vocabulary part of the plain loop alone: one regex per banned word, phrase and character."""
    terms = [
        *(("banned_word", w, _term_pattern(w)) for w in rules.banned_words.terms),
        *(("filler_phrase", p, _term_pattern(p)) for p in rules.filler_phrases.terms),
        *(
            ("banned_character", c.sequence, re.compile(_run_of(c.sequence)))
            for c in rules.banned_characters.characters
        ),
    ]

    def scan(prose: str) -> list[Key]:
        found = []
        for code, term, pattern in terms:
            spans = tuple(m.span() for m in pattern.finditer(prose))
            if spans:
                found.append((code, term, spans))
        return found

    return scan


def _one_pass_figures(
    rules: DraftRules, drafts: list[tuple[str, list[str]]], pipeline: float, plain: float, megabytes: float
) -> None:
    """How close the checks come to one pass over the text, in one run: a bare markdown-it parse of each draft
    (the commonmark preset, block and inline), a bare Aho-Corasick pass over its prose, the whole pipeline, and
    the per-word loop, whole and for the vocabulary alone (on the same prose as the automaton)."""
    sample = drafts[:COMPARED]
    structures = [parse_draft(body) for body, _ in sample]
    parser = MarkdownIt("commonmark")
    matcher = vocabulary_matcher(rules)
    per_term = plain_vocabulary(rules)
    per_draft_mb = megabytes / len(drafts)

    def timed(work: Callable[[], object]) -> float:
        started = time.perf_counter()
        work()
        return (time.perf_counter() - started) / len(sample)

    parse = timed(lambda: [parser.parse(body) for body, _ in sample])
    automaton = timed(lambda: [matcher.scan(s.prose) for s in structures])
    regexes = timed(lambda: [per_term(s.prose) for s in structures])
    for label, seconds in (
        ("bare markdown-it parse", parse),
        ("bare automaton pass over the prose", automaton),
        ("the whole check pipeline", pipeline),
        ("the seed's per-word loop, whole", plain),
        ("the per-word loop, vocabulary alone", regexes),
    ):
        print(f"{label:<38} {seconds * 1000:7.3f} ms/draft {per_draft_mb / seconds:8.2f} MB/s")
    print(
        f"pipeline / bare parse: {pipeline / parse:.2f}x (aim: within 2x); vocabulary: automaton "
        f"{regexes / automaton:.0f}x faster than one regex per term (aim: 100x), {plain / automaton:.0f}x the whole"
    )


# --- the run --------------------------------------------------------------------------------------------------------
def main() -> None:
    rules = default_rules()
    rng = random.Random(SEED)
    started = time.perf_counter()
    drafts = [
        generate_draft(rng, rules.banned_words.terms, rules.filler_phrases.terms, WORDS_PER_DRAFT)
        for _ in range(DRAFTS)
    ]
    megabytes = sum(len(body.encode()) for body, _ in drafts) / 1e6
    print(f"generated {DRAFTS:,} drafts, {megabytes:.1f} MB, in {time.perf_counter() - started:.1f} s")

    check_draft(body=drafts[0][0], rules=rules, source_urls=drafts[0][1], proof_terms=PROOF_TERMS)  # warm the cache
    started, started_cpu = time.perf_counter(), time.process_time()
    ours = [check_draft(body=body, rules=rules, source_urls=src, proof_terms=PROOF_TERMS) for body, src in drafts]
    ours_seconds, ours_cpu = time.perf_counter() - started, time.process_time() - started_cpu

    structures = [parse_draft(body) for body, _ in drafts]
    started, started_cpu = time.perf_counter(), time.process_time()
    for structure in structures:
        visible_prose(structure.body, structure.prose)
    visible_seconds, visible_cpu = time.perf_counter() - started, time.process_time() - started_cpu

    plain = plain_checker(rules)
    started = time.perf_counter()
    theirs = [plain(body, src, PROOF_TERMS) for body, src in drafts[:COMPARED]]
    plain_per_draft = (time.perf_counter() - started) / COMPARED

    mismatches = [i for i in range(COMPARED) if finding_keys(ours[i]) != theirs[i]]
    assert not mismatches, f"findings differ on drafts {mismatches[:10]}: {finding_keys(ours[mismatches[0]])}"
    vocabulary = sum(1 for findings in ours if any(f.code in ("banned_word", "filler_phrase") for f in findings))
    print(
        f"identical findings on {COMPARED:,} of {DRAFTS:,} drafts compared; {sum(map(len, ours)):,} findings in all, "
        f"{vocabulary:,} drafts with banned words or phrases, {sum(not f for f in ours):,} clean"
    )

    _one_pass_figures(rules, drafts, ours_seconds / DRAFTS, plain_per_draft, megabytes)

    ours_per_draft = ours_seconds / DRAFTS
    print(
        f"checks:     {ours_seconds:7.1f} s for {DRAFTS:,} drafts, {ours_per_draft * 1000:6.2f} ms/draft "
        f"({ours_cpu / DRAFTS * 1000:6.2f} ms CPU), {megabytes / ours_seconds:6.2f} MB/s"
    )
    without = ours_seconds - visible_seconds
    print(
        f"of which reading the prose as seen: {visible_seconds / DRAFTS * 1000:6.3f} ms/draft "
        f"({visible_cpu / DRAFTS * 1000:6.3f} ms CPU); checks without it {without / DRAFTS * 1000:6.2f} ms/draft, "
        f"with it {ours_seconds / without:.2f}x that"
    )
    print(
        f"plain loop: {plain_per_draft * DRAFTS:7.1f} s for {DRAFTS:,} drafts (timed on {COMPARED:,}, extrapolated), "
        f"{plain_per_draft * 1000:6.2f} ms/draft, {megabytes / (plain_per_draft * DRAFTS):6.2f} MB/s"
    )
    print(f"speed ratio: {plain_per_draft / ours_per_draft:.1f}x")


if __name__ == "__main__":
    main()

"""How sure the judge was of each answer it gave, read from its tokens' log-probabilities. Pure Python.

A check's confidence is the probability the judge gave its answer: the answer's first token's probability,
renormalised over the alternatives at that position that begin one of the check's allowed answers (several
alternatives that begin the same answer are merged). A draft's verdict (`pass_fail`) has the probability mass of
its overall score on the side of the pass threshold the judge took. What certificates are computed from
(grading/certify/) and what routing compares with a certified threshold.

A confidence stands only for an answer the judge gave: one the grader changed afterwards (no evidence cited, a
rule's veto, a finding) has none (`kept_confidences`), and a review with none records the source "".
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from functools import lru_cache
from itertools import accumulate
from typing import NamedTuple

from grading.checks.definitions import CheckSet
from grading.judge.client import TokenLogprobs
from grading.judge.scores import AMBIGUOUS_SHARE, score_distribution

# Review.confidence_source of a review whose confidences came from the judge's log-probabilities; of one whose
# came from the demo's offline judge, which states how strongly its rules matched (labelled as such, as it is).
LOGPROBS = "logprobs"
HEURISTIC = "heuristic"


def confidence_source(confidences: Mapping[str, float], source: str = LOGPROBS) -> str:
    """What a review records as where its confidences came from (the judgement's `source`): "" when it has none."""
    return source if confidences else ""


def check_confidences(
    token_logprobs: TokenLogprobs | None, checks: CheckSet, answers: Mapping[str, str | int | None]
) -> dict[str, float]:
    """Per check key, the probability the judge gave the answer it did (`answers[key]` as its reply wrote it: a
    string inside {"verdict": ...}, or a draft's score check's bare number; None, a null, has none). A check whose
    answer cannot be found in the tokens, or whose alternatives cannot be read, is left out."""
    confidences = {}
    tokens = _Tokens.of(token_logprobs)  # the reply's text and its tokens' ends, read once for all its checks
    for check in checks.checks:
        answer = answers.get(check.key)
        if isinstance(answer, bool) or answer is None:
            continue
        if isinstance(answer, int):
            confidence = score_confidence(token_logprobs, key=check.key, score=answer, scale=check.scale)
        else:
            confidence = _answer_confidence(tokens, key=check.key, answer=answer, answers=check.answers)
        if confidence is not None:
            confidences[check.key] = confidence
    return confidences


def answer_confidence(
    token_logprobs: TokenLogprobs | None, *, key: str, answer: str, answers: Sequence[str]
) -> float | None:
    """The probability the judge gave `answer` to the check `key` of its JSON reply (`"key": {"verdict": "answer"`),
    among the check's allowed `answers`; None when the tokens do not tell.

    1. Find the answer's first character on the joined text (so fence tokens in front, and however the tokenizer
       split `"verdict": "`, do not matter), and the token holding it; what that token holds before the answer
       (` "`, `":"`, or nothing) is its prefix.
    2. Read each alternative at that position as what it writes of an answer: it must begin with the same prefix
       (JSON's whitespace between structure aside); then its text up to a closing quote begins some answers. One
       that writes nothing of the answer yet (the prefix alone) is the tokenizer's split, not another answer: left
       out, as are those that begin no allowed answer.
    3. Alternatives that begin only the judge's answer are its mass; those that cannot be it, the others' mass.
       One that begins both (`"1"` of a 1-10 score, `"good"` beside `"good_enough"`) is read as the shorter answer
       when the longer ones are offered as tokens of their own; if it is the emitted token, the next token says
       how its mass splits (step 2 again, on what is written so far); any other such mass is left out when it is
       at most AMBIGUOUS_SHARE of the whole, and gives None when it is more.
    4. The confidence is the judge's answer's mass over the mass of all allowed answers.
    """
    return _answer_confidence(_Tokens.of(token_logprobs), key=key, answer=answer, answers=answers)


class _Tokens(NamedTuple):
    """A reply's tokens with their text joined and where each token ends in it."""

    entries: TokenLogprobs
    text: str
    ends: list[int]

    @classmethod
    def of(cls, token_logprobs: TokenLogprobs | None) -> _Tokens | None:
        if not token_logprobs:
            return None
        texts = token_logprobs.texts
        return cls(token_logprobs, "".join(texts), list(accumulate(map(len, texts))))


def _answer_confidence(tokens: _Tokens | None, *, key: str, answer: str, answers: Sequence[str]) -> float | None:
    if tokens is None:
        return None
    text = tokens.text
    match = _answer_pattern(key).search(text)
    if match is None or not text.startswith(f'{answer}"', match.end()):
        return None
    start = match.end()
    # The token holding the answer's first character: the first that ends after it.
    index = bisect_right(tokens.ends, start)
    if index == len(tokens.ends):
        return None
    token_start = tokens.ends[index] - len(tokens.entries[index].token)
    return _answer_share(tokens.entries, index, text[token_start:start], "", answer, tuple(answers))


@lru_cache(maxsize=256)
def _answer_pattern(key: str) -> re.Pattern[str]:
    # Quotes inside JSON strings are escaped, so `"key"` and `"verdict"` followed by a colon are keys, never text
    # of a rationale; the verdict need not come first in the check's object (JSON mode keeps no order).
    return re.compile(rf'"{re.escape(key)}"\s*:\s*\{{.*?"verdict"\s*:\s*"', re.DOTALL)


def _answer_share(
    token_logprobs: TokenLogprobs,
    index: int,
    prefix: str,
    written: str,
    answer: str,
    candidates: tuple[str, ...],
) -> float | None:
    """Of the mass the token at `index` puts on the `candidates` (the answers that begin with `written`, the part of
    the answer the tokens before it wrote), the share on `answer`; None when it cannot be read."""
    entry = token_logprobs[index]
    alternatives = dict(entry.top_logprobs)
    # The emitted token is part of the distribution even if the server left it out of top_logprobs.
    alternatives.setdefault(entry.token, entry.logprob)
    readings = {token: _reading(token, prefix, written) for token in alternatives}
    offered = {reading[0] for reading in readings.values() if reading is not None}
    mine = others = unsure = 0.0
    for token, logprob in alternatives.items():
        reading = readings[token]
        if reading is None:
            continue
        meant = _answers_begun(*reading, candidates, offered)
        if not meant:
            continue
        p = math.exp(logprob)
        if answer not in meant:
            others += p
        elif len(meant) == 1:
            mine += p
        elif token == entry.token:
            following = next((i for i in range(index + 1, len(token_logprobs)) if token_logprobs[i].token), None)
            share = None
            if following is not None:
                share = _answer_share(token_logprobs, following, "", reading[0], answer, meant)
            if share is None:
                return None
            mine += p * share
            others += p * (1 - share)
        else:
            unsure += p
    total = mine + others
    if total <= 0 or unsure > AMBIGUOUS_SHARE * (total + unsure):
        return None
    return mine / total


def _reading(token: str, prefix: str, written: str) -> tuple[str, bool] | None:
    """What `token`, standing where the emitted token stood, writes of an answer: (the answer's text so far, whether
    the token closes its string); None when it does not begin with the emitted token's prefix, or writes nothing
    of the answer."""
    position = 0
    for char in prefix:
        if char.isspace():
            continue
        while position < len(token) and token[position].isspace():
            position += 1
        if not token.startswith(char, position):
            return None
        position += 1
    rest = token[position:]
    if not rest:
        return None
    part, quote, _ = rest.partition('"')
    return written + part, bool(quote)


def _answers_begun(text: str, closed: bool, candidates: tuple[str, ...], offered: set[str]) -> tuple[str, ...]:
    """The candidates a token writing `text` (and closing the string, or not) may be the start of. A whole answer
    that begins longer ones is that answer when each longer one is offered at this position as a token of its
    own: the tokenizer writes them in one token, so the short one ends here."""
    if closed:
        return tuple(a for a in candidates if a == text)
    meant = tuple(a for a in candidates if a.startswith(text))
    if text in meant and all(a in offered for a in meant if a != text):
        return (text,)
    return meant


def score_confidence(token_logprobs: TokenLogprobs | None, *, key: str, score: int, scale: int) -> float | None:
    """The probability the judge gave `score` (1 to `scale`) as the bare number of JSON key `key` (a draft's score
    check), from the score's distribution (grading/judge/scores.py); None when unknowable."""
    distribution = score_distribution(token_logprobs, field=key, candidates=range(1, scale + 1))
    return distribution.get(score, 0.0) if distribution else None


def pass_probability(distribution: Mapping[int, float], *, threshold: float) -> float:
    """The probability of a score at or above `threshold`, by a score distribution (`score_distribution`)."""
    return min(1.0, sum(p for score, p in distribution.items() if score >= threshold))


def verdict_confidence(distribution: Mapping[int, float] | None, *, threshold: float, passed: bool) -> float | None:
    """A draft's `pass_fail` confidence: the probability of the verdict the judge gave (`passed`), its overall
    score's mass at or above the pass `threshold` when it passed the draft, below when it failed it; None without
    a distribution. The judge's own, whatever the findings or the checks made of the draft afterwards."""
    if not distribution:
        return None
    at_or_above = pass_probability(distribution, threshold=threshold)
    return at_or_above if passed else 1.0 - at_or_above


def kept_confidences(
    confidences: Mapping[str, float], *, judged: Mapping[str, object], stored: Mapping[str, object]
) -> dict[str, float]:
    """The confidences of the answers the judge gave that stand as given: a check whose stored answer differs from
    the judge's (`judged`; a downgrade for want of evidence, a rule's veto, a finding's correction) is left out,
    for the machine's answer there is not the one the judge was that sure of."""
    return {key: p for key, p in confidences.items() if key in stored and stored[key] == judged.get(key)}

"""A judge's score read from its tokens' probabilities: the distribution of the score token's alternatives, and
its probability-weighted mean and spread, which the gate reads beside the judge's own number. Pure Python."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from grading.judge.client import TokenLogprob, TokenLogprobs


def find_field_token(token_logprobs: TokenLogprobs | None, field: str) -> int | None:
    """Index of the token holding the first digit of the value of JSON key ``field``, or None.

    Works on the joined text, so it does not care how the tokenizer split ``"overall": 7`` (``":`` may be
    one token, the digit may carry a leading space).
    """
    if not token_logprobs:
        return None
    text = "".join(token_logprobs.texts)
    match = re.search(rf'"{re.escape(field)}"\s*:\s*(\d)', text)
    if match is None:
        return None
    return _token_at(token_logprobs, match.start(1))


def weighted_score(
    token_logprobs: TokenLogprobs | None,
    *,
    field: str | None = None,
    token_index: int | None = None,
    candidates: Iterable[int] = range(1, 11),
) -> tuple[float, float] | None:
    """Probability-weighted mean score and its spread (standard deviation), or None when unknowable: the mean and
    spread of :func:`score_distribution` (same arguments)."""
    distribution = score_distribution(token_logprobs, field=field, token_index=token_index, candidates=candidates)
    return mean_and_spread(distribution) if distribution else None


def mean_and_spread(distribution: dict[int, float]) -> tuple[float, float]:
    """The mean of a score distribution and its standard deviation."""
    mean = sum(p * score for score, p in distribution.items())
    variance = sum(p * (score - mean) ** 2 for score, p in distribution.items())
    return mean, math.sqrt(variance)


def score_distribution(
    token_logprobs: TokenLogprobs | None,
    *,
    field: str | None = None,
    token_index: int | None = None,
    candidates: Iterable[int] = range(1, 11),
) -> dict[int, float] | None:
    """Score -> probability, summing to 1, as the judge's tokens give it; None when unknowable.

    The score token is ``token_index`` or, given ``field``, found by :func:`find_field_token` (on the joined
    text, so tokens before the JSON, such as the ```` ```json ```` fence llama.cpp keeps in the logprobs while
    stripping it from the content, do not matter). Its alternatives that read as candidate scores (``"7"``,
    ``" 7"``, ``"10"``) are renormalised to sum to 1; the others (words, or tokens the schema forbids: the
    alternatives are the model's, before any grammar) are left out.

    Tokenizers that write numbers a digit at a time (Qwen, Llama 2) make ``"1"`` the first digit of both 1 and
    10. The share of ``"1"`` that means 10 is read from the next token when the emitted number starts with
    ``"1"`` (its alternatives: ``"0"`` against anything that ends the number); a merged ``"10"`` among the
    alternatives says this tokenizer writes ten as one token, so ``"1"`` is one. Otherwise it cannot be told
    apart: that mass is left out when it is at most AMBIGUOUS_SHARE of the candidates' mass, and the score is
    None (no distribution: the caller keeps the judge's own number) when it is more.
    """
    if (field is None) == (token_index is None):
        raise ValueError("give exactly one of field or token_index")
    if not token_logprobs:
        return None
    index = find_field_token(token_logprobs, field) if field is not None else token_index
    if index is None or not 0 <= index < len(token_logprobs):
        return None
    return _score_distribution(token_logprobs, index, set(candidates)) or None


# Above this share of the candidates' mass on a "1" that may be 1 or 10, no distribution is given.
AMBIGUOUS_SHARE = 0.1


def _score_distribution(token_logprobs: TokenLogprobs, index: int, candidates: set[int]) -> dict[int, float]:
    """Score -> probability over the candidates, renormalised; empty when it cannot be read."""
    entry = token_logprobs[index]
    alternatives = dict(entry.top_logprobs)
    # The emitted token is part of the distribution even if the server left it out of top_logprobs.
    alternatives.setdefault(entry.token, entry.logprob)
    following = token_logprobs[index + 1] if index + 1 < len(token_logprobs) else None
    emitted = entry.token.strip()
    digits_split = emitted.isdigit() and following is not None and following.token[:1].isdigit()
    merged = any(len(t.strip()) > 1 and t.strip().isdigit() for t in alternatives)
    ten_share = None  # of the mass on "1", the share that is the first digit of "10"
    if emitted == "1" and following is not None:
        ten_share = _continues_with_zero(following)
    elif merged and not digits_split:
        ten_share = 0.0
    mass: dict[int, float] = {}
    ambiguous = 0.0
    for token, logprob in alternatives.items():
        text = token.strip()
        if not text.isdigit():
            continue
        p = math.exp(logprob)
        value = int(text)
        if text == "1" and 10 in candidates:
            if ten_share is None:
                ambiguous += p
                continue
            mass[10] = mass.get(10, 0.0) + p * ten_share
            p *= 1 - ten_share
        if value in candidates and (len(text) == 1 or merged or not digits_split):
            mass[value] = mass.get(value, 0.0) + p
    total = sum(mass.values())
    if total <= 0 or ambiguous > AMBIGUOUS_SHARE * (total + ambiguous):
        return {}
    return {score: p / total for score, p in mass.items() if p > 0}


def _continues_with_zero(entry: TokenLogprob) -> float:
    """Given the first digit "1", the probability that the number goes on with "0" (ten) rather than ending."""
    alternatives = dict(entry.top_logprobs)
    alternatives.setdefault(entry.token, entry.logprob)
    zero = sum(math.exp(lp) for t, lp in alternatives.items() if t.startswith("0"))
    ends = sum(math.exp(lp) for t, lp in alternatives.items() if not t[:1].isdigit())
    return zero / (zero + ends) if zero + ends > 0 else 0.0


def _token_at(token_logprobs: TokenLogprobs, char_offset: int) -> int | None:
    end = 0
    for index, text in enumerate(token_logprobs.texts):
        end += len(text)
        if char_offset < end:
            return index
    return None

"""Hand-built token log-probabilities, as a judge's server returns them, for the readers of grading/judge/scores.py
and grading/judge/confidence.py."""

import math

from grading.judge.client import TokenLogprob, TokenLogprobs


def tokens(*entries: tuple[str, dict[str, float]]) -> TokenLogprobs:
    """Token logprobs from (token, {alternative: probability}); the token's own logprob is its mapped one (certain
    when the mapping leaves it out)."""
    return TokenLogprobs(
        [
            TokenLogprob(
                token=token,
                logprob=math.log(alternatives.get(token, 1.0)),
                top_logprobs={t: math.log(p) for t, p in alternatives.items()},
            )
            for token, alternatives in entries
        ]
    )

"""The checks of one draft run in time linear in its length, whatever it holds (issue 20, Build 1).

A draft is untrusted text checked inside a grading worker and inside the criteria preview's web request: one pattern
that is quadratic in some input held a worker's interpreter for minutes. Each hostile family below is a long run of
something the checks or the prose reading look for (tests/builders/hostile_drafts.py). The work is the checking
thread's CPU time; a family passes when four times the input costs less than eight times the work (linear work
grows four times, quadratic sixteen: the margin absorbs the noise of a shared machine). A ratio, never a wall-clock
limit. Pure Python: runs without Django (`pytest -p no:django --noconftest tests/grading/checks/test_checks_linear.py`).
"""

from __future__ import annotations

import gc
import time

import pytest

from grading.checks.checks import check_draft
from grading.checks.rules import default_rules, rules_validate
from tests.builders.hostile_drafts import HOSTILE

pytestmark = pytest.mark.slow  # each family measures the checks at two sizes over three rounds: seconds apiece

N = 5_000
GROWTH = 4  # inputs of n and 4n: linear work grows 4 times, quadratic 16; the test allows 8
URL = "https://example.com/a"
MIN_SAMPLE_SECONDS = 0.02
ROUNDS = 3


def check_cpu_seconds(bodies: list[str]) -> list[float]:
    """The checking thread's CPU time per check of each body: the least of ROUNDS samples, each long enough to read,
    taken in turns (one of each body a round) so that the machine's other load weighs on every body alike. Each
    check reads a body of its own (a space more): the parse of a body is kept per thread."""
    rules, spaces = default_rules(), 0
    least = [float("inf")] * len(bodies)
    gc.collect()
    gc.disable()  # a collection landing in one sample and not the other is not work the checks did
    try:
        for _ in range(ROUNDS):
            for index, body in enumerate(bodies):
                runs, started = 0, time.thread_time()
                while (spent := time.thread_time() - started) < MIN_SAMPLE_SECONDS:
                    spaces += 1
                    check_draft(body=body + " " * spaces, rules=rules, source_urls=[URL], proof_terms=["x"])
                    runs += 1
                least[index] = min(least[index], spent / runs)
    finally:
        gc.enable()
    return least


@pytest.mark.parametrize("family", HOSTILE)
def test_it_checks_a_hostile_draft_in_time_linear_in_its_length(family):
    make = HOSTILE[family]
    at_n, at_4n = check_cpu_seconds([make(N), make(GROWTH * N)])
    assert at_4n / at_n < 2 * GROWTH, f"{family}: {at_n * 1000:.1f} ms at n, {at_4n * 1000:.1f} ms at {GROWTH}n"


def test_it_refuses_a_vocabulary_whose_terms_end_inside_each_other_too_deeply():
    # "a", "aa", "aaa", ...: every letter of a run of a's ends every term, so a scan does work for each at each.
    nested = ["a" * length for length in range(1, 40)]
    with pytest.raises(ValueError, match="end the same way"):
        rules_validate({"banned_words": {"terms": nested}})

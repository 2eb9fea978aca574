"""The CPU budget of a draft's checks and repairs: what a legal but costly body may take from a worker shared by every
org, and from a web request (the preview)."""

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar


class ChecksOverBudget(Exception):
    """The checks of a draft spent more of their thread's CPU time than their budget allows."""


_DEADLINE: ContextVar[float | None] = ContextVar("checks_deadline", default=None)


@contextmanager
def checks_budget(seconds: float) -> Iterator[None]:
    """Checks and repairs run inside stop with ChecksOverBudget at their first checkpoint past `seconds` of this
    thread's CPU time. Every pattern they run is linear in the body (tests/grading/checks/test_checks_linear.py), so the
    work between two checkpoints is bounded; the budget bounds what a legal but costly body takes from a worker
    shared by every org, and from a web request (the preview). CPU time, not wall time: a thread waiting for the
    interpreter while others run is not charged for their work.
    """
    token = _DEADLINE.set(time.thread_time() + seconds)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def checkpoint() -> None:
    """Raise ChecksOverBudget when the budget of the `checks_budget` block this runs in is spent."""
    deadline = _DEADLINE.get()
    if deadline is not None and time.thread_time() > deadline:
        raise ChecksOverBudget("the checks of this draft spent more CPU time than their budget")

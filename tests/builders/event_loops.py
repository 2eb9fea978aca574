"""Coroutines run from a synchronous test. Once a browser test has run in a pytest worker, Playwright's sync API keeps
an event loop running in that worker's main thread for the rest of the session, and `asyncio.run` there refuses to
start another: each coroutine here runs to its end in a thread of its own."""

import asyncio
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


def run_apart(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run `coroutine` in a new event loop in another thread; its result, or its exception raised here."""
    with ThreadPoolExecutor(max_workers=1) as thread:
        return thread.submit(asyncio.run, coroutine).result()

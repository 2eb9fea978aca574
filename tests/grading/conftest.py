"""Fixtures shared by the grading tests."""

from collections.abc import Callable, Iterator

import pytest

from tests.fakes.webhook_receivers import Receiver


@pytest.fixture
def receiver() -> Iterator[Callable[..., Receiver]]:
    """Makes webhook receivers on loopback (scripted statuses, optionally on another host address) and closes
    every one after the test."""
    receivers = []

    def make(statuses=(), host="127.0.0.1"):
        receivers.append(Receiver(list(statuses), host))
        return receivers[-1]

    yield make
    for r in receivers:
        r.close()

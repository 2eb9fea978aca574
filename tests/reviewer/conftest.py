"""The demo, seeded once for the tests of a module that read it (`demo_org`)."""

from collections.abc import Iterator

import pytest

from grading.models import Org
from reviewer.demo import demo_seed
from tests.builders.module_world import kept_for_module


@pytest.fixture(scope="module")
def _demo_seeded(django_db_setup, django_db_blocker) -> Iterator[int]:
    """The demo's org id, seeded once for a module's tests (`kept_for_module`: what a test writes, a second seeding
    too, is gone before the next one)."""
    with kept_for_module(django_db_blocker):
        yield demo_seed().pk


@pytest.fixture
def demo_org(_demo_seeded: int, db) -> Org:
    """The demo's org, read afresh for each test from the module's seeding."""
    return Org.objects.get(pk=_demo_seeded)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under `make test` (`--dist loadgroup`) a module's tests on the demo run on one worker, one after another, and
    so share one seeding; xdist would hand them out to both workers in turn, each seeding. Its quick tests and its
    slow ones are two groups: the slow run after every quick test (tests/conftest.py)."""
    if not getattr(config.option, "loadgroup", False):  # set on the workers of `--dist loadgroup` only
        return
    for item in items:
        if "demo_org" in getattr(item, "fixturenames", ()):
            pace = "slow" if item.get_closest_marker("slow") else "quick"
            item.add_marker(pytest.mark.xdist_group(f"demo-{item.module.__name__}-{pace}"))

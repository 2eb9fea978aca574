"""The demo, seeded once for the tests of a module that read it (`demo_org`)."""

from collections.abc import Iterator

import pytest
from django.db import transaction

from grading.models import Org
from reviewer.demo import demo_seed


@pytest.fixture(scope="module")
def _demo_seeded(django_db_setup, django_db_blocker) -> Iterator[int]:
    """The demo's org id, seeded once for a module's tests in a transaction kept open until its last test ends and
    then rolled back. Each test runs in a savepoint of it (pytest-django's `db`), so what a test writes (a second
    seeding too) is gone before the next one. Seeding hands nothing to another connection and its `on_commit` hooks
    never run, as inside a test of its own. A test that needs an empty database, or commits (`transaction=True`),
    belongs in a module where no test asks for `demo_org`: this transaction stays open under every test of the
    module that runs after the first that asks."""
    with django_db_blocker.unblock(), transaction.atomic():
        yield demo_seed().pk
        transaction.set_rollback(True)


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

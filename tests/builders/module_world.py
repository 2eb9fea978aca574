"""A world built once for a module's tests: what the demo's seeding, the hostile routes' world and the modules whose
tests only read a shared world build in."""

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import transaction


@contextmanager
def kept_for_module(django_db_blocker) -> Iterator[None]:
    """A transaction kept open until the module's last test ends, then rolled back, for a module fixture to build its
    world in. Each test runs in a savepoint of it (pytest-django's `db`), so what a test writes is gone before the
    next, which finds the world as it was built. What is built hands nothing to another connection and its
    `on_commit` hooks never run, as inside a test of its own. A test that needs an empty database, or commits
    (`transaction=True`), belongs in another module: the transaction stays open under every test of the module that
    runs after the first that asks for the world."""
    with django_db_blocker.unblock(), transaction.atomic():
        yield
        transaction.set_rollback(True)

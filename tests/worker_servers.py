"""Each pytest-xdist worker gets private servers of its own, under TOLLGATE_DATA_DIR/<worker id> (gw0, gw1, ...).

A worker's tests kill and restart their PostgreSQL and Redis (tests/resilience), purge their Celery queues and read
their query plans; on servers of its own, none of that reaches another worker's tests. Loaded with `-p` (pyproject),
so it runs before pytest-django imports the settings, which find or start the servers under TOLLGATE_DATA_DIR.
With DATABASE_URL and REDIS_URL given, workers share those servers (pytest-django still gives each its own
database) and their Celery queues: run such a suite without `-n`.

It also keeps each `xdist_group` on one worker under `--dist loadgroup` (`make test`), as pytest-xdist means to.
"""

import os

import pytest

worker = os.environ.get("PYTEST_XDIST_WORKER")
if worker:
    os.environ["TOLLGATE_DATA_DIR"] = os.path.join(os.environ.get("TOLLGATE_DATA_DIR") or ".data", worker)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """pytest-xdist sends a group's tests to one worker by the `@group` it appends to their node ids as each worker
    collects them. Its 3.8 writes the node id pytest 9 no longer reads (pytest-xdist issue 1386), so every group
    was spread over both workers: the deployment tests (tests/deploy/) started nginx, gunicorn and collectstatic on
    each. Where the suffix did not take, it is written the way pytest 9 keeps a node id."""
    if not getattr(config.option, "loadgroup", False):  # set on the workers of `--dist loadgroup` only
        return
    for item in items:
        marks = item.iter_markers("xdist_group")
        groups = {str(mark.args[0] if mark.args else mark.kwargs.get("name", "default")) for mark in marks}
        suffix = "@" + "_".join(sorted(groups))
        if groups and not item.nodeid.endswith(suffix):
            item._id = type(item.id).parse(item.nodeid + suffix)

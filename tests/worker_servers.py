"""Each pytest-xdist worker gets private servers of its own, under TOLLGATE_DATA_DIR/<worker id> (gw0, gw1, ...).

A worker's tests kill and restart their PostgreSQL and Redis (tests/resilience), purge their Celery queues and read
their query plans; on servers of its own, none of that reaches another worker's tests. Loaded with `-p` (pyproject),
so it runs before pytest-django imports the settings, which find or start the servers under TOLLGATE_DATA_DIR.
With DATABASE_URL and REDIS_URL given, workers share those servers (pytest-django still gives each its own
database) and their Celery queues: run such a suite without `-n`.
"""

import os

worker = os.environ.get("PYTEST_XDIST_WORKER")
if worker:
    os.environ["TOLLGATE_DATA_DIR"] = os.path.join(os.environ.get("TOLLGATE_DATA_DIR") or ".data", worker)

"""The suite's xdist plugin (tests/worker_servers.py), run as `make test` runs it: two workers, `--dist loadgroup`."""

import os
import re
import subprocess
import sys

import pytest

from tests.builders.processes import REPO_ROOT

GROUPED = """
import pytest

pytestmark = pytest.mark.xdist_group("one-server")


@pytest.mark.parametrize("n", range(4))
def test_grouped(n):
    pass
"""
LOOSE = """
import pytest


@pytest.mark.parametrize("n", range(4))
def test_loose(n):
    pass
"""


@pytest.mark.slow
def test_it_sends_every_test_of_an_xdist_group_to_one_worker(tmp_path):
    """As the deployment tests share one nginx and gunicorn, and the real-judge tests one model server."""
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    (tmp_path / "test_loose.py").write_text(LOOSE)
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "xdist.plugin", "-p", "tests.worker_servers", "-n", "2",
         "--dist", "loadgroup", "-v", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
        env=os.environ | {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONPATH": str(REPO_ROOT)},
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    grouped = re.findall(r"\[(gw\d)\] .*PASSED .*::test_grouped\[", ran.stdout)
    assert len(grouped) == 4 and len(set(grouped)) == 1, ran.stdout

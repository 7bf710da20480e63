"""Tests marked ``pure`` reach inside the simulator (patch a module's function, subclass or
patch a class, pickle a learner): compiled modules (``make native``) allow none of that. Where
the native build is active, such a test runs in a child pytest on the pure-Python modules
(PPSCHED_PURE=1), and passes only if the child passed it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import ppsched
from ppsched.native import PURE_ENV


def pytest_runtest_call(item: pytest.Item) -> None:
    if item.get_closest_marker("pure") is None or not ppsched.NATIVE:
        return
    env = {**os.environ, PURE_ENV: "1"}
    child = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            item.nodeid], cwd=item.config.rootpath, env=env,
                           capture_output=True, text=True)
    if child.returncode != 0:
        pytest.fail(f"{item.nodeid} failed on the pure-Python modules:\n{child.stdout[-4000:]}",
                    pytrace=False)
    item.runtest = lambda: None  # passed in the child: nothing left to run here

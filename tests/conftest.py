"""Session-wide test isolation.

`deplodock compile` and `run` replay the schedules of the tune cache under
`$XDG_CACHE_HOME/deplodock/`, so a developer's tuned kernels would change what the tests
see. The session gets its own cache root (the nvcc build cache and capture cache there start
empty, as they do in CI); a test that needs another still sets its own.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import pytest

_ROOT = tempfile.mkdtemp(prefix="deplodock-test-cache-")
os.environ["XDG_CACHE_HOME"] = _ROOT
atexit.register(shutil.rmtree, _ROOT, ignore_errors=True)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--run-slow",
        action="store_true",
        help="also run the tests marked slow (.ci/run does; `pytest -q` alone skips them)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `slow` (minutes of compiling, e.g. the sequence-length sweep) are
    skipped, saying how to run them, unless `--run-slow` is given."""
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="slow: run with --run-slow (.ci/run does)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)

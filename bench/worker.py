"""Run suite cases in a child process, so that one bad case costs one row, not the suite.

A kernel that faults leaves the CUDA context unusable for the rest of the process, and a
kernel that hangs never returns; both would end an in-process suite. Here the cases go to a
worker process with a watchdog (`deplodock/backend/worker.py`, the one the tuner measures
candidates in) one at a time. When the worker dies, exceeds the per-case timeout or reports
an error that may have broken its context (`restart` in the row), the row records it and a
new worker takes the next case. The case function is named by a `module:function` string,
imported in the worker, so tests can substitute a fake one.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any

from deplodock.backend.worker import DIED, DONE, RAISED, Worker


def resolve(path: str) -> Callable[..., dict[str, Any]]:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def case_runner(function_path: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The worker's runner (built in the worker): the case function, called with a task's
    keywords."""
    function = resolve(function_path)
    return lambda task: function(**task)


class IsolatedRunner:
    """Calls `function(**task)` in a worker process; restarts the worker after a failure."""

    def __init__(self, function_path: str, timeout: float = 600.0):
        self.function_path = function_path
        self.timeout = timeout
        self.worker = Worker(functools.partial(case_runner, function_path), name="case worker")

    @property
    def starts(self) -> int:
        """Worker processes started so far."""
        return self.worker.starts

    def __call__(self, **task: Any) -> dict[str, Any]:
        """The case's row; a `crashed`, `timeout` or `runtime_error` row when it did not end
        in one (the reason, and for an error the worker's traceback)."""
        reply = self.worker.call(task, self.timeout)
        if reply.status == DONE:
            row = reply.value
            if row.pop("restart", False):
                self.worker.discard()
            return row
        if reply.status == RAISED:
            return {"status": "runtime_error", "reason": reply.detail, "traceback": reply.traceback}
        return {"status": "crashed" if reply.status == DIED else "timeout", "reason": reply.detail}

    def close(self) -> None:
        self.worker.close()

    def __enter__(self) -> IsolatedRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

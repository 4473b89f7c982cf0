"""Run suite cases in a child process, so that one bad case costs one row, not the suite.

A kernel that faults leaves the CUDA context unusable for the rest of the process, and a
kernel that hangs never returns; both would end an in-process suite. Here the cases go to a
worker process (multiprocessing, `spawn`: a fresh interpreter, no inherited CUDA state) one
at a time. When the worker dies, exceeds the per-case timeout or reports an error that may
have broken its context (`restart` in the row), the row records it and a new worker takes
the next case. The case function is named by a `module:function` string, imported in the
worker, so tests can substitute a fake one.
"""

from __future__ import annotations

import importlib
import multiprocessing as mp
import queue
import time
import traceback
from collections.abc import Callable
from typing import Any

POLL_SECONDS = 0.2


def resolve(path: str) -> Callable[..., dict[str, Any]]:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def _serve(function_path: str, tasks: Any, results: Any) -> None:
    function = resolve(function_path)
    while True:
        task = tasks.get()
        if task is None:
            return
        try:
            results.put(function(**task))
        except BaseException as error:  # report, never die silently
            text = str(error).strip().splitlines()
            reason = f"{type(error).__name__}: {text[0] if text else ''}".rstrip(": ")
            trace = traceback.format_exc(limit=5)
            results.put(
                {"status": "runtime_error", "reason": reason, "restart": True}
                | {"traceback": trace}
            )


class IsolatedRunner:
    """Calls `function(**task)` in a worker process; restarts the worker after a failure."""

    def __init__(self, function_path: str, timeout: float = 600.0):
        self.function_path = function_path
        self.timeout = timeout
        self.context = mp.get_context("spawn")
        self.process: Any = None
        self.tasks: Any = None
        self.results: Any = None
        self.starts = 0  # worker processes started so far

    def _start(self) -> None:
        self.starts += 1
        self.tasks, self.results = self.context.Queue(), self.context.Queue()
        self.process = self.context.Process(
            target=_serve, args=(self.function_path, self.tasks, self.results), daemon=True
        )
        self.process.start()

    def _stop(self, kill: bool = False) -> None:
        if self.process is None:
            return
        if kill or not self.process.is_alive():
            if self.process.is_alive():
                self.process.kill()
        else:
            self.tasks.put(None)
        self.process.join(timeout=10)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.process = None

    def __call__(self, **task: Any) -> dict[str, Any]:
        if self.process is None or not self.process.is_alive():
            self._stop()
            self._start()
        self.tasks.put(task)
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                row = self.results.get(timeout=POLL_SECONDS)
                break
            except queue.Empty:
                if not self.process.is_alive():
                    code = self.process.exitcode
                    self._stop()
                    return {"status": "crashed", "reason": f"worker died (exit code {code})"}
                if time.monotonic() > deadline:
                    self._stop(kill=True)
                    return {"status": "timeout", "reason": f"no result in {self.timeout:.0f} s"}
        if row.pop("restart", False):
            self._stop(kill=True)
        return row

    def close(self) -> None:
        self._stop()

    def __enter__(self) -> IsolatedRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

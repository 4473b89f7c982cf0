"""Evaluators that misbehave inside a pool's worker process (`tests/tune/test_parallel.py`).

Module-level classes, so a worker unpickles them by name."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from deplodock.dialects import kernel
from deplodock.tune.evaluate import Evaluator


def block_size(kernel_module) -> int:
    (fn,) = [op for op in kernel_module.ops if isinstance(op, kernel.FuncOp)]
    return fn.block_size


class KillingModel(Evaluator):
    """The model, except that the worker process of the `nth` evaluation (counted across
    processes by files in `tally`) kills itself with SIGKILL, as the OOM killer would; with
    `threads`, every worker that scores a candidate of that block size dies."""

    def __init__(self, model: Evaluator, tally: Path, nth: int = 0, threads: int = 0):
        self.model, self.tally, self.nth, self.threads = model, tally, nth, threads
        self.target, self.toolchain, self.cost = model.target, model.toolchain, model.cost

    def evaluate(self, kernel_module):
        count = self._count()
        if count == self.nth or block_size(kernel_module) == self.threads:
            os.kill(os.getpid(), signal.SIGKILL)
        return self.model.evaluate(kernel_module)

    def _count(self) -> int:
        """This evaluation's number (from 1), claimed atomically by creating its file."""
        number = 1
        while True:
            try:
                os.close(os.open(self.tally / str(number), os.O_CREAT | os.O_EXCL))
                return number
            except FileExistsError:
                number += 1

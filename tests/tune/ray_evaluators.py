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
    processes, `claim`) kills itself with SIGKILL, as the OOM killer would; with
    `threads`, every worker that scores a candidate of that block size dies."""

    def __init__(self, model: Evaluator, tally: Path, nth: int = 0, threads: int = 0):
        self.model, self.tally, self.nth, self.threads = model, tally, nth, threads
        self.target, self.toolchain, self.cost = model.target, model.toolchain, model.cost

    def evaluate(self, kernel_module):
        if claim(self.tally) == self.nth or block_size(kernel_module) == self.threads:
            os.kill(os.getpid(), signal.SIGKILL)
        return self.model.evaluate(kernel_module)


def claim(tally: Path) -> int:
    """This call's number (from 1) across processes, claimed atomically by creating its
    file in `tally`."""
    number = 1
    while True:
        try:
            os.close(os.open(tally / str(number), os.O_CREAT | os.O_EXCL))
            return number
        except FileExistsError:
            number += 1


class KillingBuild:
    """A build that does nothing (the scripted runner needs no cubin), except that the
    `nth` build (counted across processes, as `KillingModel` counts) kills the process it
    runs in: a GPU actor dying under a candidate."""

    def __init__(self, tally: Path, nth: int = 0):
        self.tally, self.nth = tally, nth

    def __call__(self, module, capability) -> None:
        if claim(self.tally) == self.nth:
            os.kill(os.getpid(), signal.SIGKILL)


def scripted_measurer(tally: Path, nth: int = 0) -> Evaluator:
    """A measuring evaluator on the scripted runner (`fake_runners.scripted`: every candidate
    here is "fast"), pretending to be the emulated GPU; its `nth` build kills its process."""
    from deplodock.tune.measure import MeasuredEvaluator
    from tests.gpu.emulation import FAKE_DEVICE
    from tests.tune import fake_runners

    return MeasuredEvaluator(timeout_s=30.0, device=FAKE_DEVICE,
                             runner_factory=fake_runners.scripted,
                             build=KillingBuild(tally, nth))  # fmt: skip

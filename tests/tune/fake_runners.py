"""Stand-ins for `measure.gpu_runner`, built in the tests' worker processes.

Each factory is a module-level function (the spawned worker unpickles it by name) that
returns a runner. `commands` obeys plain strings; `scripted` answers the evaluator's jobs
from a `fake.behaviour` attribute carried by the candidate module's text; `emulated` is the
real `DeviceRunner` on the CPU emulation of the CUDA C, timed by the wall clock.
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable
from typing import Any

from deplodock.tune.evaluate import WRONG
from deplodock.tune.measure import DeviceRunner, Outcome, RetimeJob, TimeJob


def _act(what: str) -> None:
    if what == "hang":
        time.sleep(120)  # like a kernel that never finishes
    elif what == "exit":
        os._exit(1)  # like the driver ending the process: no exception, no reply
    elif what == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    elif what == "raise":
        raise RuntimeError("an illegal memory access was encountered\nmore lines")


def commands() -> Callable[[Any], Any]:
    """Answers "pid" with its process id; "hang", "exit", "segfault", "raise" misbehave."""

    def run(job: str) -> Any:
        _act(job)
        return os.getpid()

    return run


def broken() -> Callable[[Any], Any]:
    """A runner that cannot be built, as on a machine whose GPU is gone."""
    raise RuntimeError("no CUDA device: the fake GPU fell off the bus")


#: The time (us) of each timed run a `scripted` candidate reports, by its behaviour.
TIMES_US = {"fast": (3.0, 1.0, 2.0, 50.0), "slow": (9.0, 8.0, 10.0), "medium": (5.0,)}


def behaviour(text: str) -> str:
    match = re.search(r'fake\.behaviour = "(\w+)"', text)
    return match.group(1) if match else "fast"


def scripted() -> Callable[[Any], Any]:
    """Times, errors, hangs and crashes by each candidate's `fake.behaviour`: "fast", "slow",
    "medium" report `TIMES_US`, "wrong" is WRONG, the rest as in `_act`. A retime job
    fails as a whole if one of its candidates "hang"s or "exit"s only when interleaved
    ("flaky"); its outcomes name the pid and the order of the programs it saw."""

    def run(job: Any) -> Any:
        if isinstance(job, TimeJob):
            what = behaviour(job.program)
            _act(what)
            if what == "wrong":
                return Outcome(WRONG, detail="output #0: off")
            if job.reference is not None and behaviour(job.reference) != "fast":
                return Outcome(WRONG, detail=f"reference {behaviour(job.reference)}")
            times = TIMES_US.get(what, TIMES_US["fast"])
            return Outcome("ok", times, f"pid {os.getpid()}")
        assert isinstance(job, RetimeJob)
        order = [behaviour(p) for p in job.programs]
        for what in order:
            _act("exit" if what == "flaky" else what)
        return [Outcome("ok", TIMES_US[w], f"interleaved {order}") for w in order]

    return run


class WallTimer:
    """Milliseconds of one call by the host's clock (the CPU emulation has no events)."""

    def time(self, fn: Callable[[], object]) -> float:
        start = time.perf_counter()
        fn()
        return (time.perf_counter() - start) * 1e3


def emulated() -> DeviceRunner:
    """The real runner on the CPU emulation of the CUDA C, timed by the wall clock."""
    from tests.gpu.emulation import FAKE_DEVICE, emulated_load

    return DeviceRunner(FAKE_DEVICE, emulated_load, WallTimer(), None, "cpu")

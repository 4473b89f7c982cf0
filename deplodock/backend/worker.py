"""One job at a time in a spawned worker process, under a watchdog: what the tuner's GPU
evaluator (`tune/measure.py`) and the kernel suite (`bench/worker.py`) both run their GPU
work in.

Code run on a GPU may fault (an illegal address poisons the CUDA context for the rest of its
process), crash the driver or never finish. So it runs in a worker process started with
`spawn` (a fresh interpreter, no inherited CUDA state), which builds its runner once (the
runner then owns the worker's CUDA context) and answers jobs through a pipe, each under a
deadline. What becomes of a job is one `Reply`:

- `DONE`: the runner's value;
- `RAISED`: the runner raised; its first line and traceback come back, and the worker is
  replaced, as the error may have poisoned its context;
- `DIED`: the worker died (a segfault, the driver ending the process), with its exit code;
- `TIMED_OUT`: the deadline passed and the worker was killed with SIGKILL (a hung kernel
  ignores anything gentler).

After anything but `DONE`, the next job gets a fresh worker (started on demand); a caller
that learns otherwise that the worker is spoiled calls `discard`. The statuses are the
worker's own; each caller says what they mean to it (a FAILED score, a `crashed` row).
"""

from __future__ import annotations

import multiprocessing as mp
import signal
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from deplodock.backend.benchmark import first_line

#: What became of a job (`Reply.status`).
DONE, RAISED, DIED, TIMED_OUT = "done", "raised", "died", "timed out"
#: How often (s) the parent looks at the worker while it waits for a message.
POLL_S = 0.05
#: Frames of a raised error's traceback sent back (the innermost are the runner's).
TRACEBACK_FRAMES = 5

#: A worker's runner: called in the worker with each job, returns a picklable result.
Runner = Callable[[Any], Any]


class WorkerError(RuntimeError):
    """The worker process could not start (no job is at fault)."""


@dataclass(frozen=True)
class Reply:
    """What became of one job: its `status`, the runner's `value` when DONE, else `detail`
    (one line: why) and, when RAISED, the worker's `traceback`."""

    status: str
    value: Any = None
    detail: str = ""
    traceback: str = ""


def exit_reason(code: int | None) -> str:
    """`exit code 1`, or `killed by SIGSEGV` for a negative (signal) exit code."""
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _raised(error: BaseException) -> tuple[str, tuple[str, str]]:
    return RAISED, (first_line(error), traceback.format_exc(limit=TRACEBACK_FRAMES))


def _serve(factory: Callable[[], Runner], connection: Any) -> None:
    """The worker's loop: build the runner, say "ready", then answer jobs until None."""
    try:
        try:
            runner = factory()
        except BaseException as error:
            connection.send(_raised(error))
            return
        connection.send(("ready", None))
        while (job := connection.recv()) is not None:
            try:
                connection.send((DONE, runner(job)))
            except Exception as error:  # report it; the parent replaces this worker
                connection.send(_raised(error))
    except (EOFError, KeyboardInterrupt, BrokenPipeError):
        return  # the parent has gone or is stopping


class Worker:
    """A spawned process that runs `factory()`'s runner on one job at a time, under a deadline.

    `factory` must be picklable (a module-level function, or a `functools.partial` of one); it
    runs in the worker. A job past its deadline gets the worker killed; a runner that raises
    or a worker that dies gets a fresh worker for the next job (started on demand, up to
    `start_timeout_s` to be ready). `name` says whose worker it is in `WorkerError`.
    """

    def __init__(
        self, factory: Callable[[], Runner], start_timeout_s: float = 300.0, name: str = "worker"
    ):
        self.factory = factory
        self.start_timeout_s = start_timeout_s
        self.name = name
        self.context = mp.get_context("spawn")
        self.process: Any = None
        self.connection: Any = None
        self.starts = 0  # worker processes started so far

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def call(self, job: Any, timeout_s: float) -> Reply:
        """Run `job` in the worker; its reply, TIMED_OUT after `timeout_s` seconds."""
        if self.process is None or not self.process.is_alive():
            self._stop()
            self._start()
        try:
            self.connection.send(job)
        except OSError:  # it died between jobs: a fresh one takes the job
            self._stop()
            self._start()
            self.connection.send(job)
        message = self._wait(timeout_s)
        if message is None:
            self.discard()
            return Reply(TIMED_OUT, detail=f"no result in {timeout_s:g} s: the worker was killed")
        status, value = message
        if status == DONE:
            return Reply(DONE, value)
        self.discard()  # a raised error may have poisoned the worker's CUDA context
        if status == RAISED:
            line, trace = value
            return Reply(RAISED, detail=line, traceback=trace)
        return Reply(DIED, detail=value)

    def discard(self) -> None:
        """Kill the worker now (it may be spoiled); the next job starts a fresh one."""
        self._stop(kill=True)

    def _start(self) -> None:
        self.starts += 1
        self.connection, child = self.context.Pipe()
        self.process = self.context.Process(
            target=_serve, args=(self.factory, child), daemon=True, name=f"deplodock {self.name}"
        )
        self.process.start()
        child.close()  # the worker's end lives in the worker only: its death reads as EOF
        message = self._wait(self.start_timeout_s)
        if message is None or message[0] != "ready":
            self.discard()
            if message is None:
                why = f"not ready in {self.start_timeout_s:g} s"
            else:
                why = message[1][0] if message[0] == RAISED else message[1]
            raise WorkerError(f"the {self.name} could not start: {why}")

    def _wait(self, timeout_s: float) -> tuple[str, Any] | None:
        """The worker's next message, (DIED, why) if it dies first, None at the deadline."""
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            try:
                if self.connection.poll(min(left, POLL_S)):
                    return self.connection.recv()
            except (EOFError, OSError):
                break
            if not self.process.is_alive() and not self.connection.poll(0):
                break
        else:
            return None
        self.process.join(timeout=5)
        return DIED, f"the worker died ({exit_reason(self.process.exitcode)})"

    def _stop(self, kill: bool = False) -> None:
        if self.process is None:
            return
        if kill:
            self.process.kill()
        else:
            try:
                self.connection.send(None)
            except OSError:
                pass
        self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.connection.close()
        self.process = self.connection = None

    def close(self) -> None:
        """Stop the worker (it finishes its current job first)."""
        self._stop()

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

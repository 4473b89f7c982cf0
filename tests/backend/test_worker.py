"""The worker process and its watchdog (`backend/worker.py`), which the tuner's GPU evaluator
and the kernel suite share: run with the fake runners of tests/tune/fake_runners.py, which
hang, raise, exit and segfault in real spawned processes."""

from __future__ import annotations

import os

import pytest

from deplodock.backend.worker import DIED, DONE, RAISED, TIMED_OUT, Worker, WorkerError, exit_reason
from tests.tune import fake_runners


def test_the_watchdog_kills_a_hang_and_every_failure_gets_a_fresh_worker() -> None:
    with Worker(fake_runners.commands) as worker:
        first = worker.call("pid", timeout_s=30)
        same = worker.call("pid", timeout_s=30)
        hung = worker.call("hang", timeout_s=1)
        after_hang = worker.call("pid", timeout_s=30)
        raised = worker.call("raise", timeout_s=30)
        after_raise = worker.call("pid", timeout_s=30)
        exited = worker.call("exit", timeout_s=30)
        segfault = worker.call("segfault", timeout_s=30)
        last = worker.call("pid", timeout_s=30)
        worker.discard()
        after_discard = worker.call("pid", timeout_s=30)
        starts = worker.starts
    assert first.status == DONE and first.value != os.getpid()
    assert same.value == first.value  # one worker serves job after job
    assert (hung.status, hung.detail) == (TIMED_OUT, "no result in 1 s: the worker was killed")
    assert after_hang.status == DONE and after_hang.value != first.value
    assert raised.status == RAISED
    assert raised.detail == "RuntimeError: an illegal memory access was encountered"
    assert raised.traceback.startswith("Traceback") and "in _act" in raised.traceback
    assert after_raise.status == DONE and after_raise.value != after_hang.value
    assert (exited.status, exited.detail) == (DIED, "the worker died (exit code 1)")
    assert (segfault.status, segfault.detail) == (DIED, "the worker died (killed by SIGSEGV)")
    assert last.status == DONE and after_discard.value != last.value
    assert starts == 6  # the first, after the hang, the raise, the exit, the segfault, discard


def test_a_worker_that_cannot_start_is_a_one_line_error() -> None:
    with (
        Worker(fake_runners.broken, name="measuring worker") as worker,
        pytest.raises(WorkerError) as error,
    ):
        worker.call("pid", timeout_s=30)
    assert str(error.value) == (
        "the measuring worker could not start: "
        "RuntimeError: no CUDA device: the fake GPU fell off the bus"
    )


def test_exit_reasons() -> None:
    assert exit_reason(3) == "exit code 3"
    assert exit_reason(-9) == "killed by SIGKILL"

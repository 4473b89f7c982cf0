"""A stand-in for `bench.kernels:run_case`, imported by the worker process in the tests."""

from __future__ import annotations

import os
import time


def run(name: str, dtype: str, **task: object) -> dict:
    if "crash" in name:
        os._exit(3)  # like a segfault in a driver call: no exception, no result
    if "hang" in name:
        time.sleep(120)  # like a kernel that never finishes
    if "raise" in name:
        raise RuntimeError("CUDA error: an illegal memory access was encountered\ndetails")
    if "sticky" in name:
        return {"status": "runtime_error", "reason": "kernel @k failed", "restart": True}
    return {"status": "ok", "pid": os.getpid(), "dtype": dtype, "task": task}


def timed(name: str, dtype: str, **task: object) -> dict:
    """A case that is twice as fast as eager and as fast as torch.compile; s128 crashes."""
    if name.endswith("s128"):
        os._exit(3)
    return {"status": "ok", "eager_ms": 2.0, "compile_ms": 1.0, "deplodock_ms": 1.0}

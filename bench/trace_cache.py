"""Kernel-level programs traced once: the counters the model needs, cached on disk.

Fitting the model's constants re-runs the model on every row hundreds of times, and a row's
trace (`perf.trace`) costs seconds; the counters do not depend on the constants. So a
program's text is traced once and its `TracedKernel`s are pickled under
`~/.cache/deplodock/traces/`, keyed by the text's hash and the model's version (a tracer
change bumps `MODEL_VERSION`, which makes every entry stale).
"""

from __future__ import annotations

import hashlib
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from deplodock.files import cache_root, write_atomic
from deplodock.perf.trace import KernelCounters

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

    from deplodock.perf.devices import Device
    from deplodock.perf.model import Calibration
    from deplodock.perf.profile import ProgramEstimate

#: Bumped when what `TracedKernel` holds changes.
CACHE_VERSION = 1


@dataclass(frozen=True)
class TracedKernel:
    """One launched kernel of a program, as the model reads it."""

    counters: KernelCounters
    flops: float
    launches: int
    #: `perf.profile.estimate_registers`: used where ptxas did not report.
    estimated_registers: int
    #: `sol.dtype_of_types` of its buffers.
    dtype: str


def traced_kernels(mlir_text: str, flops: bool = True) -> list[TracedKernel]:
    """Each launched kernel of a kernel-level module's text, traced (or from the cache).

    `flops=False` leaves them uncounted (0): the modeled time does not read them, only the
    ideal does, and counting walks a pipelined K loop step by step (a published GEMM with
    30522-long rows: 48 s, more than its trace)."""
    from deplodock.perf.model import MODEL_VERSION

    digest = hashlib.sha256(mlir_text.encode()).hexdigest()[:24]
    stem = cache_root() / "traces" / f"v{MODEL_VERSION}.{CACHE_VERSION}"
    counted, timed = Path(f"{stem}-{digest}.pickle"), Path(f"{stem}-timing-{digest}.pickle")
    for path in (counted,) if flops else (counted, timed):
        if path.exists():
            return pickle.loads(path.read_bytes())
    path = counted if flops else timed
    traced = _trace(mlir_text, flops)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, pickle.dumps(traced))
    return traced


def _trace(mlir_text: str, flops: bool) -> list[TracedKernel]:
    from xdsl.parser import Parser

    from deplodock.backend.cost import kernel_cost, launch_counts
    from deplodock.dialects import kernel, make_context
    from deplodock.perf.profile import estimate_registers
    from deplodock.perf.sol import dtype_of_types
    from deplodock.perf.trace import trace_kernel

    module = Parser(make_context(), mlir_text).parse_module()
    launches = launch_counts(module)
    return [
        TracedKernel(
            trace_kernel(fn),
            float(kernel_cost(fn).flops) if flops else 0.0,
            launches[fn.sym_name.data],
            estimate_registers(fn),
            dtype_of_types([arg.type for arg in fn.body.block.args]),
        )
        for fn in module.ops
        if isinstance(fn, kernel.FuncOp) and fn.sym_name.data in launches
    ]


def estimate_program(
    module: ModuleOp,
    device: Device,
    registers: dict[str, int] | None = None,
    calibration: Calibration | None = None,
) -> ProgramEstimate:
    """`perf.profile.model_program` of a kernel-level module, from cached traces: the same
    `ProgramEstimate` (kernels slowest first, the program's work), without re-tracing a
    program already traced (a suite re-modeled after a refit costs its compiles only)."""
    from deplodock.perf.model import load_calibration
    from deplodock.perf.profile import TracedLaunch, estimate_of
    from deplodock.perf.sol import program_work

    found = registers or {}
    traced = [
        TracedLaunch(
            t.counters,
            found.get(t.counters.name, t.estimated_registers),
            "ptxas" if t.counters.name in found else "estimated",
            t.flops,
            t.launches,
            t.dtype,
        )
        for t in traced_kernels(str(module))
    ]
    work = program_work(module, {t.counters.name: t.flops for t in traced})
    return estimate_of(device, calibration or load_calibration(), traced, work)

"""How long the tile- and kernel-level interpreters will take on a module, before running it.

Those interpreters dispatch one Python call per op they execute, on all threads of a batch
of blocks at once, as numpy arrays. The time is therefore close to the number of *op
executions* times a fixed cost per execution (ops inside a loop count once per trip, a
kernel's body once per batch of blocks), plus, for batches of ~8K lanes, numpy's work per
lane. `run --device cpu` uses this to warn before a run of minutes, so that nobody waits in
silence. (The tensor and loop interpreters evaluate whole arrays and loop nests at once and
are not modeled here.)

```python
estimate = estimate_interpretation(module)
estimate.op_executions, estimate.seconds, estimate.heaviest  # (count, s, "@k: 512 blocks")
```
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, Region
from xdsl.traits import SymbolTable

from deplodock.dialects import kernel, loop, tile
from deplodock.dialects.queries import constant_index, symbol_name
from deplodock.interpreters.blocks import default_blocks_per_batch
from deplodock.interpreters.tile import threads_per_block

#: Seconds of Python dispatch per executed op of the tile and kernel interpreters on this
#: project's 2-core development machine, numpy work on up to 256 lanes included:
#: 0.9-2.8e-5 over GEMMs, norms, softmax, attention, convolution and scans (measured
#: 2026-11-26), so estimates run high rather than low.
SECONDS_PER_OP = 2.5e-5

#: Seconds of numpy work per lane of an op that the kernel interpreter executes on a batch
#: of blocks (~8K lanes, `blocks.TARGET_LANES`), on top of `SECONDS_PER_OP`. Measured on
#: the same machine (2026-11-26), an op on 8K lanes took 30-90 us in all: softmax 2048^2
#: 30, GEMM 1024^2 40, K=3 GEMM 4096^2 47, RMSNorm 60, causal attention 70, conv2d 79,
#: GEMM 512^2 87 (shared-memory accesses with their race records cost most per lane).
#: 6e-9 puts an 8K-lane op at 74 us: within 2x of each, mostly above.
SECONDS_PER_LANE_OP = 6e-9


@dataclass(frozen=True)
class Work:
    """Interpreter work: op executions (one Python dispatch each) and, for kernel batches,
    lane executions (each op of a batch computes on every lane of it)."""

    ops: int = 0
    lane_ops: int = 0

    def __add__(self, other: Work) -> Work:
        return Work(self.ops + other.ops, self.lane_ops + other.lane_ops)

    def __mul__(self, times: int) -> Work:
        return Work(self.ops * times, self.lane_ops * times)

    @property
    def seconds(self) -> float:
        return self.ops * SECONDS_PER_OP + self.lane_ops * SECONDS_PER_LANE_OP


@dataclass(frozen=True)
class Estimate:
    """The op and lane executions of a whole run, their modeled seconds, and the costliest
    launch.

    Both interpreters run `B` blocks per batch, so a kernel body (`kernel.func`, or a
    `tile.grid`) of `P` op executions per block costs `P * ceil(G / B)` dispatches and
    `P * G * T` lane executions (the blocks' threads, whatever the batching): dispatch
    dominates small grids, lanes large ones.
    """

    op_executions: int
    heaviest: str
    lane_executions: int = 0

    @property
    def seconds(self) -> float:
        return Work(self.op_executions, self.lane_executions).seconds


def _trips(op: Operation) -> int:
    """How often the body of `op` runs per execution of `op` (1 for a plain region)."""
    if isinstance(op, loop.ForOp):
        return op.trip_count
    if isinstance(op, tile.ForOp | kernel.ForOp):
        start = constant_index(op.lb)
        span = op.upper - (start if start is not None else 0)  # per-thread starts: the most
        return max(0, -(-span // op.step_value))
    return 1


def _executions(region: Region, module: ModuleOp, launches: list[tuple[Work, str]]) -> Work:
    """The work of one run of `region`; launches found inside record their cost."""
    total = Work()
    for block in region.blocks:
        for op in block.ops:
            total += Work(1)
            if isinstance(op, tile.GridOp):
                total += _grid_executions(op, module, launches)
                continue
            callee = _launched(op, module)
            if callee is not None:
                cost = _kernel_executions(callee, module, launches)
                launches.append((cost, _describe(callee)))
                total += cost
            for inner in op.regions:
                total += _executions(inner, module, launches) * _trips(op)
    return total


def _launched(op: Operation, module: ModuleOp) -> Operation | None:
    """The kernel a launch op runs (loop, tile and kernel levels), else None."""
    if not isinstance(op, loop.LaunchOp | tile.LaunchOp | kernel.LaunchOp):
        return None
    return SymbolTable.lookup_symbol(module, op.callee)


def _kernel_executions(func: Operation, module: ModuleOp, launches: list[tuple[Work, str]]) -> Work:
    per_block = Work()
    for region in func.regions:
        per_block += _executions(region, module, launches)
    if not isinstance(func, kernel.FuncOp):
        return per_block
    grid, threads = func.grid_size, func.block_size
    batches = -(-grid // default_blocks_per_batch(threads))
    return Work(per_block.ops * batches, per_block.ops * grid * threads)


def _grid_executions(grid: tile.GridOp, module: ModuleOp, launches: list[tuple[Work, str]]) -> Work:
    """A `tile.grid`'s blocks, run in batches as `tile.py` runs them (see `Estimate`)."""
    per_block = Work()
    for region in grid.regions:
        per_block += _executions(region, module, launches)
    threads = threads_per_block(grid)
    batches = -(-grid.count // default_blocks_per_batch(threads))
    return Work(per_block.ops * batches, per_block.ops * grid.count * threads)


def _describe(func: Operation) -> str:
    name = f"@{symbol_name(func)}"
    if isinstance(func, kernel.FuncOp):
        return f"{name}: {func.grid_size} blocks of {func.block_size} threads"
    grids = [op.count for op in func.walk() if isinstance(op, tile.GridOp)]
    return f"{name}: {grids[0]} blocks" if grids else name


def estimate_interpretation(module: ModuleOp, function: str = "forward") -> Estimate:
    """The op and lane executions of running `@function` of `module` in the interpreters."""
    func = SymbolTable.lookup_symbol(module, function)
    if func is None:
        return Estimate(0, "")
    launches: list[tuple[Work, str]] = []
    total = Work()
    for region in func.regions:
        total += _executions(region, module, launches)
    heaviest = max(launches, default=(Work(), ""), key=lambda launch: launch[0].seconds)[1]
    return Estimate(total.ops, heaviest, total.lane_ops)

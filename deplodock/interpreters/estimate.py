"""How long the tile- and kernel-level interpreters will take on a module, before running it.

Those interpreters dispatch one Python call per op they execute: they run all threads of a
block at once, as numpy arrays, so the thread count barely matters, but every block is a
separate pass over the kernel body. The time is therefore close to the number of *op
executions* times a fixed cost per execution: ops inside a loop count once per trip, a
kernel's body once per block. `run --device cpu` uses this to warn before a run of minutes,
so that nobody waits in silence. (The tensor and loop interpreters evaluate whole arrays
and loop nests at once and are not modeled here.)

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

#: Seconds per executed op of the tile and kernel interpreters on this project's 2-core
#: development machine (numpy on 32-256 lanes): 0.9-2.8e-5 over GEMMs, norms, softmax,
#: attention, convolution and scans (measured 2026-11-26), so estimates run high rather
#: than low.
SECONDS_PER_OP = 2.5e-5


@dataclass(frozen=True)
class Estimate:
    """The op executions of a whole run, their modeled seconds, and the costliest launch."""

    op_executions: int
    heaviest: str

    @property
    def seconds(self) -> float:
        return self.op_executions * SECONDS_PER_OP


def _trips(op: Operation) -> int:
    """How often the body of `op` runs per execution of `op` (1 for a plain region)."""
    if isinstance(op, loop.ForOp):
        return op.trip_count
    if isinstance(op, tile.ForOp | kernel.ForOp):
        start = constant_index(op.lb)
        span = op.upper - (start if start is not None else 0)  # per-thread starts: the most
        return max(0, -(-span // op.step_value))
    if isinstance(op, tile.GridOp):
        return op.count
    return 1


def _executions(region: Region, module: ModuleOp, launches: list[tuple[int, str]]) -> int:
    """Op executions of one run of `region`; launches found inside record their cost."""
    total = 0
    for block in region.blocks:
        for op in block.ops:
            total += 1
            callee = _launched(op, module)
            if callee is not None:
                cost = _kernel_executions(callee, module, launches)
                launches.append((cost, _describe(callee)))
                total += cost
            for inner in op.regions:
                total += _trips(op) * _executions(inner, module, launches)
    return total


def _launched(op: Operation, module: ModuleOp) -> Operation | None:
    """The kernel a launch op runs (loop, tile and kernel levels), else None."""
    if not isinstance(op, loop.LaunchOp | tile.LaunchOp | kernel.LaunchOp):
        return None
    return SymbolTable.lookup_symbol(module, op.callee)


def _kernel_executions(func: Operation, module: ModuleOp, launches: list[tuple[int, str]]) -> int:
    per_block = sum(_executions(r, module, launches) for r in func.regions)
    return per_block * (func.grid_size if isinstance(func, kernel.FuncOp) else 1)


def _describe(func: Operation) -> str:
    name = f"@{symbol_name(func)}"
    if isinstance(func, kernel.FuncOp):
        return f"{name}: {func.grid_size} blocks of {func.block_size} threads"
    grids = [op.count for op in func.walk() if isinstance(op, tile.GridOp)]
    return f"{name}: {grids[0]} blocks" if grids else name


def estimate_interpretation(module: ModuleOp, function: str = "forward") -> Estimate:
    """The op executions of running `@function` of `module` in the interpreters."""
    func = SymbolTable.lookup_symbol(module, function)
    if func is None:
        return Estimate(0, "")
    launches: list[tuple[int, str]] = []
    total = sum(_executions(r, module, launches) for r in func.regions)
    heaviest = max(launches, default=(0, ""))[1]
    return Estimate(total, heaviest)

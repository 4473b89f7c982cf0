"""Lifting patterns of `convert-tensor-to-loop`, one `LiftPattern` per tensor op.

- `lift`: the shared part (kernel naming and creation, alloc + launch in `@forward`);
- `elementwise`, `reduce`, `scan`, `recurrence`, `index_map` (with concat), `gather`: each
  op's kernel body.
"""

from __future__ import annotations

from deplodock.passes.tensor_to_loop.elementwise import LiftElementwise
from deplodock.passes.tensor_to_loop.gather import LiftGather
from deplodock.passes.tensor_to_loop.index_map import LiftIndexMap
from deplodock.passes.tensor_to_loop.lift import KernelNamer, LiftPattern
from deplodock.passes.tensor_to_loop.recurrence import LiftRecurrence
from deplodock.passes.tensor_to_loop.reduce import LiftReduce
from deplodock.passes.tensor_to_loop.scan import LiftScan


def lift_patterns(namer: KernelNamer) -> list[LiftPattern]:
    """One pattern per tensor op, sharing `namer` so kernel names stay unique."""
    return [
        LiftElementwise(namer),
        LiftReduce(namer),
        LiftScan(namer),
        LiftRecurrence(namer),
        LiftIndexMap(namer),
        LiftGather(namer),
    ]


__all__ = [
    "KernelNamer",
    "LiftElementwise",
    "LiftGather",
    "LiftIndexMap",
    "LiftPattern",
    "LiftRecurrence",
    "LiftReduce",
    "LiftScan",
    "lift_patterns",
]

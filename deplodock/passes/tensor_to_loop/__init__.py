"""Lifting patterns of `convert-tensor-to-loop`, one `LiftPattern` per tensor op.

- `lift`: the shared part (kernel naming and creation, alloc + launch in `@forward`);
- `elementwise`, `reduce`, `scan`, `recurrence`, `index_map` (with concat), `pad` (a concat
  with constant fills, as one nest), `gather`: each op's kernel body.
"""

from __future__ import annotations

from collections.abc import Mapping

from xdsl.ir import Operation

from deplodock.passes.tensor_to_loop.elementwise import LiftElementwise
from deplodock.passes.tensor_to_loop.gather import LiftGather
from deplodock.passes.tensor_to_loop.index_map import LiftIndexMap
from deplodock.passes.tensor_to_loop.lift import KernelNamer, LiftPattern
from deplodock.passes.tensor_to_loop.pad import LiftPad, Pad, find_pads
from deplodock.passes.tensor_to_loop.recurrence import LiftRecurrence
from deplodock.passes.tensor_to_loop.reduce import LiftReduce
from deplodock.passes.tensor_to_loop.scan import LiftScan


def lift_patterns(namer: KernelNamer, pads: Mapping[Operation, Pad]) -> list[LiftPattern]:
    """One pattern per tensor op, sharing `namer` so kernel names stay unique; the pads
    (`find_pads`, taken before lifting) go to `LiftPad` before `LiftIndexMap` sees them."""
    return [
        LiftPad(namer, pads),
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
    "LiftPad",
    "LiftPattern",
    "LiftRecurrence",
    "LiftReduce",
    "LiftScan",
    "Pad",
    "find_pads",
    "lift_patterns",
]

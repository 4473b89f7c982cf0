"""`tile-cse`: compute once what a scheduled kernel computes twice.

Trigger: any `tile.kernel`; it runs last in the tile stage, after unrolling and hoisting have
laid out the kernel's straight-line code.

Rewrite: xDSL's common-subexpression elimination, on each kernel. An op that is pure (`arith`,
`math`, `tile.thread_tile`, `tile.combine`) and computes what an op that dominates it
computes, on the same operands, is replaced by it. A load is replaced only by an identical
load earlier in the same block with no possible write between them: a store, a barrier
(whose memory effects are not declared, so they count as a write) or a `cp.async` wait
stops it.

Why: the row passes keep a row in registers and walk it twice. A softmax computes
`exp(x_i - max)` once for the sum and again for the output, and `tile-unroll` lays both
copies out side by side. nvcc does not merge them: the bf16 softmax at s512 issued 32
`MUFU.EX2` per thread for its 16 elements, and issues 16 after this pass. Repeated index math
of unrolled copies goes the same way.

    %e1 = math.exp %d0 : f32                %e1 = math.exp %d0 : f32
    %s1 = arith.addf %s0, %e1 : f32   ==>   %s1 = arith.addf %s0, %e1 : f32
    ...                                     ...
    %e2 = math.exp %d0 : f32                %o = arith.mulf %e1, %inv : f32
    %o = arith.mulf %e2, %inv : f32
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.transforms.common_subexpression_elimination import cse

from deplodock.dialects import tile
from deplodock.passes.tile.kernel_pass import TileKernelPass


@dataclass(frozen=True)
class TileCsePass(TileKernelPass):
    """Repeated pure computations (and reloads with no write between) merged (module doc)."""

    name = "tile-cse"

    def apply_to_kernel(self, kernel: tile.KernelOp) -> None:
        cse(kernel)

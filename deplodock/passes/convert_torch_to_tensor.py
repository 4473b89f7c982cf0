"""`convert-torch-to-tensor`: decompose every torch op into the three tensor primitives.

Each torch op has one rewrite pattern (in `deplodock/passes/torch_to_tensor/`) that builds
its replacement out of `tensor.elementwise`, `tensor.reduce` and `tensor.index_map`.
Function signatures keep their tensor types. Afterwards no torch op may remain.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import GreedyRewritePatternApplier, PatternRewriteWalker
from xdsl.utils.exceptions import PassFailedException

from deplodock.passes.torch_to_tensor import ALL_PATTERNS


@dataclass(frozen=True)
class ConvertTorchToTensorPass(ModulePass):
    name = "convert-torch-to-tensor"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(GreedyRewritePatternApplier(list(ALL_PATTERNS))).rewrite_module(op)
        leftover = sorted({o.name for o in op.walk() if o.dialect_name() == "torch"})
        if leftover:
            raise PassFailedException(
                f"convert-torch-to-tensor: no decomposition for {', '.join(leftover)}"
            )

"""`convert-torch-to-tensor`: decompose every torch op into the three tensor primitives.

Each torch op has one rewrite pattern (in `deplodock/passes/torch_to_tensor/`) that builds
its replacement out of `tensor.elementwise`, `tensor.reduce` and `tensor.index_map`.
Function signatures keep their tensor types. Afterwards no torch op may remain.

Option `pad-keys` (default true): attention's keys are padded to whole chunks, so that
attention at any key count can be one kernel (`torch_to_tensor/attention.py`); false keeps
the keys as they are, and attention over, say, 40 keys keeps its scores in a buffer of
their own (the two-kernel form, which the tile passes' tests of that form build).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import GreedyRewritePatternApplier, PatternRewriteWalker
from xdsl.utils.exceptions import PassFailedException

from deplodock.passes.torch_to_tensor import ALL_PATTERNS
from deplodock.passes.torch_to_tensor.attention import ScaledDotProductAttentionLowering


@dataclass(frozen=True)
class ConvertTorchToTensorPass(ModulePass):
    name = "convert-torch-to-tensor"

    pad_keys: bool = True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        patterns = [
            ScaledDotProductAttentionLowering(self.pad_keys)
            if isinstance(pattern, ScaledDotProductAttentionLowering)
            else pattern
            for pattern in ALL_PATTERNS
        ]
        PatternRewriteWalker(GreedyRewritePatternApplier(patterns)).rewrite_module(op)
        leftover = sorted({o.name for o in op.walk() if o.dialect_name() == "torch"})
        if leftover:
            raise PassFailedException(
                f"convert-torch-to-tensor: no decomposition for {', '.join(leftover)}"
            )

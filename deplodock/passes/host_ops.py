"""The host side of a lowering: `X.alloc` and `X.launch` become the next level's twins.

From the loop level down, `@forward` is the same host sequence at every level (allocate the
buffers, launch the kernels in order); only the dialect prefix changes. Each conversion pass
adds this one pattern instead of writing its own two.

```python
LowerHostOps("tile", kernel.AllocOp, kernel.LaunchOp)   # in convert-tile-to-kernel
```
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import MemRefType, SymbolRefAttr
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from deplodock.dialects.common import AllocOpBase, LaunchOpBase


@dataclass
class LowerHostOps(RewritePattern):
    """Replaces the `source` dialect's alloc and launch ops (the replace keeps name hints)."""

    source: str
    alloc: Callable[[MemRefType], Operation]
    launch: Callable[[SymbolRefAttr, Sequence[SSAValue]], Operation]

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if op.dialect_name() != self.source:
            return
        if isinstance(op, AllocOpBase):
            assert isinstance(op.res.type, MemRefType)
            rewriter.replace(op, self.alloc(op.res.type))
        elif isinstance(op, LaunchOpBase):
            rewriter.replace(op, self.launch(op.callee, op.args))
